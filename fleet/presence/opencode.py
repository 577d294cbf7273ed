"""OpenCode (and its fork Kilo CLI): SQLite `opencode*.db` tables `session` / `part`, plus the legacy JSON store.

`session(directory, time_updated ms, time_archived)` says where and when; a tool part
(`part.data = {type: "tool", tool, state: {status, input: {filePath}}}`) gives the last tool and, while its
status is `running`, proof of work now. Only those JSON keys are extracted, never message text.
Stores: `$OPENCODE_DB`, else `$XDG_DATA_HOME/opencode/opencode*.db` (Kilo: `…/kilo/kilo*.db`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from fleet.presence.files import CACHE, parse_time, read_json, recent_files
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting, relative_files
from fleet.presence.sqlite_ro import columns, open_readonly, query
from fleet.xdg import data_home

_TOOL_SQL = """
SELECT session_id, json_extract(data, '$.tool'), json_extract(data, '$.state.status'),
       json_extract(data, '$.state.input.filePath')
FROM part WHERE session_id IN ({marks}) AND json_extract(data, '$.type') = 'tool'
ORDER BY {order} DESC LIMIT 256
"""


def _stores(agent: str, home: Path, environ: Mapping[str, str]) -> list[Path]:
    data = data_home(environ, home)
    override = environ.get("OPENCODE_DB") if agent == "opencode" else None
    if override and os.path.isabs(override):
        return [Path(override)]
    name = "opencode" if agent == "opencode" else "kilo"
    try:
        return sorted((data / name).glob(f"{name}*.db"))
    except OSError:
        return []


def _from_db(agent: str, db: Path, repo_map: RepoMap, now: float, cutoff: float) -> list[Sighting]:
    out = []
    with open_readonly(db, cutoff) as conn:
        if conn is None:
            return []
        cols = columns(conn, "session")
        archived = " AND time_archived IS NULL" if "time_archived" in cols else ""
        sessions = query(conn, "session", ("id", "directory", "time_updated"),
                         f"SELECT id, directory, time_updated FROM session WHERE time_updated >= ?{archived} "
                         "ORDER BY time_updated DESC LIMIT 256", (int(cutoff * 1000),))
        by_session = {}
        for sid, directory, updated in sessions:
            repo = repo_map.find(directory)
            at = parse_time(updated, now)
            if repo is not None and at is not None:
                by_session[sid] = (repo, directory, at)
        tools: dict[str, list] = {}
        part_cols = columns(conn, "part")
        order = next((c for c in ("time_updated", "time_created", "id") if c in part_cols), None)
        if by_session and order:
            rows = query(conn, "part", ("session_id", "data"),
                         _TOOL_SQL.format(marks=",".join("?" * len(by_session)), order=order), list(by_session))
            for sid, tool, status, file_path in rows:
                entry = tools.setdefault(sid, [None, False, []])
                entry[0] = entry[0] or (tool if isinstance(tool, str) else None)
                entry[1] = entry[1] or status == "running"
                if isinstance(file_path, str):
                    entry[2].append(file_path)
        for sid, (repo, directory, at) in by_session.items():
            tool, running, files = tools.get(sid, (None, False, []))
            out.append(Sighting(agent=agent, repo=repo, source="session", last_activity=min(at, now), tool=tool,
                                files=relative_files(repo, directory, files), busy=running))
    return out


def _legacy_session(path: Path) -> tuple[str | None, float | None, bool]:
    doc = read_json(path, 256 * 1024)
    if not isinstance(doc, dict):
        return None, None, False
    times = doc.get("time") if isinstance(doc.get("time"), dict) else {}
    directory = doc.get("directory") if isinstance(doc.get("directory"), str) else None
    return directory, parse_time(times.get("updated")), bool(times.get("archived"))


def _detect_agent(agent: str, repos: list[str], now: float, home: Path, environ: Mapping[str, str],
                  thresholds) -> list[Sighting]:
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    out = []
    for db in _stores(agent, home, environ):
        out += _from_db(agent, db, repo_map, now, cutoff)
    if agent == "opencode":
        storage = data_home(environ, home) / "opencode" / "storage" / "session"
        for path, st in recent_files(storage, "*/*.json", cutoff):
            directory, updated, archived = CACHE.get(path, st, _legacy_session)
            repo = repo_map.find(directory)
            if repo is not None and not archived:
                out.append(Sighting(agent=agent, repo=repo, source="session",
                                    last_activity=min(updated or st.st_mtime, now)))
    return out


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    return _detect_agent("opencode", repos, now, home, environ, thresholds)


def detect_kilo(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
                thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    return _detect_agent("kilo", repos, now, home, environ, thresholds)
