"""Agent identity as an attacker tries it: a client's declared name buys nothing (no policy rule, no cancel
right, no fresh quota); only an agent credential (`fleetdeck agents add`) does. The official MCP client over
stdio against `python -m fleet mcp` and over streamable HTTP against `/mcp`; git says what ran."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time

import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from fleet.audit.read import entries
from fleet.index.store import open_index
from fleet.ops import service
from mcp_bridge.http import standalone_app
from mcp_bridge.server import build_server
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.gitbuild import git
from tests.fleets.mcp_fleet import error_of, ok
from tests.fleets.ops_fleet import build
from tests.test_mcp_http import free_port

pytestmark = pytest.mark.slow

TRANSPORT_TOKEN = "the-serve-bearer-token"
# The docs' own example rule, reduced to what a stage proposal names.
AUTO_RULE = "[[rules]]\nagent = 'claude-code'\nop = ['stage', 'unstage', 'commit']\naction = 'auto'\n"


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    built = build(tmp_path)
    built["index"].close()
    built["policy"] = tmp_path / "policy.toml"
    built["policy"].write_text(AUTO_RULE)
    monkeypatch.setenv("FLEETDECK_POLICY", str(built["policy"]))
    return built


def cli(fleet, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, db=fleet["db"])


def add_agent(fleet, name: str) -> str:
    """`fleetdeck agents add NAME --json`: the credential, shown once."""
    done = cli(fleet, "agents", "add", name, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["token"]


def stdio(fleet, declared: str, token: str | None = None) -> Client:
    argv = fleetdeck_argv("mcp")
    env = fleetdeck_env(FLEETDECK_DB=str(fleet["db"]), FLEETDECK_POLICY=str(fleet["policy"]))
    if token is not None:
        env["FLEETDECK_AGENT_TOKEN"] = token
    return Client(StdioServerParameters(command=argv[0], args=argv[1:], env=env),
                  client_info=Implementation(name=declared, version="1"))


def stage(path: str = "README.md", **extra: object) -> dict:
    return {"repo": "work", "reason": "stage it", "paths": [path], **extra}


def staged(fleet) -> str:
    return git(fleet["work"], "diff", "--cached", "--name-only").strip()


def row(fleet, proposal_id: str) -> dict:
    with open_index(fleet["db"]) as index:
        return service.show(index, proposal_id)


# --- the attacks over stdio ----------------------------------------------------------------------------

async def test_naming_itself_claude_code_gets_no_auto_over_stdio(fleet):
    """Attack: the docs' example rule `agent = "claude-code"` -> auto fired for any client that said so."""
    async with stdio(fleet, "claude-code") as client:
        made = ok(await client.call_tool("operation.preview.stage", stage()))
    assert made["status"] == "pending" and staged(fleet) == ""
    assert (made["policy"]["action"], made["policy"]["rule"]) == ("approve", None)  # the rule is not its
    shown = row(fleet, made["proposal_id"])
    assert (shown["agent"], shown["agent_declared"], shown["agent_authenticated"]) == (
        "unknown:claude-code", "claude-code", False)


async def test_a_lookalike_name_cannot_cancel_over_stdio(fleet):
    """Attack: `codex-cli` cancelled `codex`'s proposal (both mapped to the agent id `codex`)."""
    async with stdio(fleet, "codex") as victim:
        made = ok(await victim.call_tool("operation.preview.stage", stage()))
        async with stdio(fleet, "codex-cli") as attacker:
            code, _ = error_of(await attacker.call_tool("operation.cancel", {"proposal_id": made["proposal_id"]}))
            assert code == "NOT_FOUND"
        async with stdio(fleet, "codex") as same_name:  # the same declared name, another session
            code, _ = error_of(await same_name.call_tool("operation.cancel", {"proposal_id": made["proposal_id"]}))
            assert code == "NOT_FOUND"
        assert row(fleet, made["proposal_id"])["status"] == "pending"
        mine = ok(await victim.call_tool("operation.cancel", {"proposal_id": made["proposal_id"]}))
        assert mine["status"] == "cancelled"


async def test_rotating_names_share_one_quota_over_stdio(fleet):
    """Attack: with max_pending_per_agent = 2, a new declared name per session got a fresh quota."""
    fleet["policy"].write_text("[settings]\nmax_pending_per_agent = 2\n")
    for n in range(2):
        async with stdio(fleet, f"rotating-{n}") as client:
            assert ok(await client.call_tool("operation.preview.stage", stage()))["status"] == "pending"
    async with stdio(fleet, "rotating-2") as client:
        code, message = error_of(await client.call_tool("operation.preview.stage", stage()))
    assert code == "LIMIT" and "unauthenticated" in message


