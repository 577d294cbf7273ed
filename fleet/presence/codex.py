"""Codex CLI: rollouts `sessions/YYYY/MM/DD/rollout-*.jsonl` under `$CODEX_HOME` or `~/.codex`.

Line shape `{timestamp, type, payload}`. The first line (`session_meta`) gives cwd and git branch; newer
`turn_context` lines override the cwd. Tools come from `response_item` calls, touched files from
`apply_patch` headers (paths relative to the cwd), the turn state from the newest `task_started` /
`task_complete` event (older builds persisted neither: absence means "unknown", not idle). The session id
is `session_meta`'s `id` (the thread id Codex's hooks carry as `session_id`). Approval requests are not in
rollouts (Codex's rollout policy drops `exec_approval_request` and `apply_patch_approval_request` as
transient events), so a rollout shows a finished turn, never a pending approval: that needs Codex's hooks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from fleet.presence.files import json_lines_reversed, parse_time, read_head, read_tail, recent_files
from fleet.presence.hooks import clean_session
from fleet.presence.model import (DEFAULT_THRESHOLDS, MAX_FILES, Activity, RepoMap, Sighting,
                                   session_sightings)
from fleet.xdg import env_dir

_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.M)
_DONE = {"task_complete", "turn_complete", "turn_aborted"}
_STARTED = {"task_started", "turn_started"}
_NEEDLES = (b"turn_context", b"event_msg", b"_call")        # the only line kinds read below


def _session_meta(path: Path) -> dict[str, Any]:
    for limit in (64 * 1024, 512 * 1024):
        head = read_head(path, limit)
        line, sep, _ = head.partition(b"\n")
        if sep or len(head) < limit:
            try:
                obj = json.loads(line)
            except ValueError:
                return {}
            payload = obj.get("payload") if isinstance(obj, dict) and obj.get("type") == "session_meta" else None
            return payload if isinstance(payload, dict) else {}
    return {}


def _patch_files(value: Any, depth: int = 0) -> list[str]:
    """`apply_patch` file headers anywhere in a call's input (a patch string, or JSON arguments holding one)."""
    if depth > 4:
        return []
    if isinstance(value, str):
        if value[:1] in "{[":
            try:
                return _patch_files(json.loads(value), depth + 1)
            except ValueError:
                pass
        return _PATCH_FILE.findall(value) if "*** " in value else []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [name for item in items for name in _patch_files(item, depth + 1)]


def parse_rollout(path: Path) -> Activity:
    """Cwd, branch, last tool, patched files and turn state of one rollout (no prompts or outputs kept)."""
    meta = _session_meta(path)
    git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
    act = Activity(cwd=meta.get("cwd") if isinstance(meta.get("cwd"), str) else None,
                   branch=git.get("branch") if isinstance(git.get("branch"), str) else None,
                   session=clean_session(meta.get("id")))
    newest_cwd = None
    turn_known = False
    for record in json_lines_reversed(read_tail(path), _NEEDLES):
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        kind, sub = record.get("type"), payload.get("type")
        if kind == "turn_context" and newest_cwd is None and isinstance(payload.get("cwd"), str):
            newest_cwd = payload["cwd"]
        elif kind == "event_msg" and not turn_known and sub in _DONE | _STARTED:
            turn_known = True
            act.idle = sub in _DONE
            act.at = parse_time(record.get("timestamp"))
        elif kind == "response_item" and sub in ("function_call", "custom_tool_call", "local_shell_call"):
            name = payload.get("name") if sub != "local_shell_call" else "shell"
            if act.tool is None and isinstance(name, str):
                act.tool = name
            body = payload.get("input") if sub == "custom_tool_call" else payload.get("arguments")
            for name in _patch_files(body):
                if name not in act.files and len(act.files) < MAX_FILES:
                    act.files.append(name)
    act.cwd = newest_cwd or act.cwd
    return act


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    root = env_dir("CODEX_HOME", ".codex", environ, home)
    repo_map = RepoMap.of(repos)
    files = recent_files(root / "sessions", "*/*/*/rollout-*.jsonl", now - thresholds.recent)
    return session_sightings("codex", files, parse_rollout, repo_map, now)
