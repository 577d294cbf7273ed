"""Claude Code: transcripts `projects/*/*.jsonl` and live status files `sessions/<pid>.json`.

The transcript folder name is a lossy encoding of the cwd (`/a-b` and `/a/b` collide), so the repo comes
from each record's own `cwd` field, never from the folder name. The status file (`status: busy|idle`) is
the best "working now" signal, trusted only while its pid is alive and its `procStart` matches the running
process (pid reuse). Home: `$CLAUDE_CONFIG_DIR` or `~/.claude`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from fleet.presence.files import json_lines_reversed, parse_time, read_json, read_tail, recent_files
from fleet.presence.model import (DEFAULT_THRESHOLDS, MAX_FILES, Activity, RepoMap, Sighting,
                                   session_sightings)
from fleet.presence.procs import classify
from fleet.xdg import env_dir
from fleet.procinfo import process_start, read_proc

FILE_KEYS = ("file_path", "notebook_path", "absolute_path")
# Tool calls that wait on the person while unanswered: they ask (question), or they are instant once allowed, so
# an unanswered one is a permission prompt (Bash runs a child process, which the process table sees as work).
# Subagents (Task), web fetches and MCP tools run long on their own: never read as waiting.
ASKING_TOOLS = {"AskUserQuestion": "question", "ExitPlanMode": "permission", "Bash": "permission",
                "Edit": "permission", "Write": "permission", "MultiEdit": "permission", "NotebookEdit": "permission",
                "run_shell_command": "permission", "write_file": "permission", "edit": "permission"}
# The records that say how a turn stands (the newest of them): Claude Code's user and assistant records (a
# tool's answer is a `user` record there), and Qwen Code's `tool_result` (its own record for a tool's answer:
# the call was answered, the model is next). Anything else (Claude's summaries, Qwen's `system` records:
# telemetry, titles, compression checkpoints) says nothing of it.
TURN_RECORDS = ("user", "assistant", "tool_result")
_FIRST_TRY = 64 * 1024
_MAX_RECORDS = 50
_NEEDLES = (b'"cwd"', b"tool_use", b"functionCall")          # records worth decoding start with one of these


def _blocks(record: dict[str, Any]) -> list[tuple[str, Any]]:
    """(tool name, input) pairs of one record: Claude `tool_use` blocks and Gemini-style `functionCall` parts."""
    message = record.get("message")
    if not isinstance(message, dict):
        return []
    found = []
    content = message.get("content")
    for block in reversed(content) if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            found.append((block["name"], block.get("input")))
    parts = message.get("parts")
    for part in reversed(parts) if isinstance(parts, list) else ():
        call = part.get("functionCall") if isinstance(part, dict) else None
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            found.append((call["name"], call.get("args")))
    return found


def _summarise(data: bytes) -> Activity:
    act = Activity()
    turn_known = False
    for count, record in enumerate(json_lines_reversed(data, _NEEDLES)):
        if act.cwd is None and isinstance(record.get("cwd"), str):
            act.cwd = record["cwd"]
            branch = record.get("gitBranch")
            act.branch = branch if isinstance(branch, str) and branch and branch != "HEAD" else None
        calls = _blocks(record)
        if not turn_known and record.get("type") in TURN_RECORDS:
            turn_known = True
            message = record.get("message")
            act.at = parse_time(record.get("timestamp"))
            act.idle = (record["type"] == "assistant" and isinstance(message, dict)
                        and message.get("stop_reason") == "end_turn")
            if record["type"] == "assistant" and calls:       # the newest record: a call nothing answered yet
                act.pending = ASKING_TOOLS.get(calls[0][0])
        for name, args in calls:
            act.note_tool(name, args, FILE_KEYS)
        if act.cwd and act.tool and (len(act.files) >= MAX_FILES or count >= _MAX_RECORDS):
            break
    return act


def parse_transcript(path: Path) -> Activity:
    """Cwd, branch, last tool, touched files and turn state from a Claude-style JSONL tail (no text kept)."""
    act = _summarise(read_tail(path, _FIRST_TRY))
    if act.cwd is None or act.tool is None:
        act = _summarise(read_tail(path))
    return act


def transcript_sightings(agent: str, files: Iterable[tuple[Path, os.stat_result]], repo_map: RepoMap,
                         now: float, named: bool = False) -> list[Sighting]:
    return session_sightings(agent, files, parse_transcript, repo_map, now, named)


def _status_sighting(path: Path, repo_map: RepoMap, now: float, proc_root: Path) -> Sighting | None:
    pid = int(path.stem)
    proc = read_proc(pid, proc_root)
    if proc is None:
        return None                                        # orphan file of a finished session
    doc = read_json(path, 64 * 1024)
    if not isinstance(doc, dict) or doc.get("pid", pid) != pid:
        return None
    recorded = doc.get("procStart")
    if recorded is not None:
        if str(recorded) != str(process_start(pid, proc_root)):
            return None                                    # the pid was reused by another process
    elif classify(proc.argv) != "claude-code":
        return None
    repo = repo_map.find(doc.get("cwd"))
    if repo is None:
        return None
    status = doc.get("status")
    at = parse_time(doc.get("statusUpdatedAt"), now) or parse_time(doc.get("updatedAt"), now)
    if at is None:
        try:
            at = path.stat().st_mtime
        except OSError:
            return None
    session = doc.get("sessionId")
    return Sighting(agent="claude-code", repo=repo, source="session", last_activity=min(at, now), pid=pid,
                    alive=True, busy=status == "busy", idle=status == "idle",
                    session=session if isinstance(session, str) and len(session) <= 128 else "")


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS, proc_root: Path = Path("/proc")) -> list[Sighting]:
    root = env_dir("CLAUDE_CONFIG_DIR", ".claude", environ, home)
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    out = transcript_sightings("claude-code", recent_files(root / "projects", "*/*.jsonl", cutoff),
                               repo_map, now, named=True)
    try:
        status_files = [p for p in (root / "sessions").iterdir() if p.suffix == ".json" and p.stem.isdigit()]
    except OSError:
        status_files = []
    for path in status_files:
        sighting = _status_sighting(path, repo_map, now, proc_root)
        if sighting is not None:
            out.append(sighting)
    return out
