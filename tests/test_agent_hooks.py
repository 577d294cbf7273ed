"""fleetdeck in the agents' own hooks: install and uninstall leave the person's settings as they were, the
hook command snapshots before a tool call and answers in each agent's protocol, never breaks the agent, and
with `guard = "ask"` stops a command that would discard uncommitted work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.agenthooks.guard import dangers
from fleet.agenthooks.install import AGENTS, install, status, uninstall
from fleet.snapshot.restore import restore
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from fleet.snapshot.timeline import snapshots
from tests.fleets import template
from tests.fleets.cli import fleetdeck_env, run_cli
from tests.fleets.gitbuild import git, init_repo, write

OTHER = {"model": "opus", "permissions": {"allow": ["Bash(ls:*)"]},
         "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}],
                   "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}]}}


def _env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home")}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_install_merges_and_uninstall_restores_the_file_byte_for_byte(tmp_path: Path, agent: str) -> None:
    env = _env(tmp_path)
    settings = AGENTS[agent].settings(env)
    settings.parent.mkdir(parents=True)
    original = json.dumps(OTHER, indent=4, sort_keys=False).encode() + b"\n"
    settings.write_bytes(original)
    made = install(agent, tmp_path / "fleet.db", None, env)
    assert made["changed"] and made["installed"]
    value = json.loads(settings.read_text())
    assert value["model"] == "opus" and value["permissions"] == OTHER["permissions"]
    assert value["hooks"]["Stop"][0] == OTHER["hooks"]["Stop"][0]          # the person's own entry stays first
    spec = AGENTS[agent]
    for event in spec.events:
        entries = value["hooks"][event] if spec.flat else [h for g in value["hooks"][event] for h in g["hooks"]]
        ours = [h for h in entries if "fleet.agenthooks" in h[spec.command_key]]
        assert len(ours) == 1 and ours[0]["type"] == "command" and agent in ours[0][spec.command_key], event
    if event == "PreToolUse":
        assert value["hooks"]["PreToolUse"][0] == OTHER["hooks"]["PreToolUse"][0]
    assert install(agent, tmp_path / "fleet.db", None, env)["changed"] is False       # idempotent
    assert {a["agent"]: a["installed"] for a in status(tmp_path / "fleet.db", env)["agents"]}[agent]
    removed = uninstall(agent, tmp_path / "fleet.db", env)
    assert removed["changed"] and settings.read_bytes() == original


def test_install_into_no_file_and_uninstall_removes_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    settings = AGENTS["claude-code"].settings(env)
    install("claude-code", tmp_path / "fleet.db", None, env)
    assert settings.exists()
    listed = {a["agent"]: a for a in status(tmp_path / "fleet.db", env)["agents"]}
    assert listed["claude-code"]["installed"] and listed["claude-code"]["events"] == [
        "PreToolUse", "UserPromptSubmit", "Notification", "PermissionRequest", "Stop", "SessionStart", "SessionEnd"]
    assert not listed["codex"]["installed"]
    uninstall("claude-code", tmp_path / "fleet.db", env)
    assert not settings.exists()


def test_a_settings_file_that_is_not_json_is_never_touched(tmp_path: Path) -> None:
    from fleet.errors import FleetError

    env = _env(tmp_path)
    settings = AGENTS["claude-code"].settings(env)
    settings.parent.mkdir(parents=True)
    settings.write_text("{ not json")
    with pytest.raises(FleetError):
        install("claude-code", tmp_path / "fleet.db", None, env)
    assert settings.read_text() == "{ not json"


GUARD_CASES = [
    ("git reset --hard", "reset-hard"), ("git -C . reset --hard HEAD~1", "reset-hard"),
    ("git checkout -- src/a.py", "checkout-paths"), ("git checkout .", "checkout-paths"),
    ("git restore .", "restore"), ("git restore --worktree --staged x", "restore"),
    ("git clean -fd", "clean"), ("git clean -xdf build", "clean"), ("git stash drop", "stash-drop"),
    ("git stash clear", "stash-drop"), ("git worktree remove --force ../wt", "worktree-remove"),
    ("git branch -D feature", "branch-delete"), ("git push --force origin main", "push-force"),
    ("git push origin +main", "push-force"), ("cd src && rm -rf .", "rm-recursive"),
    ("FOO=1 sudo git reset --hard", "reset-hard"), ("echo hi; git clean -f", "clean"),
    ("ls | xargs echo && git stash drop stash@{1}", "stash-drop"),
]
SAFE = ["git reset --soft HEAD~1", "git restore --staged x", "git checkout main", "git clean -n",
        "git stash", "git stash pop", "git worktree remove ../wt", "git branch -d merged", "git push",
        "rm -f notes.txt", "rm -rf /tmp/elsewhere", "echo 'git reset --hard'", "git log --oneline"]


@pytest.mark.parametrize("command,kind", GUARD_CASES)
def test_guard_finds_each_destructive_command(tmp_path: Path, command: str, kind: str) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    cwd = str(repo / "src") if command.startswith("cd src") else str(repo)
    found = dangers(command.replace("cd src && ", ""), cwd, str(repo))
    assert [d.kind for d in found] == [kind]


@pytest.mark.parametrize("command", SAFE)
def test_guard_leaves_safe_commands_alone(tmp_path: Path, command: str) -> None:
    assert dangers(command, str(tmp_path), str(tmp_path)) == []


def _scanned(base: Path) -> tuple[Path, Path]:
    root = base / "fleet"
    repo = init_repo(root / "api")
    write(repo / "app.py", "print('committed')\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "app")
    write(repo / "app.py", "print('uncommitted work')\n")
    write(repo / "notes.md", "untracked notes\n")
    db = base / "fleet.db"
    run_cli("scan", str(root), db=db, env={"FLEETDECK_SETTINGS": str(base / "settings.toml")}, check=True)
    return repo, db


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A scanned fleet with one dirty repository (a copy of its template), and the environment of its CLI."""
    repo, db = template.shared().copy("agent-hooks", _scanned, tmp_path)
    return repo, db, fleetdeck_env(FLEETDECK_SETTINGS=str(tmp_path / "settings.toml"))


