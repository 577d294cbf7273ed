"""Agent presence: which coding agents are working in which fleet repo, from three kinds of evidence.

Detectors (one module per source: `procs`, `claude`, `codex`, `gemini`, `qwen`, `copilot`, `opencode`,
`goose`, `cline`, `continuedev`, `amp`, `cursor`, `editors`, `traces`, `bridge`) each return `Sighting`s;
`merge` folds them into one row per (agent, repo) with a state; `collide` turns rows into attention items.

`detect_all`, `presence` and `refresh_presence` (fleet/presence/refresh.py, which loads every detector) are
loaded on first use: an agent's hook command records its presence through `hooks` and starts none of them.
"""

from fleet.presence.bridge import agent_id, record_bridge_activity
from fleet.presence.collide import collisions
from fleet.presence.merge import merge
from fleet.presence.model import DEFAULT_THRESHOLDS, Sighting, Thresholds

__all__ = [
    "DEFAULT_THRESHOLDS", "Sighting", "Thresholds", "agent_id", "collisions", "detect_all", "merge",
    "presence", "record_bridge_activity", "refresh_presence",
]
_REFRESH = ("detect_all", "presence", "refresh_presence")


def __getattr__(name: str):
    if name in _REFRESH:
        from fleet.presence import refresh

        return getattr(refresh, name)
    raise AttributeError(f"module 'fleet.presence' has no attribute {name!r}")
