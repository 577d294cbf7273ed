"""Cline CLI: SQLite `sessions.db` table `sessions(cwd, workspace_root, updated_at, ended_at, pid)`.

A session with no `ended_at` whose pid is alive means Cline is open there. Locations, first found wins:
`$CLINE_DB_DATA_DIR/sessions.db`, `$CLINE_DATA_DIR/db/sessions.db`, `$CLINE_DIR/data/db/sessions.db`,
`~/.cline/data/db/sessions.db`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from fleet.presence.files import parse_time
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting
from fleet.presence.sqlite_ro import open_readonly, query


def _store(home: Path, environ: Mapping[str, str]) -> Path:
    candidates = []
    for var, tail in (("CLINE_DB_DATA_DIR", "sessions.db"), ("CLINE_DATA_DIR", "db/sessions.db"),
                      ("CLINE_DIR", "data/db/sessions.db")):
        value = environ.get(var)
        if value and os.path.isabs(value):
            candidates.append(Path(value) / tail)
    candidates.append(home / ".cline" / "data" / "db" / "sessions.db")
    return next((path for path in candidates if path.exists()), candidates[-1])


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS, proc_root: Path = Path("/proc")) -> list[Sighting]:
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    with open_readonly(_store(home, environ), cutoff) as conn:
        rows = [] if conn is None else query(
            conn, "sessions", ("cwd", "workspace_root", "updated_at", "ended_at", "pid"),
            "SELECT cwd, workspace_root, updated_at, ended_at, pid FROM sessions "
            "ORDER BY updated_at DESC LIMIT 256")
    out = []
    for cwd, workspace_root, updated, ended, pid in rows:
        repo = repo_map.find(cwd) or repo_map.find(workspace_root)
        at = parse_time(updated, now)
        alive = ended is None and isinstance(pid, int) and pid > 0 and (proc_root / str(pid)).exists()
        if repo is None or (not alive and (at is None or at < cutoff)):
            continue
        out.append(Sighting(agent="cline", repo=repo, source="session", last_activity=at,
                            pid=pid if alive else None, alive=alive, idle=ended is not None))
    return out
