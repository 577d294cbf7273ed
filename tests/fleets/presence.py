"""Write each agent's documented session formats into a fake HOME (and traces into repos) for presence tests.

Every writer puts SECRET (a stand-in for prompt text, file contents and tokens) where the real agent keeps
its conversation, so tests can prove it never reaches the index.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

from fleet.index.scan import scan
from fleet.index.store import open_index
from tests.fleets.gitbuild import init_repo

SECRET = "PROMPT-SECRET-7f3a: rewrite the billing module"


def one_repo_fleet(tmp_path: Path) -> tuple[Path, Path]:
    """A fleet of one repo (`fleet/api`, one commit) scanned into an index: (the repo, the index's path)."""
    repo = init_repo(tmp_path / "fleet" / "api", commits=1)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(tmp_path / "fleet")])
    return repo, db


def touch(path: Path, at: float) -> Path:
    os.utime(path, (at, at))
    return path


def jsonl(path: Path, records: list, *, at: float, tail: str = "") -> Path:
    """Records one per line (strings are written raw, to make malformed lines), plus an optional partial tail."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    return touch(path, at)


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


def claude_transcript(home: Path, folder: str, cwd: str, *, at: float, branch: str = "main",
                      tools: list[tuple[str, dict]] = (), finished: bool = False, name: str = "s1",
                      pending: str | None = None) -> Path:
    """A transcript as Claude Code writes it; `pending`: a last tool call (that tool's name) with no result yet,
    as the file stands while Claude Code shows its permission prompt, or runs the tool."""
    base = {"sessionId": name, "version": "2.1.50", "cwd": cwd, "gitBranch": branch, "timestamp": iso(at)}
    records: list = [
        {"type": "summary", "summary": SECRET, "leafUuid": "x"},
        {**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content": SECRET}},
        "{not json at all",
    ]
    for i, (tool, args) in enumerate(tools):
        records.append({**base, "type": "assistant", "uuid": f"a{i}", "message": {
            "role": "assistant", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": SECRET},
                        {"type": "tool_use", "id": f"t{i}", "name": tool, "input": {**args, "content": SECRET}}]}})
        records.append({**base, "type": "user", "uuid": f"r{i}", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": SECRET}]}})
    if pending:
        records.append({**base, "type": "assistant", "uuid": "p", "message": {
            "role": "assistant", "stop_reason": "tool_use", "content": [
                {"type": "tool_use", "id": "tp", "name": pending, "input": {"command": SECRET}}]}})
    if finished:
        records.append({**base, "type": "assistant", "uuid": "end", "message": {
            "role": "assistant", "stop_reason": "end_turn", "content": [{"type": "text", "text": SECRET}]}})
    return jsonl(home / ".claude" / "projects" / folder / f"{name}.jsonl", records, at=at,
                 tail='{"type": "user", "cwd": "/trunc')


def claude_status(root: Path, pid: int, cwd: str, *, status: str, proc_start: int | str | None, at: float,
                  session: str = "s1") -> Path:
    doc = {"pid": pid, "sessionId": session, "cwd": cwd, "startedAt": int(at * 1000), "status": status,
           "statusUpdatedAt": int(at * 1000), "kind": "interactive", "entrypoint": "cli"}
    if proc_start is not None:
        doc["procStart"] = proc_start
    path = root / "sessions" / f"{pid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return touch(path, at)


def codex_rollout(root: Path, cwd: str, *, at: float, branch: str, patch_files: list[str], done: bool,
                  name: str = "0001") -> Path:
    patch = "*** Begin Patch\n" + "".join(f"*** Update File: {f}\n@@\n-{SECRET}\n+x\n" for f in patch_files) \
        + "*** End Patch\n"
    records: list = [
        {"timestamp": iso(at), "type": "session_meta", "payload": {
            "id": name, "timestamp": iso(at), "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.50.0",
            "base_instructions": {"text": SECRET}, "git": {"commit_hash": "abc", "branch": branch,
                                                           "repository_url": "git@example.com:x.git"}}},
        {"timestamp": iso(at), "type": "event_msg", "payload": {"type": "task_started"}},
        {"timestamp": iso(at), "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": SECRET}]}},
        {"timestamp": iso(at), "type": "turn_context", "payload": {"cwd": cwd, "model": "gpt-5"}},
        '{"timestamp": "broken',
        {"timestamp": iso(at), "type": "response_item", "payload": {
            "type": "function_call", "name": "shell", "call_id": "c1",
            "arguments": json.dumps({"command": ["apply_patch", patch]})}},
        {"timestamp": iso(at), "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "c1", "output": SECRET}},
        {"timestamp": iso(at), "type": "some_future_variant", "payload": {"x": 1}},
    ]
    if done:
        records.append({"timestamp": iso(at), "type": "event_msg", "payload": {"type": "task_complete",
                                                                               "last_agent_message": SECRET}})
    return jsonl(root / "sessions" / "2026" / "05" / "01" / f"rollout-2026-05-01T10-00-00-{name}.jsonl",
                 records, at=at)


def gemini_chat(home: Path, slug: str, *, at: float, project: str | None = None, tool_file: str | None = None,
                final: bool = False) -> Path:
    folder = home / ".gemini" / "tmp" / slug
    folder.mkdir(parents=True, exist_ok=True)
    if project is not None:
        (folder / ".project_root").write_text(project, encoding="utf-8")
    records: list = [
        {"sessionId": "g1", "projectHash": "h", "startTime": iso(at), "lastUpdated": iso(at), "kind": "main"},
        {"id": "m1", "timestamp": iso(at), "type": "user", "content": [{"text": SECRET}]},
        {"$set": {"lastUpdated": iso(at)}},
    ]
    if tool_file:
        records.append({"id": "m2", "timestamp": iso(at), "type": "gemini", "content": SECRET, "toolCalls": [
            {"id": "c1", "name": "write_file", "args": {"file_path": tool_file, "content": SECRET},
             "status": "success"}]})
    if final:
        records.append({"id": "m3", "timestamp": iso(at), "type": "gemini", "content": SECRET})
    return jsonl(folder / "chats" / "session-2026-05-01T10-00-g1.jsonl", records, at=at)


def gemini_registry(home: Path, mapping: dict[str, str]) -> None:
    path = home / ".gemini" / "projects.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"projects": mapping}), encoding="utf-8")


def legacy_gemini_slug(project: str) -> str:
    return hashlib.sha256(project.encode()).hexdigest()


def qwen_chat(home: Path, cwd: str, *, at: float, tool_file: str) -> Path:
    base = {"sessionId": "q1", "cwd": cwd, "gitBranch": "qwen-branch", "timestamp": iso(at)}
    records = [
        {**base, "type": "user", "message": {"role": "user", "parts": [{"text": SECRET}]}},
        {**base, "type": "assistant", "message": {"role": "model", "parts": [
            {"functionCall": {"name": "edit", "args": {"file_path": tool_file, "new_string": SECRET}}}]}},
    ]
    return jsonl(home / ".qwen" / "projects" / "x" / "chats" / "q1.jsonl", records, at=at)


def copilot_session(home: Path, cwd: str, *, at: float, branch: str | None, ended: bool) -> Path:
    folder = home / ".copilot" / "session-state" / "7d1c"
    folder.mkdir(parents=True, exist_ok=True)
    yaml = f"id: 7d1c\ncwd: {cwd}\nsummary: \"{SECRET}\"\n" + (f"branch: {branch}\n" if branch else "")
    (folder / "workspace.yaml").write_text(yaml, encoding="utf-8")
    touch(folder / "workspace.yaml", at)
    events: list = [
        {"type": "session.start", "data": {}, "timestamp": iso(at)},
        {"type": "user.message", "data": {"content": SECRET}, "timestamp": iso(at)},
        {"type": "tool.execution_start", "data": {"toolName": "str_replace_editor",
                                                  "arguments": {"path": os.path.join(cwd, "docs/guide.md"),
                                                                "new_str": SECRET}}, "timestamp": iso(at)},
    ]
    if ended:
        events.append({"type": "assistant.turn_end", "data": {}, "timestamp": iso(at)})
    return jsonl(folder / "events.jsonl", events, at=at)


def sqlite_store(path: Path, schema: list[str], rows: list[tuple[str, tuple]], *, at: float, wal: bool = True) -> Path:
    """A database in WAL mode, checkpointed and closed (so no -wal/-shm remain), with its mtime set."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    for statement in schema:
        conn.execute(statement)
    for sql, params in rows:
        conn.execute(sql, params)
    conn.commit()
    conn.close()
    return touch(path, at)


def opencode_db(path: Path, directory: str, *, at: float, running: bool, archived: bool = False) -> Path:
    ms = int(at * 1000)
    part = {"type": "tool", "tool": "edit", "callID": "c1",
            "state": {"status": "running" if running else "completed",
                      "input": {"filePath": os.path.join(directory, "pkg/mod.ts"), "newString": SECRET}}}
    text = {"type": "text", "text": SECRET}
    return sqlite_store(path, [
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, directory TEXT, title TEXT, version TEXT,"
        " time_created INTEGER, time_updated INTEGER, time_archived INTEGER)",
        "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER,"
        " time_updated INTEGER, data TEXT)",
    ], [
        ("INSERT INTO session VALUES (?,?,?,?,?,?,?,?)",
         ("ses_1", "p", directory, SECRET, "1", ms, ms, ms if archived else None)),
        ("INSERT INTO part VALUES (?,?,?,?,?,?)", ("prt_1", "m1", "ses_1", ms, ms, json.dumps(text))),
        ("INSERT INTO part VALUES (?,?,?,?,?,?)", ("prt_2", "m1", "ses_1", ms, ms, json.dumps(part))),
    ], at=at)
