"""GitHub Copilot CLI: `session-state/<id>/{workspace.yaml, events.jsonl}` under `$COPILOT_HOME` or `~/.copilot`.

`workspace.yaml` is flat (`cwd`, `git_root`, `branch`, …; git fields may be missing on fresh sessions);
`events.jsonl` lines are `{type, data, timestamp}`, where `assistant.turn_end` / `session.idle` end a turn
and `tool.execution_start` names the tool. The folder's name is the session id Copilot's hooks carry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from fleet.presence.files import json_lines_reversed, parse_time, read_head, read_tail, recent_files
from fleet.presence.hooks import clean_session
from fleet.presence.model import DEFAULT_THRESHOLDS, Activity, RepoMap, Sighting, session_sightings
from fleet.xdg import env_dir

_ENDS = {"assistant.turn_end", "session.idle", "session.shutdown"}
_STARTS = {"assistant.turn_start", "user.message", "tool.execution_start", "assistant.message"}
FILE_KEYS = ("path", "file_path", "filePath")


def read_flat_yaml(path: Path) -> dict[str, str]:
    """Top-level `key: scalar` pairs of a small YAML file; nested or multi-line values are ignored."""
    out = {}
    for line in read_head(path, 64 * 1024).decode("utf-8", "replace").splitlines():
        if not line or line[0] in " \t#-":
            continue
        key, sep, value = line.partition(":")
        value = value.strip()
        if sep and value and value[0] not in "|>[{&*":
            out[key.strip()] = value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value
    return out


def parse_session(folder: Path) -> Activity:
    meta = read_flat_yaml(folder / "workspace.yaml")
    branch = meta.get("branch")
    act = Activity(cwd=meta.get("cwd") or meta.get("git_root"), branch=branch or None,
                   session=clean_session(folder.name))
    turn_known = False
    for event in json_lines_reversed(read_tail(folder / "events.jsonl")):
        kind = event.get("type")
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        if not turn_known and kind in _ENDS | _STARTS:
            turn_known = True
            act.idle = kind in _ENDS
            act.at = parse_time(event.get("timestamp"))
        if kind == "tool.execution_start":
            if isinstance(data.get("toolName"), str):
                act.note_tool(data["toolName"], data.get("arguments"), FILE_KEYS)
    return act


def _parse_by_events(path: Path) -> Activity:
    return parse_session(path.parent)


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    root = env_dir("COPILOT_HOME", ".copilot", environ, home) / "session-state"
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    newest: dict[Path, tuple[Path, object]] = {}
    for path, st in recent_files(root, "*/workspace.yaml", cutoff) + recent_files(root, "*/events.jsonl", cutoff):
        if path.parent not in newest or st.st_mtime > newest[path.parent][1].st_mtime:
            newest[path.parent] = (path, st)
    return session_sightings("copilot", newest.values(), _parse_by_events, repo_map, now)
