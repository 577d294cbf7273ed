"""Qwen Code: JSONL chats at `projects/<sanitized cwd>/chats/<session id>.jsonl` under its runtime folder
(`$QWEN_RUNTIME_DIR`, else `$QWEN_HOME` or `~/.qwen`), written by its ChatRecordingService: uuid/parentUuid
records of type `user`, `assistant` (Gemini `Content`: `functionCall` parts), `tool_result` (the answer to a
call) and `system` (telemetry, titles, checkpoints), each with its `cwd`. Read by Claude Code's transcript
parser (fleet/presence/claude.py), which knows those record types."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from fleet.presence.claude import transcript_sightings
from fleet.presence.files import recent_files
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting
from fleet.xdg import env_dir


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    runtime = environ.get("QWEN_RUNTIME_DIR")
    root = Path(runtime) if runtime and os.path.isabs(runtime) else env_dir("QWEN_HOME", ".qwen", environ, home)
    files = recent_files(root / "projects", "*/chats/*.jsonl", now - thresholds.recent)
    return transcript_sightings("qwen", files, RepoMap.of(repos), now, named=True)