# --- credentials: issued, used, revoked ------------------------------------------------------------------

async def test_a_credential_is_the_identity_over_stdio(fleet):
    token = add_agent(fleet, "claude-code")
    async with stdio(fleet, "whatever-it-says", token) as client:
        made = ok(await client.call_tool("operation.preview.stage", stage()))
    assert made["status"] == "completed" and staged(fleet) == "README.md"
    shown = row(fleet, made["proposal_id"])
    assert (shown["agent"], shown["agent_declared"], shown["agent_authenticated"]) == (
        "claude-code", "whatever-it-says", True)
    with open_index(fleet["db"]) as index:
        log_dir = __import__("fleet.audit", fromlist=["setup"]).setup(index.path).dir
    trail = [e for e in entries(log_dir) if e.get("proposal_id") == made["proposal_id"]]
    assert trail and all(e["agent"]["name"] == "claude-code" and e["agent"]["declared_name"] == "whatever-it-says"
                         and e["agent"]["authenticated"] is True and e["agent"]["self_declared"] is False
                         for e in trail if e["event"] == "proposal.pending")
    calls = [e for e in entries(log_dir) if e["event"] == "tool_call" and e["tool"] == "operation.preview.stage"]
    assert calls[-1]["agent"] == {"name": "claude-code", "authenticated": True, "self_declared": False,
                                  "declared_name": "whatever-it-says"}
    listed = json.loads(cli(fleet, "agents", "list", "--json").stdout)
    assert [a["name"] for a in listed["agents"]] == ["claude-code"] and listed["agents"][0]["last_used_at"]
    assert token not in json.dumps(listed)


async def test_an_authenticated_agent_cancels_its_own_from_another_session(fleet):
    fleet["policy"].write_text("")
    token = add_agent(fleet, "codex")
    async with stdio(fleet, "codex", token) as first:
        made = ok(await first.call_tool("operation.preview.stage", stage()))
    async with stdio(fleet, "codex") as impostor:  # same declared name, no credential
        code, _ = error_of(await impostor.call_tool("operation.cancel", {"proposal_id": made["proposal_id"]}))
        assert code == "NOT_FOUND"
    async with stdio(fleet, "codex-again", token) as second:
        assert ok(await second.call_tool("operation.cancel", {"proposal_id": made["proposal_id"]}))["status"] == \
            "cancelled"


def test_agents_cli_add_list_revoke_and_bad_input(fleet):
    made = cli(fleet, "agents", "add", "cursor")
    assert made.returncode == 0, made.stderr
    token = next(w for w in made.stdout.split() if w.startswith("FLEETDECK_AGENT_TOKEN="))
    assert "Authorization: Bearer " + token.split("=", 1)[1] in made.stdout
    again = cli(fleet, "agents", "add", "cursor")
    assert again.returncode == 1 and "already" in again.stderr and "[AGENT_EXISTS]" in again.stderr
    for bad in ("unknown", "person", "no spaces", "a:b", "x" * 65, ".lead", "ünï", "cursor2\n"):
        refused = cli(fleet, "agents", "add", bad)
        assert refused.returncode == 1 and "[BAD_ARGUMENT]" in refused.stderr, (bad, refused.stderr)
    text = cli(fleet, "agents", "list")
    assert text.returncode == 0 and "cursor" in text.stdout and "never" in text.stdout
    assert token.split("=", 1)[1] not in text.stdout
    assert cli(fleet, "agents", "revoke", "cursor").returncode == 0
    assert json.loads(cli(fleet, "agents", "list", "--json").stdout)["agents"] == []
    missing = cli(fleet, "agents", "revoke", "cursor")
    assert missing.returncode == 1 and "[NOT_FOUND]" in missing.stderr


async def test_a_revoked_credential_stops_the_next_stdio_start(fleet):
    token = add_agent(fleet, "claude-code")
    assert cli(fleet, "agents", "revoke", "claude-code").returncode == 0
    env = fleetdeck_env(FLEETDECK_DB=str(fleet["db"]), FLEETDECK_AGENT_TOKEN=token)
    started = subprocess.run(fleetdeck_argv("mcp"), input="", capture_output=True, text=True, env=env, timeout=60)
    assert started.returncode == 1 and "[UNAUTHORIZED]" in started.stderr and "agents add" in started.stderr
    assert token not in started.stderr


# --- the same over HTTP ------------------------------------------------------------------------------------

