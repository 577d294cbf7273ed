"""The write path end to end: the official MCP client over stdio against `fleetdeck mcp` proposes, the person
approves and undoes with the CLI, and git confirms the repository's state at each step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from fleet.index.store import open_index
from fleet.ops import service
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, noninteractive_approver, run_cli
from tests.fleets.gitbuild import git, write
from tests.fleets.mcp_fleet import error_of, ok
from tests.fleets.ops_fleet import build, state

from fleet.ops.catalog import OPS as CATALOG

WRITE_TOOLS = set(CATALOG)


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    noninteractive_approver(tmp_path / "config")  # the CLI's --yes decides without a terminal
    built = build(tmp_path)
    built["index"].close()
    return built


def _params(fleet, **env) -> StdioServerParameters:
    argv = fleetdeck_argv("mcp")
    return StdioServerParameters(command=argv[0], args=argv[1:],
                                 env=fleetdeck_env(FLEETDECK_DB=str(fleet["db"]), **env))


def _client(fleet, **env) -> Client:
    return Client(_params(fleet, **env), client_info=Implementation(name="claude-code", version="1"))


def cli(fleet, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli(*args, db=fleet["db"], start_new_session=True, process=True)  # no controlling terminal, as for an agent's shell
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow
async def test_propose_approve_undo_over_stdio(fleet):
    work = fleet["work"]
    before = state(work)
    async with _client(fleet) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {f"operation.preview.{op}" for op in WRITE_TOOLS} == {t for t in tools if t.startswith("operation.preview.")}
        for op, info in CATALOG.items():
            hints = tools[f"operation.preview.{op}"].annotations
            assert (hints.destructive_hint, hints.read_only_hint, hints.open_world_hint) == (info.destructive, False, op == "push")
        assert {"operation.status", "operation.cancel", "restore.list", "restore.details"} <= set(tools)
        discard = tools["operation.preview.discard"]
        assert discard.annotations.destructive_hint is True and discard.annotations.read_only_hint is False
        assert tools["operation.preview.stage"].annotations.destructive_hint is False
        assert tools["operation.status"].annotations.read_only_hint is True
        assert "reason" in discard.input_schema["required"]

        dry = ok(await client.call_tool("operation.preview.stage", {
            "repo": "work", "reason": "look first", "paths": ["README.md"], "dry_run": True}))
        assert dry["status"] == "dry_run" and dry["proposal_id"] is None
        made = ok(await client.call_tool("operation.preview.stage", {
            "repo": "work", "reason": "stage the readme edit", "paths": ["README.md", "notes.txt"],
            "idempotency_key": "stage-1"}))
        assert made["status"] == "pending" and made["next_action"]["tool"] == "operation.status"
        assert made["approve_url"] is None and made["expires_at"]
        assert state(work) == before  # a proposal changes nothing

        approved = cli(fleet, "proposals", "approve", made["proposal_id"], "--yes", "--json")
        assert json.loads(approved.stdout)["status"] == "completed"
        assert git(work, "diff", "--cached", "--name-only") == "README.md\nnotes.txt\n"

        status = ok(await client.call_tool("operation.status", {"proposal_id": made["proposal_id"]}))
        assert status["status"] == "completed" and status["restore_point"] == made["proposal_id"]
        assert (status["agent"], status["agent_declared"]) == ("unknown:claude-code", "claude-code")  # no credential
        points = ok(await client.call_tool("restore.list", {"repo": str(work)}))
        assert [p["restore_point"] for p in points["restore_points"]] == [made["proposal_id"]]
        details = ok(await client.call_tool("restore.details", {"restore_point": made["proposal_id"]}))
        assert details["head"] == before["head"] and details["undoable"] is True

        commit = ok(await client.call_tool("operation.preview.commit", {
            "repo": "work", "reason": "record it", "message": "docs: readme and notes"}))
        cli(fleet, "proposals", "approve", commit["proposal_id"], "--yes")
        assert git(work, "log", "-1", "--format=%s%n%(trailers:key=Proposed-by,valueonly)").split() == [
            "docs:", "readme", "and", "notes", "unknown:claude-code"]

        landed = ok(await client.call_tool("operation.status", {"proposal_id": commit["proposal_id"]}))
        undone = json.loads(cli(fleet, "proposals", "undo", commit["proposal_id"], "--yes", "--json").stdout)
        assert git(work, "rev-parse", "HEAD").strip() == before["head"]
        # The agent polling its commit learns it was undone, by which proposal, and what HEAD is now.
        status = ok(await client.call_tool("operation.status", {"proposal_id": commit["proposal_id"]}))
        assert (status["status"], status["undone_by"]) == ("undone", undone["id"]) and status["undone_at"]
        assert status["result"]["head"] == git(work, "rev-parse", "HEAD").strip() == before["head"]
        assert status["result"]["before_undo"] == {"status": "completed", "result": landed["result"]}
        shown = cli(fleet, "proposals", "show", commit["proposal_id"]).stdout
        assert "undone" in shown and f"undone by {undone['id']}" in shown and "proposals undo" not in shown
        again = cli(fleet, "proposals", "undo", commit["proposal_id"], "--yes", check=False)
        assert again.returncode == 1 and "undone" in again.stderr
        cli(fleet, "proposals", "undo", made["proposal_id"], "--yes")
        assert state(work) == before

        code, _ = error_of(await client.call_tool("operation.status", {"proposal_id": "p-unknown"}))
        assert code == "NOT_FOUND"
        code, _ = error_of(await client.call_tool("operation.preview.checkout", {
            "repo": "work", "reason": "x", "ref": "--orphan=evil"}))
        assert code == "BAD_REF"
        code, _ = error_of(await client.call_tool("operation.preview.stage", {
            "repo": "work", "reason": "x", "paths": ["../../etc/passwd"]}))
        assert code == "BAD_PATH"
        code, _ = error_of(await client.call_tool("operation.preview.stage", {"repo": "work", "paths": ["a"]}))
        assert code == "BAD_ARGUMENT"  # reason is required

        pending = ok(await client.call_tool("operation.preview.discard", {
            "repo": "work", "reason": "clean up", "paths": ["README.md"]}))
        assert pending["risk"] == "high" and pending["preview"]["files"][0]["path"] == "README.md"
        cancelled = ok(await client.call_tool("operation.cancel", {"proposal_id": pending["proposal_id"]}))
        assert cancelled["status"] == "cancelled"
        assert cli(fleet, "proposals", "approve", pending["proposal_id"], "--yes", check=False).returncode == 1
    assert state(work) == before


@pytest.mark.slow
async def test_broken_policy_refuses_writes_but_reads_work(fleet, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text("[[rules]]\naction = 'sometimes'\n")
    async with _client(fleet, FLEETDECK_POLICY=str(policy)) as client:
        code, message = error_of(await client.call_tool("operation.preview.stage", {
            "repo": "work", "reason": "x", "all": True}))
        assert code == "POLICY_INVALID" and "action" in message
        assert ok(await client.call_tool("repo.brief", {"repo": "work"}))["head"]
    check = cli(fleet, "--policy", str(policy), "policy", "check", "codex", "stage", "work", check=False)
    assert check.returncode == 1 and "POLICY_INVALID" in check.stderr


def test_policy_check_explains(fleet, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text("[[rules]]\nagent = 'codex'\nop = 'stage'\npath = 'docs/'\naction = 'auto'\n")
    out = cli(fleet, "--policy", str(policy), "policy", "check", "codex", "stage", "work", "--path", "docs/a.md",
              "--json")
    decision = json.loads(out.stdout)
    assert (decision["action"], decision["rule"]) == ("auto", 1)
    out = cli(fleet, "--policy", str(policy), "policy", "check", "codex", "stage", "work", "--path", "src/a.py")
    assert out.stdout.startswith("approve: no rule")


@pytest.mark.slow
def test_cli_list_show_reject_wait(fleet):
    with open_index(fleet["db"]) as index:
        made = service.propose(index, "codex", "stage", "work", {"paths": ["README.md"]}, "please")
    listed = json.loads(cli(fleet, "proposals", "list", "--json").stdout)
    assert [p["id"] for p in listed["proposals"]] == [made["proposal_id"]]
    shown = cli(fleet, "proposals", "show", made["proposal_id"]).stdout
    assert "please" in shown and "+edited" in shown
    refused = cli(fleet, "proposals", "approve", made["proposal_id"], check=False)
    assert refused.returncode == 1 and "--yes" in refused.stderr  # no terminal, no silent approval
    waiter = subprocess.Popen(fleetdeck_argv("--db", str(fleet["db"]), "proposals", "wait", made["proposal_id"],
                                             "--json", "--timeout", "60"),
                              stdout=subprocess.PIPE, text=True, env=fleetdeck_env())
    time.sleep(0.5)
    cli(fleet, "proposals", "reject", made["proposal_id"], "--reason", "not today", "--yes")
    out, _ = waiter.communicate(timeout=60)
    assert json.loads(out)["status"] == "rejected"
    assert git(fleet["work"], "diff", "--cached", "--name-only") == ""


@pytest.mark.slow
def test_kill_9_during_a_slow_hook_leaves_it_interrupted(fleet, tmp_path):
    """The executing process dies mid-commit: the proposal stays executing (interrupted), its restore point is
    there, nothing re-runs it, and the person reconciles it."""
    work = fleet["work"]
    marker = tmp_path / "hook.pid"
    hook = work / ".git" / "hooks" / "pre-commit"
    write(hook, f"#!/bin/sh\necho $$ > {marker}\nsleep 60\nexit 1\n")
    hook.chmod(0o755)
    git(work, "add", "README.md")
    with open_index(fleet["db"]) as index:
        made = service.propose(index, "codex", "commit", "work", {"message": "slow"}, "commit slowly")
    pid = made["proposal_id"]
    proc = subprocess.Popen(fleetdeck_argv("--db", str(fleet["db"]), "proposals", "approve", pid, "--yes"),
                            env=fleetdeck_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the hook never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    hook_pid = int(marker.read_text().strip())
    os.killpg(os.getpgid(hook_pid), signal.SIGKILL)  # the git child ran in its own process group
    shown = json.loads(cli(fleet, "proposals", "show", pid, "--json").stdout)
    assert shown["status"] == "executing" and shown["interrupted"] is True
    assert shown["restore_point"] == pid
    assert git(work, "rev-parse", f"refs/fleetdeck/restore/{pid}/HEAD").strip() == git(work, "rev-parse", "HEAD").strip()
    again = cli(fleet, "proposals", "approve", pid, "--yes", check=False)
    assert again.returncode == 1 and "NOT_PENDING" in again.stderr
    with open_index(fleet["db"]) as index:
        assert service.resume_orphans(index) == []
    assert git(work, "log", "-1", "--format=%s").strip() == "add app"  # never re-run
    settled = json.loads(cli(fleet, "proposals", "reconcile", pid, "--as", "failed", "--json", check=False).stdout)
    assert settled["status"] == "failed" and "interrupted" in settled["error"]


@pytest.mark.slow
async def test_nested_arguments_over_stdio(fleet):
    """plan steps and branch_delete targets go through the published schemas to the same previews."""
    async with _client(fleet) as client:
        plan = ok(await client.call_tool("operation.preview.plan", {
            "repo": "work", "reason": "two steps", "dry_run": True,
            "steps": [{"op": "stage", "args": {"paths": ["README.md"]}},
                      {"op": "commit", "args": {"message": "m"}}]}))
        assert [s["op"] for s in plan["preview"]["steps"]] == ["stage", "commit"]
        code, _ = error_of(await client.call_tool("operation.preview.plan", {
            "repo": "work", "reason": "x", "steps": [{"op": "push", "args": {}}]}))
        assert code == "BAD_ARGUMENT"
        cleanup = ok(await client.call_tool("operation.preview.branch_delete", {
            "reason": "tidy", "targets": [{"repo": "work", "branches": ["topic"]}], "dry_run": True}))
        assert cleanup["preview"]["targets"][0]["branches"][0]["action"] == "delete"
        code, _ = error_of(await client.call_tool("operation.preview.branch_delete", {
            "reason": "tidy", "targets": [{"repo": "/etc", "branches": ["x"]}]}))
        assert code == "REPO_NOT_IN_FLEET"
    with open_index(fleet["db"]) as index:
        assert index.conn.execute("select count(*) from proposals").fetchone()[0] == 0


def test_cli_text_makes_control_characters_visible(fleet):
    """A repository's file names are a stranger's bytes: shown on a terminal, never obeyed by it."""
    write(fleet["work"] / "evil\x1b]52;c;aGk=\x07.txt", "x\n")
    with open_index(fleet["db"]) as index:
        made = service.propose(index, "codex", "stage", "work", {"all": True}, "stage all")
    shown = cli(fleet, "proposals", "show", made["proposal_id"]).stdout
    assert "\x1b" not in shown and "\\x1b]52" in shown


@pytest.mark.slow
async def test_an_agent_using_only_fleet_wide_tools_is_on_the_agents_page(fleet):
    from starlette.testclient import TestClient

    from fleet.presence.bridge import fleet_wide_agents
    from web.app import create_app

    async with Client(_params(fleet), client_info=Implementation(name="gemini-cli", version="1")) as client:
        ok(await client.call_tool("fleet.radar", {}))
    with open_index(fleet["db"]) as index:
        found = fleet_wide_agents(index)
        in_presence = index.conn.execute("select agent from presence where agent = 'gemini-cli'").fetchall()
    assert [(a["agent"], a["tool"], a["in_repos"]) for a in found] == [("gemini", "fleet.radar", False)]  # agent_id names it
    assert not in_presence  # no repository's row claims it
    token = "test-token-0123456789abcdefghijklmnopqrstuv"
    from tests.fleets.serving import sign_in

    with TestClient(create_app(fleet["db"], token), base_url="http://127.0.0.1:8765") as browser:
        sign_in(browser, fleet["db"])
        page = browser.get("/agents").text
    listed = page.split('id="fleetwide-title"', 1)[1].split("</section>", 1)[0]
    assert ">gemini<" in listed and "fleet.radar" in listed