def _hook(agent: str, db: Path, env: dict[str, str], payload: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleet.agenthooks", agent, "--db", str(db)],
                          input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=30)


def _payload(repo: Path, command: str, tool: str = "Bash") -> dict:
    return {"session_id": "s1", "transcript_path": "/dev/null", "cwd": str(repo), "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": {"command": command}}


def test_hook_snapshots_and_lets_the_call_through(fleet) -> None:
    repo, db, env = fleet
    done = _hook("claude-code", db, env, _payload(repo, "npm test"))
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    listed = snapshots(tree, db)
    assert listed[0]["trigger"] == "hook:claude-code" and listed[0]["agents"] == ["claude-code"]
    assert listed[0]["command"] == "npm test"
    gemini = _hook("gemini-cli", db, env, {**_payload(repo, "ls"), "hook_event_name": "BeforeTool",
                                            "tool_name": "run_shell_command"})
    assert gemini.returncode == 0 and json.loads(gemini.stdout) == {}


@pytest.mark.parametrize("agent,word", [("claude-code", "ask"), ("codex", "deny"), ("gemini-cli", "deny")])
def test_guard_ask_names_what_would_be_discarded(fleet, tmp_path: Path, agent: str, word: str) -> None:
    repo, db, env = fleet
    (tmp_path / "settings.toml").write_text('[snapshots]\nguard = "ask"\n')
    done = _hook(agent, db, env, _payload(repo, "git reset --hard && git clean -fd"))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    if agent == "gemini-cli":
        assert answer["decision"] == word and "would discard 2 uncommitted files" in answer["reason"]
    else:
        out = answer["hookSpecificOutput"]
        assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == word
        assert "would discard 2 uncommitted files" in out["permissionDecisionReason"]
        assert "snapshot " in out["permissionDecisionReason"]
    harmless = _hook(agent, db, env, _payload(repo, "git status"))
    assert harmless.stdout.strip() in ("", "{}")


