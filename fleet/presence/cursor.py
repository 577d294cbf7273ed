"""Cursor Agent CLI: `chats/<workspace hash>/<chat id>/meta.json` (`cwd`, `updatedAtMs`) next to `store.db`,
under `$CURSOR_CONFIG_DIR` or `~/.cursor`. Activity is the newest of meta.json, store.db and its `-wal`.
(The Cursor editor itself is covered by `fleet.presence.editors`.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from fleet.presence.files import mtime, read_json, recent_files
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting
from fleet.presence.sqlite_ro import store_mtime
from fleet.xdg import env_dir


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    chats = env_dir("CURSOR_CONFIG_DIR", ".cursor", environ, home) / "chats"
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    folders = {path.parent for pattern in ("*/*/meta.json", "*/*/store.db", "*/*/store.db-wal")
               for path, _ in recent_files(chats, pattern, cutoff)}
    out = []
    for folder in folders:
        meta = read_json(folder / "meta.json", 64 * 1024)
        repo = repo_map.find(meta.get("cwd")) if isinstance(meta, dict) else None
        if repo is None:
            continue
        times = [t for t in (store_mtime(folder / "store.db"), mtime(folder / "meta.json")) if t]
        out.append(Sighting(agent="cursor-agent", repo=repo, source="session", last_activity=min(max(times), now)))
    return out
