"""Waiting read from the agents' own session files (no hooks installed): real transcripts and rollouts as the
agents write them, a real agent process (a program named like the agent, running in the repository) for
"the session's process lives", the real refresh over a scanned index. Hooks rank above; flapping keeps the
first time."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fleet.index.store import open_index
from fleet.presence import refresh_presence
from fleet.presence.hooks import record_hook_event
from fleet.procinfo import process_start
from fleet.timespec import iso
from tests.fleets import presence as fx


@pytest.fixture
def fleet(tmp_path: Path):
    repo, db = fx.one_repo_fleet(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    procs: list[subprocess.Popen] = []

    def agent_process(name: str, *argv: str) -> subprocess.Popen:
        """A live process the process table names `name` (a copy of a system program under that name)."""
        program = tmp_path / ("shell" if argv else "sleep") / name     # bash runs argv; sleep just lives
        program.parent.mkdir(exist_ok=True)
        if not program.exists():
            shutil.copy("/bin/bash" if argv else "/bin/sleep", program)
        proc = subprocess.Popen([str(program), *(argv or ("120",))], cwd=repo, start_new_session=True)
        procs.append(proc)
        return proc

    yield {"repo": str(repo), "db": db, "home": home, "agent": agent_process, "tmp": tmp_path}
    for proc in procs:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """End a process this test started, and what it started (its own process group), once: after `wait` the
    pid is free, and on a busy machine (pid_max 32768) another test's process may hold it within seconds, so
    a second `killpg` (the test's own stop, then the fixture's) killed a stranger: a live agent of a test on
    the other worker vanished and its waits read as work."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def rows(fleet, now: float, env: dict | None = None) -> list[dict]:
    with open_index(fleet["db"]) as index:
        return refresh_presence(index, now=now, home=fleet["home"], environ={"HOME": str(fleet["home"]),
                                                                            **(env or {})})


def claude_alive(fleet, at: float, session: str = "s1") -> None:
    """Claude Code's live status file for a live process (this test's), naming the session."""
    me = os.getpid()
    fx.claude_status(fleet["home"] / ".claude", me, fleet["repo"], status="busy", proc_start=process_start(me),
                     at=at, session=session)


def test_an_unanswered_tool_call_is_a_permission_prompt_while_the_process_lives(fleet):
    now = time.time()
    asked = now - 30
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=asked, pending="Bash",
                         tools=[("Read", {"file_path": "README"})])
    assert [r["state"] for r in rows(fleet, now)] == ["working"]      # no live process: nothing waits
    claude_alive(fleet, asked)
    (row,) = rows(fleet, now)
    assert (row["agent"], row["session"], row["state"], row["waiting_kind"]) == ("claude-code", "s1", "waiting",
                                                                                  "permission")
    assert row["waiting_since"] == iso(float(int(asked)))             # the tool call's own time
    assert [r["state"] for r in rows(fleet, asked + 2)] == ["working"]   # 2 s unanswered: not yet a wait


def test_a_question_an_ended_turn_and_a_subagent(fleet):
    now = time.time()
    claude_alive(fleet, now - 60)
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 20, pending="AskUserQuestion")
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("waiting", "question")]
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 20, finished=True)
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("waiting", "idle")]
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 20, pending="Task")
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("working", None)]   # a subagent works


def test_a_running_command_is_work_not_a_prompt(fleet):
    """While the Bash tool runs, the transcript shows the same unanswered call: the agent's fresh child
    process says the command runs."""
    now = time.time()
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 30, pending="Bash")
    shell = fleet["agent"]("claude", "-c", "sleep 120; :")
    for _ in range(50):                                               # the child is forked
        if any(r["state"] == "working" for r in rows(fleet, time.time())):
            break
        time.sleep(0.1)
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, time.time())] == [("working", None)]
    stop(shell)
    fleet["agent"]("claude")                                          # the agent itself, no command running
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, time.time())] == [("waiting", "permission")]