def test_guard_says_nothing_when_nothing_would_be_lost(fleet, tmp_path: Path) -> None:
    repo, db, env = fleet
    git(repo, "stash", "-q", "-u")
    (tmp_path / "settings.toml").write_text('[snapshots]\nguard = "ask"\n')
    done = _hook("claude-code", db, env, _payload(repo, "git reset --hard"))
    assert done.stdout == ""


def test_a_broken_fleetdeck_still_lets_the_agent_through(tmp_path: Path) -> None:
    env = fleetdeck_env(FLEETDECK_SETTINGS=str(tmp_path / "settings.toml"))
    repo = init_repo(tmp_path / "r")
    done = _hook("claude-code", tmp_path / "missing" / "fleet.db", env, _payload(repo, "git reset --hard"))
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("fleetdeck hook:")
    garbage = subprocess.run([sys.executable, "-m", "fleet.agenthooks", "claude-code", "--db", str(tmp_path / "x.db")],
                             input="not json", capture_output=True, text=True, env=env, timeout=30)
    assert garbage.returncode == 0 and garbage.stdout == "" and garbage.stderr.count("\n") == 1
    (tmp_path / "settings.toml").write_text("[snapshots]\nbogus = 1\n")
    bad_settings = _hook("gemini-cli", tmp_path / "x.db", env, _payload(repo, "ls"))
    assert bad_settings.returncode == 0 and json.loads(bad_settings.stdout) == {}


DESTROY = {"reset_hard": ["git", "reset", "-q", "--hard"], "checkout_dot": ["git", "checkout", "-q", "--", "."],
           "restore_dot": ["git", "restore", "."], "clean_fd": ["git", "clean", "-fdq"],
           "rm_rf": ["rm", "-rf", "src"], "stash_drop": ["sh", "-c", "git stash -q -u && git stash drop -q"]}


@pytest.mark.parametrize("how", sorted(DESTROY))
def test_through_the_hook_each_destructive_command_is_undone(fleet, how: str) -> None:
    repo, db, env = fleet
    write(repo / "src" / "mod.py", "tracked\n")
    git(repo, "add", "src/mod.py")
    git(repo, "commit", "-q", "-m", "src")
    write(repo / "src" / "mod.py", "modified in src\n")
    write(repo / "build" / "gen.txt", "untracked folder\n")
    before = {p: (repo / p).read_bytes() for p in ("app.py", "notes.md", "src/mod.py", "build/gen.txt")}
    command = " ".join(DESTROY[how])
    assert _hook("claude-code", db, env, _payload(repo, command)).returncode == 0
    subprocess.run(DESTROY[how], cwd=repo, check=True, capture_output=True)
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    after = take(tree, db, "sweep")
    assert after["discarded"] is not None and after["discarded"]["agents"] == []
    hooked = [s for s in snapshots(tree, db) if s["trigger"] == "hook:claude-code"][0]
    assert hooked["command"] == command
    restore(tree, db, hooked["id"])
    assert {p: (repo / p).read_bytes() for p in before} == before


def test_cli_hooks_commands(tmp_path: Path) -> None:
    run = lambda *a: run_cli(*a, db=tmp_path / "fleet.db", env={"HOME": str(tmp_path / "home")})
    installed = run("hooks", "install", "claude-code", "--json")
    assert installed.returncode == 0, installed.stderr
    settings = Path(json.loads(installed.stdout)["agents"][0]["settings"])
    entry = json.loads(settings.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]
    assert "--db" in entry["command"] and str(tmp_path / "fleet.db") in entry["command"]
    listed = json.loads(run("hooks", "status", "--json").stdout)
    assert {a["agent"] for a in listed["unsupported"]} >= {"aider", "opencode"}
    assert {"cursor", "cline"} <= {a["agent"] for a in listed["agents"]}
    assert run("hooks", "uninstall", "claude-code").returncode == 0
    assert not settings.exists()
    assert run("hooks", "install", "aider").returncode == 2      # not a supported agent: a usage error


