"""Goose: SQLite `sessions/sessions.db` table `sessions(working_dir, updated_at)`, and pre-1.10 `sessions/*.jsonl`
whose first line holds `working_dir`. Data dir: `$GOOSE_PATH_ROOT/data`, else `$XDG_DATA_HOME/goose`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from fleet.presence.files import CACHE, first_json_line, parse_time, recent_files
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting
from fleet.presence.sqlite_ro import open_readonly, query
from fleet.xdg import data_home


def _data_dir(home: Path, environ: Mapping[str, str]) -> Path:
    root = environ.get("GOOSE_PATH_ROOT")
    if root and os.path.isabs(root):
        return Path(root) / "data"
    return data_home(environ, home) / "goose"


def _working_dir(path: Path) -> str | None:
    first = first_json_line(path, 64 * 1024)
    value = first.get("working_dir") if first else None
    return value if isinstance(value, str) else None


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    sessions = _data_dir(home, environ) / "sessions"
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    out = []
    with open_readonly(sessions / "sessions.db", cutoff) as conn:
        rows = [] if conn is None else query(
            conn, "sessions", ("working_dir", "updated_at"),
            "SELECT working_dir, updated_at FROM sessions ORDER BY updated_at DESC LIMIT 256")
    for working_dir, updated in rows:
        at, repo = parse_time(updated, now), repo_map.find(working_dir)
        if at is not None and at >= cutoff and repo is not None:
            out.append(Sighting(agent="goose", repo=repo, source="session", last_activity=at))
    for path, st in recent_files(sessions, "*.jsonl", cutoff):
        repo = repo_map.find(CACHE.get(path, st, _working_dir))
        if repo is not None:
            out.append(Sighting(agent="goose", repo=repo, source="session", last_activity=min(st.st_mtime, now)))
    return out
