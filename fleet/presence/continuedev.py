"""Continue (IDE extension and `cn` CLI): `sessions/<id>.json` with `workspaceDirectory` (a URI or a path),
under `$CONTINUE_GLOBAL_DIR` or `~/.continue`. Only that field is read, from the file's head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from fleet.presence.files import CACHE, recent_files
from fleet.presence.jsonscan import first_value
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting, path_from_uri
from fleet.xdg import env_dir


def _workspace(path: Path) -> str | None:
    return path_from_uri(first_value(path, "workspaceDirectory") or "")


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    sessions = env_dir("CONTINUE_GLOBAL_DIR", ".continue", environ, home) / "sessions"
    repo_map = RepoMap.of(repos)
    out = []
    for path, st in recent_files(sessions, "*.json", now - thresholds.recent):
        if path.name == "sessions.json":
            continue                                           # the index of all sessions, not one session
        repo = repo_map.find(CACHE.get(path, st, _workspace))
        if repo is not None:
            out.append(Sighting(agent="continue", repo=repo, source="session", last_activity=min(st.st_mtime, now)))
    return out