def test_install_and_uninstall_keep_a_symlinked_settings_file_a_link(tmp_path: Path) -> None:
    """Dotfiles managers link ~/.claude/settings.json into a repository: fleetdeck writes the file the link
    names and leaves the link in place, on install and on uninstall."""
    env = _env(tmp_path)
    settings = AGENTS["claude-code"].settings(env)
    settings.parent.mkdir(parents=True)
    real = tmp_path / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    original = json.dumps(OTHER).encode()
    real.write_bytes(original)
    settings.symlink_to(real)
    install("claude-code", tmp_path / "fleet.db", None, env)
    assert settings.is_symlink() and "fleet.agenthooks" in real.read_text()
    uninstall("claude-code", tmp_path / "fleet.db", env)
    assert settings.is_symlink() and real.read_bytes() == original


GUARD_MORE = [("git switch -f main", "switch-discard"), ("git switch --discard-changes main", "switch-discard"),
              ("git checkout src/a.py", "checkout-paths"), ("git checkout HEAD~1 src", "checkout-paths"),
              ("bash -lc 'git reset --hard'", "reset-hard"), ("sh -c \"git clean -fdx\"", "clean")]


@pytest.mark.parametrize("command,kind", GUARD_MORE)
def test_guard_finds_the_other_common_forms(tmp_path: Path, command: str, kind: str) -> None:
    repo = tmp_path / "repo"
    write(repo / "src" / "a.py", "a\n")
    assert [d.kind for d in dangers(command, str(repo), str(repo))] == [kind]


@pytest.mark.parametrize("command", ["git switch main", "git checkout -b src", "git commit -m 'x && git reset --hard'",
                                     'git commit -m "wip; git reset --hard; rm -rf src"',
                                     "git checkout main"])
def test_guard_leaves_these_alone(tmp_path: Path, command: str) -> None:
    repo = tmp_path / "repo"
    write(repo / "src" / "a.py", "a\n")
    assert dangers(command, str(repo), str(repo)) == []


