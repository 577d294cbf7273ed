"""Qwen Code: Claude-style JSONL chats at `projects/*/chats/<session id>.jsonl` (`$QWEN_HOME` or `~/.qwen`)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from fleet.presence.claude import transcript_sightings
from fleet.presence.files import recent_files
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting
from fleet.xdg import env_dir


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    root = env_dir("QWEN_HOME", ".qwen", environ, home)
    files = recent_files(root / "projects", "*/chats/*.jsonl", now - thresholds.recent)
    return transcript_sightings("qwen", files, RepoMap.of(repos), now, named=True)