def qwen_chat(fleet, at: float, *records: dict) -> None:
    """A Qwen Code chat as its ChatRecordingService appends it (projects/<sanitized cwd>/chats/<session>.jsonl:
    uuid/parentUuid records of type user, assistant, tool_result or system, each with Gemini `Content`)."""
    base = {"sessionId": "q1", "cwd": fleet["repo"], "version": "0.9.0", "gitBranch": "main", "timestamp": iso(at)}
    lines = [{**base, "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None, **r} for n, r in enumerate(records)]
    fx.jsonl(fleet["home"] / ".qwen" / "projects" / "-api" / "chats" / "q1.jsonl", lines, at=at)


QWEN_USER = {"type": "user", "message": {"role": "user", "parts": [{"text": fx.SECRET}]}}
QWEN_CALL = {"type": "assistant", "model": "qwen3-coder-plus", "message": {"role": "model", "parts": [
    {"functionCall": {"id": "call_1", "name": "run_shell_command", "args": {"command": fx.SECRET}}}]}}
QWEN_RESULT = {"type": "tool_result", "message": {"role": "user", "parts": [
    {"functionResponse": {"id": "call_1", "name": "run_shell_command", "response": {"output": fx.SECRET}}}]},
               "toolCallResult": {"callId": "call_1", "status": "success"}}
QWEN_TELEMETRY = {"type": "system", "subtype": "ui_telemetry", "systemPayload": {"uiEvent": {
    "event.name": "qwen-code.tool_call", "function_name": "run_shell_command", "success": True}}}


def test_qwen_code_an_unanswered_call_waits_and_an_answered_one_is_work(fleet):
    """Qwen Code records a tool's answer as its own `tool_result` record (not a `user` one, as Claude Code
    does) and appends `system` records (telemetry, titles) after it: the newest user, assistant or
    tool_result record says how the turn stands; a system record says nothing of it."""
    now = time.time()
    fleet["agent"]("qwen")
    qwen_chat(fleet, now - 30, QWEN_USER, QWEN_CALL)
    assert [(r["agent"], r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("qwen", "waiting",
                                                                                        "permission")]
    qwen_chat(fleet, now - 30, QWEN_USER, QWEN_CALL, QWEN_TELEMETRY)
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("waiting", "permission")]
    qwen_chat(fleet, now - 30, QWEN_USER, QWEN_CALL, QWEN_RESULT, QWEN_TELEMETRY)    # it ran: the model is next
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("working", None)]


def test_codex_finished_turn_waits_and_joins_its_hook_session(fleet):
    now = time.time()
    codex_home = fleet["tmp"] / "codex"
    fx.codex_rollout(codex_home, fleet["repo"], at=now - 40, branch="main", patch_files=[], done=True,
                     name="0199a1b2-0000-7000-8000-00000000abcd")
    env = {"CODEX_HOME": str(codex_home)}
    assert [r["state"] for r in rows(fleet, now, env)] == ["recent"]
    fleet["agent"]("codex")
    (row,) = rows(fleet, now, env)
    assert (row["state"], row["waiting_kind"], row["session"]) == ("waiting", "idle",
                                                                    "0199a1b2-0000-7000-8000-00000000abcd")
    with open_index(fleet["db"]) as index:       # Codex's hook names the same thread: one row, the hook's word
        record_hook_event(index, "codex", {"session_id": "0199a1b2-0000-7000-8000-00000000abcd",
                                           "cwd": fleet["repo"], "hook_event_name": "UserPromptSubmit"}, now=now)
    (row,) = rows(fleet, now, env)
    assert (row["state"], row["session"], row["sources"]) == ("working", "0199a1b2-0000-7000-8000-00000000abcd",
                                                              ["hook", "process", "session"])


def test_hooks_rank_above_the_files(fleet):
    now = time.time()
    claude_alive(fleet, now - 60)
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 30, finished=True)
    with open_index(fleet["db"]) as index:
        record_hook_event(index, "claude-code", {"session_id": "s1", "cwd": fleet["repo"],
                                                 "hook_event_name": "UserPromptSubmit"}, now=now - 28)
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("working", None)]
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 5, finished=True)   # newer than the hook
    assert [(r["state"], r["waiting_kind"]) for r in rows(fleet, now)] == [("waiting", "idle")]


def test_a_flapping_session_keeps_its_first_time(fleet):
    now = time.time()
    claude_alive(fleet, now - 60)
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 20, pending="Edit")
    first = rows(fleet, now)[0]
    assert first["state"] == "waiting"
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now + 1, tools=[("Edit", {"file_path": "a"})])
    assert rows(fleet, now + 1)[0]["state"] == "working"                 # allowed: it went on
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now - 2, pending="Edit")
    assert rows(fleet, now + 4)[0]["waiting_since"] == first["waiting_since"]   # back within 5 s: the same wait
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now + 5, tools=[("Edit", {"file_path": "a"})])
    assert rows(fleet, now + 5)[0]["state"] == "working"
    fx.claude_transcript(fleet["home"], "-api", fleet["repo"], at=now + 8, pending="Edit")
    later = rows(fleet, now + 20)[0]                                     # away longer: a new wait
    assert later["state"] == "waiting" and later["waiting_since"] > first["waiting_since"]
