"""The agents' own hooks drive presence: real hook JSON fed to the real hook command (a subprocess) makes a
session `waiting` (permission, question, idle), `working` or ended, one row per session, never keeping a
prompt, a message or a tool's input; a flapping session keeps its first `waiting_since`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.index.store import open_index
from fleet.index.wake import Bell
from fleet.ops.service import _other_agents
from tests.fleets.cli import fleetdeck_env, run_cli
from tests.fleets.gitbuild import git, init_repo, write

SECRET = "hunter2-do-not-keep"


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path / "fleet"
    repo = init_repo(root / "api")
    write(repo / "app.py", "x = 1\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "app")
    db = tmp_path / "fleet.db"
    env = fleetdeck_env(FLEETDECK_SETTINGS=str(tmp_path / "settings.toml"), HOME=str(tmp_path / "home"))
    run_cli("scan", str(root), db=db, env=env, check=True)
    return repo, db, env


def hook(agent: str, db: Path, env: dict[str, str], repo: Path, event: str, session: str = "s1", **extra) -> str:
    payload = {"session_id": session, "transcript_path": "/dev/null", "cwd": str(repo), "hook_event_name": event,
               **extra}
    done = subprocess.run([sys.executable, "-m", "fleet.agenthooks", agent, "--db", str(db)],
                          input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def presence(db: Path, env: dict[str, str]) -> list[dict]:
    """`fleetdeck presence --json` (it refreshes: the hooks' evidence must survive a refresh)."""
    out = run_cli("presence", "--json", db=db, env=env, check=True).stdout
    return json.loads(out)["agents"]


@pytest.mark.slow
def test_claude_code_events_drive_the_state(fleet) -> None:
    repo, db, env = fleet
    assert hook("claude-code", db, env, repo, "SessionStart", source="startup") == ""
    assert [(r["agent"], r["state"], r["session"]) for r in presence(db, env)] == [("claude-code", "open", "s1")]
    hook("claude-code", db, env, repo, "Notification", notification_type="permission_prompt",
         message=f"Claude needs your permission to use Bash {SECRET}")
    (row,) = presence(db, env)
    assert row["state"] == "waiting" and row["waiting_kind"] == "permission" and row["waiting_since"]
    hook("claude-code", db, env, repo, "UserPromptSubmit", prompt=f"deploy with password {SECRET}")
    (row,) = presence(db, env)
    assert row["state"] == "working" and row["waiting_since"] is None and row["waiting_kind"] is None
    hook("claude-code", db, env, repo, "PreToolUse", tool_name="AskUserQuestion",
         tool_input={"questions": [{"question": f"which {SECRET}?"}]})
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"], row["tool"]) == ("waiting", "question", "AskUserQuestion")
    hook("claude-code", db, env, repo, "Stop", stop_hook_active=False)
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"]) == ("waiting", "idle")
    hook("claude-code", db, env, repo, "Notification", notification_type="idle_prompt",
         message="Claude is waiting for your input")
    (again,) = presence(db, env)
    assert again["waiting_since"] == row["waiting_since"]          # the idle reminder is the same wait
    hook("claude-code", db, env, repo, "PermissionRequest", tool_name="Bash", tool_input={"command": SECRET})
    assert presence(db, env)[0]["waiting_kind"] == "permission"
    hook("claude-code", db, env, repo, "SessionEnd", reason="exit")
    assert [r["state"] for r in presence(db, env)] == ["recent"]
    assert SECRET.encode() not in db.read_bytes()                  # no prompt, message or tool input kept
    for wal in db.parent.glob(db.name + "-*"):
        assert SECRET.encode() not in wal.read_bytes()


@pytest.mark.slow
def test_two_sessions_of_one_agent_are_two_rows(fleet) -> None:
    repo, db, env = fleet
    hook("claude-code", db, env, repo, "PermissionRequest", session="aaa", tool_name="Bash")
    hook_record_earlier(db, "aaa", 2.0, "at")                     # bbb is the newer one: the proposer below
    hook("claude-code", db, env, repo, "UserPromptSubmit", session="bbb", prompt="x")
    rows = {r["session"]: r for r in presence(db, env)}
    assert set(rows) == {"aaa", "bbb"} and rows["aaa"]["state"] == "waiting" and rows["bbb"]["state"] == "working"
    with open_index(db) as index:   # a proposal by one session warns of the other, counted
        others = _other_agents(index, str(repo), "claude-code", ["app.py"])
    assert [(o["agent"], o["state"]) for o in others] == [("claude-code", "waiting")]


def stored(db: Path) -> list[dict]:
    """The presence rows as the hook wrote them (no refresh)."""
    from fleet.presence import presence as read

    with open_index(db) as index:
        return read(index)


@pytest.mark.slow
def test_flapping_keeps_the_first_wait(fleet) -> None:
    repo, db, env = fleet
    hook("codex", db, env, repo, "PermissionRequest", tool_name="Bash")
    hook_record_earlier(db, "s1", 2.0, "waiting_since", "at")     # began 2 s ago: iso times have whole seconds
    first = presence(db, env)[0]
    hook("codex", db, env, repo, "PreToolUse", tool_name="Bash", tool_input={"command": "ls"})
    assert stored(db)[0]["state"] == "working"
    hook("codex", db, env, repo, "PermissionRequest", tool_name="Bash")
    back = presence(db, env)[0]
    assert back["state"] == "waiting" and back["waiting_since"] == first["waiting_since"]
    hook("codex", db, env, repo, "UserPromptSubmit", prompt="go on")
    hook_record_earlier(db, "s1", 5.5, "left_waiting_at")         # longer than FLAP_S: a new wait
    hook("codex", db, env, repo, "PermissionRequest", tool_name="Bash")
    assert stored(db)[0]["waiting_since"] > first["waiting_since"]


def hook_record_earlier(db: Path, session: str, seconds: float, *columns: str) -> None:
    """As if `seconds` had passed since the times in `columns` of the session's hook record (moved back; its
    presence row is redrawn from the record, by the next hook or refresh): `left_waiting_at` for the real 5 s
    flap window, `waiting_since` and `at` for a later whole second, without waiting them out."""
    moves = ", ".join(f"{column} = {column} - :s" for column in columns)
    nulls = " AND ".join(f"{column} IS NOT NULL" for column in columns)
    with open_index(db) as index, index.write() as conn:
        moved = conn.execute(f"UPDATE presence_hooks SET {moves} WHERE session = :session AND {nulls}",
                             {"s": seconds, "session": session}).rowcount
    assert moved == 1


def test_codex_and_gemini_events(fleet) -> None:
    repo, db, env = fleet
    hook("codex", db, env, repo, "SessionStart", session="c1", source="startup")
    hook("codex", db, env, repo, "Stop", session="c1", last_assistant_message=SECRET)
    assert hook("gemini-cli", db, env, repo, "Notification", session="g1", notification_type="ToolPermission",
                message=SECRET, details={"command": SECRET}).strip() == "{}"
    rows = {r["agent"]: r for r in presence(db, env)}
    assert (rows["codex"]["state"], rows["codex"]["waiting_kind"]) == ("waiting", "idle")
    assert (rows["gemini"]["state"], rows["gemini"]["waiting_kind"]) == ("waiting", "permission")
    assert hook("gemini-cli", db, env, repo, "BeforeAgent", session="g1", prompt=SECRET).strip() == "{}"
    assert {r["agent"]: r["state"] for r in presence(db, env)}["gemini"] == "working"
    hook("gemini-cli", db, env, repo, "AfterAgent", session="g1", prompt_response=SECRET)
    assert {r["agent"]: r["waiting_kind"] for r in presence(db, env)}["gemini"] == "idle"
    hook("gemini-cli", db, env, repo, "SessionEnd", session="g1", reason="exit")
    assert {r["agent"]: r["state"] for r in presence(db, env)}["gemini"] == "recent"
    assert SECRET.encode() not in db.read_bytes()


def test_a_hook_outside_the_fleet_records_nothing(fleet, tmp_path: Path) -> None:
    _, db, env = fleet
    elsewhere = init_repo(tmp_path / "elsewhere")
    hook("claude-code", db, env, elsewhere, "PermissionRequest", tool_name="Bash")
    assert presence(db, env) == []


# What recording a state must not load: the git readers, the snapshot machinery, every presence detector,
# the settings parser, asyncio. Each costs the agent's wait on every hook call (the bound: p95 <= 300 ms with
# process start, bench/bench_needs_you.py).
NOT_FOR_RECORDING = {"asyncio", "dulwich", "fleet.repo.record", "fleet.git.mergetree", "fleet.index.reflogs",
                     "fleet.index.discovery", "fleet.presence.refresh", "fleet.snapshot.take", "fleet.settings",
                     "sqlite_utils", "subprocess", "logging"}


@pytest.mark.slow
def test_the_hook_rings_serves_bell_and_loads_only_what_recording_needs(fleet) -> None:
    repo, db, env = fleet
    bell = Bell(db).open()
    try:
        payload = {"session_id": "s1", "cwd": str(repo), "hook_event_name": "Notification",
                   "notification_type": "permission_prompt", "message": SECRET}
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "fleet.agenthooks", "claude-code",
                               "--db", str(db)], input=json.dumps(payload), capture_output=True, text=True,
                              env=env, timeout=30)
        assert done.returncode == 0
        assert bell.wait(0, 5) == 1                                # serve is told at once
        loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "import time:" in line}
        assert {"fleet.presence.hooks", "fleet.index.store"} <= loaded   # it did record, and we see its imports
        assert sorted(m for m in loaded if any(m == x or m.startswith(x + ".") for x in NOT_FOR_RECORDING)) == []
        hook("claude-code", db, env, init_repo(db.parent / "elsewhere"), "PermissionRequest", tool_name="Bash")
        assert bell.wait(1, 0.5) == 1                              # nothing recorded, nothing rung
    finally:
        bell.close()