def test_guard_asks_before_a_stash_drop_on_a_clean_tree(fleet, tmp_path: Path) -> None:
    """The work a `stash drop` destroys is in the stash, not the working tree: a clean tree is no reason
    to let it through."""
    repo, db, env = fleet
    git(repo, "stash", "-q", "-u")
    (tmp_path / "settings.toml").write_text('[snapshots]\nguard = "ask"\n')
    done = _hook("claude-code", db, env, _payload(repo, "git stash drop"))
    out = json.loads(done.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask" and "stash" in out["permissionDecisionReason"]
    cleared = _hook("claude-code", db, env, _payload(repo, "git stash clear"))
    assert json.loads(cleared.stdout)["hookSpecificOutput"]["permissionDecision"] == "ask"


def test_the_hook_never_thins_a_store(fleet) -> None:
    """A hook is abandoned at its deadline; a `git gc --prune=now` it started would run on without the
    store's lock and prune the objects of a snapshot another process is writing. The hook only snapshots;
    the watcher and the other triggers thin."""
    import time as _time

    repo, db, env = fleet
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    old = take(tree, db, "manual", now=_time.time() - 90 * 86400)     # past every tier: due to go
    write(repo / "app.py", "print('newer work')\n")
    done = _hook("claude-code", db, env, _payload(repo, "npm test"))
    assert done.returncode == 0 and done.stderr == ""
    assert old["id"] in [s["id"] for s in snapshots(tree, db)]
    write(repo / "app.py", "print('newest work')\n")
    take(tree, db, "manual")
    assert old["id"] not in [s["id"] for s in snapshots(tree, db)]


def test_copilot_cli_gets_its_own_file_and_uninstall_takes_it_away(tmp_path: Path) -> None:
    """Copilot CLI reads every *.json in its user hooks folder: fleetdeck's is a file of its own, in Copilot's
    format (version 1, flat entries with `bash`, `timeoutSec`, the matcher inside), the event on the command."""
    env = {**_env(tmp_path), "COPILOT_HOME": str(tmp_path / "cp")}
    install("copilot-cli", tmp_path / "fleet.db", None, env)
    settings = tmp_path / "cp" / "hooks" / "fleetdeck.json"
    value = json.loads(settings.read_text())
    assert value["version"] == 1
    (pre,) = value["hooks"]["preToolUse"]
    assert pre["type"] == "command" and pre["timeoutSec"] == 10 and pre["matcher"] == "bash|create|edit|ask_user"
    assert "--event preToolUse" in pre["bash"] and "command" not in pre
    assert {a["agent"]: a["installed"] for a in status(tmp_path / "fleet.db", env)["agents"]}["copilot-cli"]
    uninstall("copilot-cli", tmp_path / "fleet.db", env)
    assert not settings.exists()


def test_guard_asks_copilot_cli_in_its_own_protocol(fleet, tmp_path: Path) -> None:
    repo, db, env = fleet
    (tmp_path / "settings.toml").write_text('[snapshots]\nguard = "ask"\n')
    payload = {"sessionId": "cp", "timestamp": 1, "cwd": str(repo), "toolName": "bash",
               "toolArgs": json.dumps({"command": "git reset --hard && git clean -fd", "description": "tidy"})}
    done = subprocess.run([sys.executable, "-m", "fleet.agenthooks", "copilot-cli", "--event", "preToolUse",
                           "--db", str(db)], input=json.dumps(payload), capture_output=True, text=True, env=env,
                          timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    answer = json.loads(done.stdout)
    assert answer["permissionDecision"] == "ask" and "would discard 2 uncommitted files" in answer[
        "permissionDecisionReason"]
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    assert snapshots(tree, db)[0]["trigger"] == "hook:copilot-cli"
    harmless = subprocess.run([sys.executable, "-m", "fleet.agenthooks", "copilot-cli", "--event", "preToolUse",
                               "--db", str(db)], input=json.dumps({**payload, "toolArgs": '{"command": "ls"}'}),
                              capture_output=True, text=True, env=env, timeout=30)
    assert harmless.returncode == 0 and harmless.stdout == ""
    qwen = _hook("qwen-code", db, env, {**_payload(repo, "git clean -fd"), "tool_name": "run_shell_command"})
    out = json.loads(qwen.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask" and "uncommitted" in out["permissionDecisionReason"]


def test_goose_gets_a_plugin_of_its_own_and_uninstall_takes_it_away(tmp_path: Path) -> None:
    """Goose loads hooks only from plugins: fleetdeck's is ~/.agents/plugins/fleetdeck (a manifest and
    hooks/hooks.json); uninstall removes both and the folders, and leaves the person's other plugins."""
    env = _env(tmp_path)
    other = tmp_path / "home" / ".agents" / "plugins" / "mine" / "plugin.json"
    other.parent.mkdir(parents=True)
    other.write_text('{"name": "mine"}')
    install("goose", tmp_path / "fleet.db", None, env)
    plugin = tmp_path / "home" / ".agents" / "plugins" / "fleetdeck"
    (group,) = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]["PreToolUse"]
    assert group["matcher"] == "^(developer__shell|developer__write|developer__edit)$"
    assert group["hooks"][0]["timeout"] == 10 and "fleet.agenthooks goose" in group["hooks"][0]["command"]
    assert json.loads((plugin / "plugin.json").read_text())["name"] == "fleetdeck"
    uninstall("goose", tmp_path / "fleet.db", env)
    assert not plugin.exists() and other.read_text() == '{"name": "mine"}'


def test_guard_blocks_in_gooses_protocol(fleet, tmp_path: Path) -> None:
    repo, db, env = fleet
    (tmp_path / "settings.toml").write_text('[snapshots]\nguard = "ask"\n')
    payload = {"event": "PreToolUse", "session_id": "g", "tool_name": "developer__shell", "working_dir": str(repo),
               "tool_input": {"command": "git reset --hard && git clean -fd"}, "tool_call_id": "c"}
    done = _hook("goose", db, env, payload)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    answer = json.loads(done.stdout)
    assert answer["decision"] == "block" and "would discard 2 uncommitted files" in answer["reason"]
    harmless = _hook("goose", db, env, {**payload, "tool_input": {"command": "ls"}})
    assert harmless.returncode == 0 and harmless.stdout == ""


def test_cursor_keeps_the_persons_hooks_and_registers_no_permission_event(tmp_path: Path) -> None:
    """~/.cursor/hooks.json in Cursor's own format, with the person's hooks: install adds fleetdeck's entries
    after theirs, only on events whose answer approves nothing; uninstall gives the file back byte for byte."""
    env = _env(tmp_path)
    settings = tmp_path / "home" / ".cursor" / "hooks.json"
    settings.parent.mkdir(parents=True)
    theirs = {"version": 1, "hooks": {"afterFileEdit": [{"command": "./hooks/format.sh"}],
                                      "beforeShellExecution": [{"command": "./hooks/guard.sh"}]}}
    original = json.dumps(theirs, indent=2).encode()
    settings.write_bytes(original)
    install("cursor", tmp_path / "fleet.db", None, env)
    value = json.loads(settings.read_text())
    assert value["hooks"]["afterFileEdit"][0] == {"command": "./hooks/format.sh"}
    assert "fleet.agenthooks cursor" in value["hooks"]["afterFileEdit"][1]["command"]
    assert value["hooks"]["beforeShellExecution"] == theirs["hooks"]["beforeShellExecution"]
    gating = {"beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "preToolUse", "subagentStart"}
    assert not gating & {e for e, entries in value["hooks"].items()
                         if any("fleet.agenthooks" in h.get("command", "") for h in entries)}
    assert install("cursor", tmp_path / "fleet.db", None, env)["changed"] is False
    uninstall("cursor", tmp_path / "fleet.db", env)
    assert settings.read_bytes() == original


def _cline_folder(tmp_path: Path) -> Path:
    return tmp_path / "home" / "Documents" / "Cline" / "Hooks"


def test_cline_hooks_are_files_of_their_own_beside_the_persons(tmp_path: Path) -> None:
    """Cline runs ~/Documents/Cline/Hooks/<Event> while it is executable. The person's own PreToolUse stays
    byte for byte (and executable): fleetdeck is not installed for that event and says so; its own files go in
    for the others, `status` lists them (and what Cline's Hooks tab switched off, and that the Enable Hooks
    setting is not confirmed), and uninstall removes exactly them."""
    env = _env(tmp_path)
    folder = _cline_folder(tmp_path)
    folder.mkdir(parents=True)
    own = folder / "PreToolUse"
    own.write_bytes(b"#!/usr/bin/env bash\necho '{\"cancel\": false}'\n")
    own.chmod(0o750)
    notes = folder / "notes.txt"
    notes.write_text("mine")
    wrapper = folder / "TaskComplete"          # theirs, though it runs fleetdeck's hook command too
    wrapper.write_bytes(b"#!/bin/sh\nlogger done\nexec python3 -m fleet.agenthooks cline --event TaskComplete\n")
    wrapper.chmod(0o755)
    done = install("cline", tmp_path / "fleet.db", None, env)
    assert done["changed"] and "your own PreToolUse, TaskComplete hooks kept" in done["note"]
    assert own.read_bytes() == b"#!/usr/bin/env bash\necho '{\"cancel\": false}'\n" and own.stat().st_mode & 0o777 == 0o750
    ours = sorted(p.name for p in folder.iterdir() if p.read_text().startswith("#!/bin/sh\n# fleetdeck's"))
    assert ours == sorted(["TaskStart", "TaskResume", "UserPromptSubmit", "PostToolUse", "TaskCancel"])
    assert all((folder / name).stat().st_mode & 0o111 for name in ours)
    assert "--event TaskCancel" in (folder / "TaskCancel").read_text()
    assert install("cline", tmp_path / "fleet.db", None, env)["changed"] is False            # idempotent
    (folder / "TaskCancel").chmod(0o644)                        # switched off in Cline's Hooks tab
    row = {a["agent"]: a for a in status(tmp_path / "fleet.db", env)["agents"]}["cline"]
    assert row["installed"] and row["kept"] == ["PreToolUse", "TaskComplete"] and row["disabled"] == ["TaskCancel"]
    assert "Enable Hooks" in row["unconfirmed"] and "cannot read" in row["unconfirmed"]
    removed = uninstall("cline", tmp_path / "fleet.db", env)
    assert removed["changed"]
    assert sorted(p.name for p in folder.iterdir()) == ["PreToolUse", "TaskComplete", "notes.txt"]
    assert notes.read_text() == "mine" and wrapper.read_bytes().startswith(b"#!/bin/sh\nlogger done")
    assert own.read_bytes().startswith(b"#!/usr/bin/env bash")


def test_cline_install_into_nothing_and_uninstall_takes_the_folders_away(tmp_path: Path) -> None:
    env = _env(tmp_path)
    (tmp_path / "home").mkdir()
    install("cline", tmp_path / "fleet.db", None, env)
    assert len(list(_cline_folder(tmp_path).iterdir())) == 7
    text = run_cli("hooks", "status", db=tmp_path / "fleet.db", env={"HOME": str(tmp_path / "home")}).stdout
    assert "not confirmed: Cline runs these only while its Enable Hooks setting is on" in text
    uninstall("cline", tmp_path / "fleet.db", env)
    assert list((tmp_path / "home").iterdir()) == []


def _cline_pre(repo: Path, tool: str, **parameters) -> dict:
    return {"clineVersion": "3.40.0", "hookName": "PreToolUse", "timestamp": "1764000000000", "taskId": "t1",
            "workspaceRoots": [str(repo)], "userId": "u", "preToolUse": {"toolName": tool, "parameters": parameters}}


def test_guard_cancels_in_clines_protocol(fleet, tmp_path: Path) -> None:
    """Cline's PreToolUse has no "ask": a destructive command is cancelled with the reason (`errorMessage`),
    after the snapshot; a harmless command and a read are let through, and a read takes no snapshot."""
    repo, db, env = fleet
    (tmp_path / "settings.toml").write_text('[snapshots]\nguard = "ask"\n')
    run = lambda payload: subprocess.run([sys.executable, "-m", "fleet.agenthooks", "cline", "--event", "PreToolUse",
                                          "--db", str(db)], input=json.dumps(payload), capture_output=True,
                                         text=True, env=env, timeout=30)
    done = run(_cline_pre(repo, "execute_command", command="git reset --hard && git clean -fd",
                          requires_approval="false"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    answer = json.loads(done.stdout)
    assert answer["cancel"] is True and "would discard 2 uncommitted files" in answer["errorMessage"]
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    assert snapshots(tree, db)[0]["trigger"] == "hook:cline"
    sdk = run(_cline_pre(repo, "run_commands", commands=json.dumps(["ls", "git clean -fd"])))
    assert json.loads(sdk.stdout)["cancel"] is True
    before = len(snapshots(tree, db))
    read = run(_cline_pre(repo, "read_file", path="app.py"))
    assert json.loads(read.stdout) == {"cancel": False} and len(snapshots(tree, db)) == before
    harmless = run(_cline_pre(repo, "execute_command", command="ls"))
    assert json.loads(harmless.stdout) == {"cancel": False}
