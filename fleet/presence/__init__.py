"""Agent presence: which coding agents are working in which fleet repo, from three kinds of evidence.

Detectors (one module per source: `procs`, `claude`, `codex`, `gemini`, `qwen`, `copilot`, `opencode`,
`goose`, `cline`, `continuedev`, `amp`, `cursor`, `editors`, `traces`, `bridge`) each return `Sighting`s;
`merge` folds them into one row per (agent, repo) with a state; `collide` turns rows into attention items.
"""

from fleet.presence.bridge import agent_id, record_bridge_activity
from fleet.presence.collide import collisions
from fleet.presence.merge import merge
from fleet.presence.model import DEFAULT_THRESHOLDS, Sighting, Thresholds
from fleet.presence.refresh import detect_all, presence, refresh_presence

__all__ = [
    "DEFAULT_THRESHOLDS", "Sighting", "Thresholds", "agent_id", "collisions", "detect_all", "merge",
    "presence", "record_bridge_activity", "refresh_presence",
]
