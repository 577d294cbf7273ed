"""The bridge records its client's self-declared name and the repos (and files) its calls touched, and
agents.presence reports them (fleet-wide or per repo), in both protocol eras."""

from __future__ import annotations

import json
import subprocess

import pytest
from mcp import Client
from mcp.types import Implementation

from mcp_bridge.server import build_server
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import init_repo
from fleet.index.store import open_index
from fleet.index.scan import scan
from tests.fleets.mcp_fleet import error_of, ok


@pytest.fixture
def small_fleet(tmp_path):
    root = tmp_path / "fleet"
    alpha = init_repo(root / "alpha", commits=2)
    beta = init_repo(root / "beta", commits=1)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"alpha": alpha, "beta": beta, "db": db}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_bridge_records_client_and_repos(small_fleet, mode):
    server = build_server(str(small_fleet["db"]))
    me = Implementation(name="codex-mcp-client", version="1.0")
    async with Client(server, mode=mode, client_info=me) as client:
        ok(await client.call_tool("repo.blame", {"repo": "alpha", "file": "README.md"}))
        error_of(await client.call_tool("repo.blame", {"repo": "beta", "file": "nope.txt"}))  # failed: not recorded
        data = ok(await client.call_tool("agents.presence", {"repo": "alpha"}))
        assert data["caller"] == {"client_name": "codex-mcp-client", "agent": "codex", "client_version": "1.0",
                                  "identity": "unknown:codex-mcp-client", "authenticated": False}
        (row,) = data["agents"]
        assert (row["agent"], row["repo"], row["state"], row["tool"]) == ("codex", str(small_fleet["alpha"]),
                                                                          "working", "repo.blame")
        assert "mcp" in row["sources"] and row["files"] == ["README.md"]
        assert row["same_agent_as_caller"] is True and row["you"] is True and row["other_sessions"] == 0
        assert [(c["version"], c["you"]) for c in row["mcp_clients"]] == [("1.0", True)]
        fleet_wide = ok(await client.call_tool("agents.presence", {"refresh": False}))
        assert {r["repo"] for r in fleet_wide["agents"]} == {str(small_fleet["alpha"])}
        assert error_of(await client.call_tool("agents.presence", {"repo": "/etc"}))[0] == "REPO_NOT_IN_FLEET"
    cli = subprocess.run(fleetdeck_argv("presence", "--json"), capture_output=True, check=True,
                         env=fleetdeck_env(FLEETDECK_DB=str(small_fleet["db"])))
    assert [(r["agent"], r["repo"]) for r in json.loads(cli.stdout)["agents"]] == [
        ("codex", str(small_fleet["alpha"]))]


@pytest.mark.slow
async def test_presence_writes_are_throttled_per_client_repo_and_tool(small_fleet):
    server = build_server(str(small_fleet["db"]))

    def stamps():
        with open_index(small_fleet["db"]) as index:
            return index.conn.execute("select tool, at from presence_mcp").fetchall()

    async with Client(server, client_info=Implementation(name="claude-code", version="2")) as client:
        ok(await client.call_tool("repo.status", {"repo": "alpha"}))
        first = stamps()
        ok(await client.call_tool("repo.status", {"repo": "alpha"}))
        assert stamps() == first  # same client, repo and tool within RECORD_EVERY: no second write
        ok(await client.call_tool("repo.history", {"repo": "alpha"}))
        assert [tool for tool, _ in stamps()] == ["repo.history"]



@pytest.mark.slow
async def test_a_hooks_wait_shows_in_agents_presence(small_fleet):
    """An agent whose own hook said it waits on the person is `waiting`, with `waiting_kind` and
    `waiting_since`, in agents.presence (the contract the CLI and /api/presence share)."""
    db, alpha = small_fleet["db"], small_fleet["alpha"]
    payload = {"session_id": "cx1", "cwd": str(alpha), "hook_event_name": "PermissionRequest", "tool_name": "Bash"}
    subprocess.run(fleetdeck_argv("hook", "codex"), input=json.dumps(payload), text=True, check=True,
                   capture_output=True, env=fleetdeck_env(FLEETDECK_DB=str(db)))
    async with Client(build_server(str(db)), client_info=Implementation(name="claude-code", version="2")) as client:
        rows = ok(await client.call_tool("agents.presence", {"repo": "alpha"}))["agents"]
    (codex,) = [r for r in rows if r["agent"] == "codex"]
    assert (codex["state"], codex["waiting_kind"], codex["session"]) == ("waiting", "permission", "cx1")
    assert codex["waiting_since"] and codex["other_sessions"] == 0 and codex["you"] is False