def installed_hook(db: Path, env: dict[str, str], agent: str, settings: str, event: str, shell: str, field: str,
                   payload: dict) -> str:
    """Run the command `fleetdeck hooks install AGENT` put in the version-1 hooks file `settings` (under HOME)
    for `event`, as the agent runs it (`field` of the entry, by `shell`, `payload` as JSON on stdin): its
    output."""
    path = Path(env["HOME"]) / settings
    if not path.exists():
        run_cli("hooks", "install", agent, db=db, env=env, check=True)
    config = json.loads(path.read_text())
    assert config["version"] == 1
    (entry,) = config["hooks"][event]
    done = subprocess.run([shell, "-c", entry[field]], input=json.dumps(payload), capture_output=True, text=True,
                          env=env, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def copilot_hook(db: Path, env: dict[str, str], event: str, payload: dict) -> str:
    """Copilot CLI's hook for `event` (~/.copilot/hooks/fleetdeck.json: its `bash` field, camelCase JSON)."""
    return installed_hook(db, env, "copilot-cli", ".copilot/hooks/fleetdeck.json", event, "bash", "bash", payload)


@pytest.mark.slow
def test_copilot_cli_events_drive_the_state(fleet) -> None:
    """Copilot CLI's camelCase payloads as GitHub's hooks reference gives them (no event name in most of
    them: the installed command carries it; toolArgs is a JSON string)."""
    repo, db, env = fleet
    base = {"sessionId": "cp-1", "timestamp": 1_764_000_000_000, "cwd": str(repo)}
    copilot_hook(db, env, "sessionStart", {**base, "source": "new", "initialPrompt": SECRET})
    assert [(r["agent"], r["state"], r["session"]) for r in presence(db, env)] == [("copilot", "open", "cp-1")]
    copilot_hook(db, env, "userPromptSubmitted", {**base, "prompt": f"deploy {SECRET}"})
    assert presence(db, env)[0]["state"] == "working"
    copilot_hook(db, env, "notification", {**base, "hook_event_name": "Notification", "title": "Permission needed",
                                           "message": f"run {SECRET}?", "notification_type": "permission_prompt"})
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"]) == ("waiting", "permission") and row["waiting_since"]
    copilot_hook(db, env, "postToolUse", {**base, "toolName": "bash", "toolArgs": json.dumps({"command": SECRET}),
                                          "toolResult": {"resultType": "success", "textResultForLlm": SECRET}})
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"], row["tool"]) == ("working", None, "bash")
    assert copilot_hook(db, env, "preToolUse", {**base, "toolName": "ask_user",
                                                "toolArgs": json.dumps({"question": SECRET})}) == ""
    assert (presence(db, env)[0]["state"], presence(db, env)[0]["waiting_kind"]) == ("waiting", "question")
    copilot_hook(db, env, "agentStop", {**base, "transcriptPath": "/dev/null", "stopReason": "end_turn",
                                        "stop_hook_active": False})
    assert presence(db, env)[0]["waiting_kind"] == "idle"
    copilot_hook(db, env, "sessionEnd", {**base, "reason": "user_exit"})
    assert [r["state"] for r in presence(db, env)] == ["recent"]
    assert SECRET.encode() not in db.read_bytes()
    for wal in db.parent.glob(db.name + "-*"):
        assert SECRET.encode() not in wal.read_bytes()


def test_qwen_code_events_drive_the_state(fleet) -> None:
    """Qwen Code's hooks are Claude Code's shape (its hooks reference): snake_case fields, `hook_event_name`."""
    repo, db, env = fleet
    hook("qwen-code", db, env, repo, "SessionStart", session="q1", source="startup", model="qwen3-coder")
    hook("qwen-code", db, env, repo, "PreToolUse", session="q1", tool_name="run_shell_command",
         tool_input={"command": "ls"}, permission_mode="default", tool_use_id="toolu_1")
    assert {r["agent"]: r["state"] for r in presence(db, env)}["qwen"] == "working"
    hook("qwen-code", db, env, repo, "Notification", session="q1", notification_type="permission_prompt",
         message=SECRET)
    assert {r["agent"]: r["waiting_kind"] for r in presence(db, env)}["qwen"] == "permission"
    hook("qwen-code", db, env, repo, "Stop", session="q1", stop_hook_active=False, last_assistant_message=SECRET)
    assert {r["agent"]: r["waiting_kind"] for r in presence(db, env)}["qwen"] == "idle"
    hook("qwen-code", db, env, repo, "SessionEnd", session="q1", reason="prompt_input_exit")
    assert {r["agent"]: r["state"] for r in presence(db, env)}["qwen"] == "recent"
    assert SECRET.encode() not in db.read_bytes()


def goose_hook(db: Path, env: dict[str, str], event: str, payload: dict) -> str:
    """Run the command `fleetdeck hooks install goose` put in its plugin's hooks/hooks.json for `event`, as
    Goose runs it (`sh -c`, the payload of its hooks guide on stdin)."""
    plugin = Path(env["HOME"]) / ".agents" / "plugins" / "fleetdeck"
    if not (plugin / "hooks" / "hooks.json").exists():
        run_cli("hooks", "install", "goose", db=db, env=env, check=True)
    assert json.loads((plugin / "plugin.json").read_text())["name"] == "fleetdeck"
    (group,) = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"][event]
    done = subprocess.run(["sh", "-c", group["hooks"][0]["command"]], input=json.dumps({"event": event, **payload}),
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_goose_events_drive_the_state(fleet) -> None:
    """Goose names a folder only on tool events; its session's later events belong to the repo those named."""
    repo, db, env = fleet
    goose_hook(db, env, "SessionStart", {"session_id": "g-1"})
    assert presence(db, env) == []                                   # no folder named yet: nothing to say
    assert goose_hook(db, env, "PreToolUse", {
        "session_id": "g-1", "matcher_context": "developer__shell", "tool_name": "developer__shell",
        "tool_input": {"command": "ls"}, "working_dir": str(repo), "tool_call_id": "c1"}) == ""
    assert [(r["agent"], r["state"], r["session"]) for r in presence(db, env)] == [("goose", "working", "g-1")]
    goose_hook(db, env, "Stop", {"session_id": "g-1", "last_assistant_message": SECRET})
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"]) == ("waiting", "idle")
    goose_hook(db, env, "UserPromptSubmit", {"session_id": "g-1", "matcher_context": SECRET, "message": SECRET})
    assert presence(db, env)[0]["state"] == "working"
    goose_hook(db, env, "SessionEnd", {"session_id": "g-1"})
    assert [r["state"] for r in presence(db, env)] == ["recent"]
    assert SECRET.encode() not in db.read_bytes()


def cursor_hook(db: Path, env: dict[str, str], event: str, payload: dict) -> dict:
    """Run the command `fleetdeck hooks install cursor` put in ~/.cursor/hooks.json for `event`, as Cursor runs
    it (its `command`, by a shell; the JSON of Cursor's hooks docs on stdin); its answer, parsed."""
    return json.loads(installed_hook(db, env, "cursor", ".cursor/hooks.json", event, "sh", "command",
                                     {"hook_event_name": event, **payload}))


@pytest.mark.slow
def test_cursor_events_drive_the_state(fleet) -> None:
    """Cursor's own payloads (conversation_id, workspace_roots; a file's path on afterFileEdit, a cwd on
    afterShellExecution, `status` on stop): working on a prompt, a command or an edit; waiting (idle) when its
    turn completed; open, not waiting, when the person aborted it. Every answer changes nothing in Cursor: no
    `permission` (approval) and no `followup_message`, ever."""
    repo, db, env = fleet
    base = {"conversation_id": "cur-1", "generation_id": "gen-1", "model": "claude-4.5-sonnet",
            "cursor_version": "2.0.77", "workspace_roots": [str(repo)], "user_email": f"{SECRET}@example.org",
            "transcript_path": None}
    answers = [cursor_hook(db, env, "beforeSubmitPrompt", {**base, "prompt": f"deploy {SECRET}", "attachments": [
        {"type": "file", "filePath": str(repo / "app.py")}]})]
    assert answers[0] == {"continue": True}
    assert [(r["agent"], r["state"], r["session"]) for r in presence(db, env)] == [("cursor", "working", "cur-1")]
    answers.append(cursor_hook(db, env, "afterFileEdit", {**base, "file_path": str(repo / "app.py"),
                                                          "edits": [{"old_string": SECRET, "new_string": SECRET}]}))
    assert (presence(db, env)[0]["state"], presence(db, env)[0]["tool"]) == ("working", "Edit")
    answers.append(cursor_hook(db, env, "stop", {**base, "status": "completed", "loop_count": 0}))
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"]) == ("waiting", "idle") and row["waiting_since"]
    answers.append(cursor_hook(db, env, "afterShellExecution", {**base, "command": f"echo {SECRET}",
                                                                "cwd": str(repo), "output": SECRET, "duration": 12}))
    assert (presence(db, env)[0]["state"], presence(db, env)[0]["tool"]) == ("working", "Shell")
    answers.append(cursor_hook(db, env, "stop", {**base, "status": "aborted", "loop_count": 0}))
    assert [(r["state"], r["waiting_kind"]) for r in presence(db, env)] == [("open", None)]
    assert all(a == {} for a in answers[1:]), answers
    assert SECRET.encode() not in db.read_bytes()
    for wal in db.parent.glob(db.name + "-*"):
        assert SECRET.encode() not in wal.read_bytes()


def cline_hook(db: Path, env: dict[str, str], event: str, payload: dict) -> dict:
    """Run the file `fleetdeck hooks install cline` wrote as ~/Documents/Cline/Hooks/<event>, as Cline runs it
    (the executable itself, the JSON of Cline's hook reference on stdin); its answer, parsed."""
    hook_file = Path(env["HOME"]) / "Documents" / "Cline" / "Hooks" / event
    if not hook_file.exists():
        run_cli("hooks", "install", "cline", db=db, env=env, check=True)
    done = subprocess.run([str(hook_file)], input=json.dumps(payload), capture_output=True, text=True, env=env,
                          timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def cline_payload(repo: Path, event: str, **data) -> dict:
    return {"clineVersion": "3.40.0", "hookName": event, "timestamp": "1764000000000", "taskId": "task-1",
            "workspaceRoots": [str(repo)], "userId": "u1", "model": {"provider": "anthropic", "slug": "claude"},
            **data}


@pytest.mark.slow
def test_cline_events_drive_the_state(fleet) -> None:
    """Cline's hooks as its hook reference gives them: TaskStart and a prompt are work; `ask_followup_question`
    about to run is a question to the person; its answer (PostToolUse) is work again; TaskComplete is its turn
    done (waiting, idle); TaskCancel is the person's own stop (open). Each answer is `{"cancel": false}`."""
    repo, db, env = fleet
    meta = {"taskId": "task-1", "ulid": "01J0", "initialTask": f"deploy {SECRET}"}
    answers = [cline_hook(db, env, "TaskStart", cline_payload(repo, "TaskStart", taskStart={"taskMetadata": meta}))]
    assert [(r["agent"], r["state"], r["session"]) for r in presence(db, env)] == [("cline", "working", "task-1")]
    answers.append(cline_hook(db, env, "PreToolUse", cline_payload(repo, "PreToolUse", preToolUse={
        "toolName": "ask_followup_question", "parameters": {"question": f"which {SECRET}?"}})))
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"], row["tool"]) == ("waiting", "question", "ask_followup_question")
    answers.append(cline_hook(db, env, "PostToolUse", cline_payload(repo, "PostToolUse", postToolUse={
        "toolName": "ask_followup_question", "parameters": {"question": SECRET}, "result": SECRET, "success": True,
        "executionTimeMs": 4200})))
    assert (presence(db, env)[0]["state"], presence(db, env)[0]["waiting_kind"]) == ("working", None)
    answers.append(cline_hook(db, env, "UserPromptSubmit", cline_payload(repo, "UserPromptSubmit", userPromptSubmit={
        "prompt": SECRET, "attachments": []})))
    answers.append(cline_hook(db, env, "TaskComplete", cline_payload(repo, "TaskComplete", taskComplete={
        "taskMetadata": {"taskId": "task-1", "ulid": "01J0"}})))
    (row,) = presence(db, env)
    assert (row["state"], row["waiting_kind"]) == ("waiting", "idle")
    # the Cline SDK's own names in `hookName` (tool_call, agent_abort) beside the documented objects
    answers.append(cline_hook(db, env, "TaskResume", cline_payload(repo, "agent_resume", taskResume={
        "taskMetadata": {}, "previousState": {}})))
    assert presence(db, env)[0]["state"] == "working"
    answers.append(cline_hook(db, env, "TaskCancel", cline_payload(repo, "agent_abort", taskCancel={
        "taskMetadata": {"taskId": "task-1", "completionStatus": "cancelled"}})))
    assert [(r["state"], r["waiting_kind"]) for r in presence(db, env)] == [("open", None)]
    assert all(a == {"cancel": False} for a in answers), answers
    assert SECRET.encode() not in db.read_bytes()
    for wal in db.parent.glob(db.name + "-*"):
        assert SECRET.encode() not in wal.read_bytes()