@contextlib.contextmanager
def http_server(fleet):
    """`/mcp` behind the HTTP guards (the transport's bearer token, or an agent's), in this process."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(standalone_app(build_server(str(fleet["db"])), TRANSPORT_TOKEN),
                                           host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.asynccontextmanager
async def http_client(url: str, declared: str, bearer: str = TRANSPORT_TOKEN, mode: str = "legacy"):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode,
                          client_info=Implementation(name=declared, version="1")) as client:
            yield client


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_transport_token_is_no_identity_over_http(fleet, mode):
    """Attack over HTTP: the serve's bearer token + a declared `claude-code` got the auto rule."""
    with http_server(fleet) as url:
        async with http_client(url, "claude-code", mode=mode) as client:
            made = ok(await client.call_tool("operation.preview.stage", stage()))
    assert made["status"] == "pending" and staged(fleet) == ""
    assert row(fleet, made["proposal_id"])["agent"] == "unknown:claude-code"


async def test_cancel_and_quota_over_http(fleet):
    """Attacks over HTTP: another session with a lookalike (or the same) name cancels; rotating names."""
    fleet["policy"].write_text("[settings]\nmax_pending_per_agent = 2\n")
    with http_server(fleet) as url:
        async with http_client(url, "codex") as victim:
            made = ok(await victim.call_tool("operation.preview.stage", stage()))
            for name in ("codex-cli", "codex"):
                async with http_client(url, name) as attacker:
                    code, _ = error_of(await attacker.call_tool("operation.cancel",
                                                                {"proposal_id": made["proposal_id"]}))
                    assert code == "NOT_FOUND"
            async with http_client(url, "rotated") as second:
                ok(await second.call_tool("operation.preview.stage", stage()))
            async with http_client(url, "rotated-again") as third:
                code, _ = error_of(await third.call_tool("operation.preview.stage", stage()))
                assert code == "LIMIT"
            # HTTP is served statelessly: no session tells two unauthenticated clients apart, so none cancels
            code, message = error_of(await victim.call_tool("operation.cancel", {"proposal_id": made["proposal_id"]}))
            assert code == "NOT_FOUND" and "agents add" in message
    assert row(fleet, made["proposal_id"])["status"] == "pending"


async def test_an_agent_bearer_over_http_and_its_revocation_at_once(fleet):
    token = add_agent(fleet, "claude-code")
    with http_server(fleet) as url:
        async with http_client(url, "cursor", bearer=token) as client:
            made = ok(await client.call_tool("operation.preview.stage", stage()))
            assert made["status"] == "completed" and staged(fleet) == "README.md"
            fleet["policy"].write_text("")
            waiting = ok(await client.call_tool("operation.preview.unstage", stage()))
            async with http_client(url, "cursor") as impostor:  # the transport token, the same declared name
                code, _ = error_of(await impostor.call_tool("operation.cancel",
                                                            {"proposal_id": waiting["proposal_id"]}))
                assert code == "NOT_FOUND"
            assert ok(await client.call_tool("operation.cancel", {"proposal_id": waiting["proposal_id"]}))[
                "status"] == "cancelled"
            shown = ok(await client.call_tool("operation.status", {"proposal_id": made["proposal_id"]}))
            assert (shown["agent"], shown["agent_declared"]) == ("claude-code", "cursor")
            assert cli(fleet, "agents", "revoke", "claude-code").returncode == 0
            refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"},
                                 headers={"Authorization": f"Bearer {token}"}, timeout=30)
            assert refused.status_code == 401
        wrong = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                           headers={"Authorization": "Bearer fdk_not-a-credential"}, timeout=30)
        assert wrong.status_code == 401


@pytest.mark.slow
async def test_serve_mcp_takes_agent_credentials_and_not_declared_names(fleet):
    """`fleetdeck serve` itself: its printed token is a transport credential only; an agent's is an identity."""
    from tests.fleets.serving import Server

    token = add_agent(fleet, "claude-code")
    server = Server(fleet["db"], [fleet["root"]], ["--no-watch"])
    try:
        server.first_page()
        url = server.base + "/mcp"
        bearer = server.auth["Authorization"].split(" ", 1)[1]
        async with http_client(url, "claude-code", bearer=bearer) as pretender:
            made = ok(await pretender.call_tool("operation.preview.stage", stage()))
        assert made["status"] == "pending" and staged(fleet) == ""
        assert row(fleet, made["proposal_id"])["agent"] == "unknown:claude-code"
        async with http_client(url, "cursor", bearer=token) as agent:
            done = ok(await agent.call_tool("operation.preview.stage", stage("notes.txt")))
        assert done["status"] == "completed" and "notes.txt" in staged(fleet).split()
        assert row(fleet, done["proposal_id"])["agent"] == "claude-code"
        page = httpx.get(server.base + "/", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert page.status_code == 401  # an agent's credential opens /mcp only, never the dashboard
    finally:
        server.stop()
