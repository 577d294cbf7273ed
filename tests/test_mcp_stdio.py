"""`fleetdeck mcp` as a subprocess: the official stdio client in both protocol eras, and a raw session
checking that stdout carries JSON-RPC and nothing else."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from mcp import Client, StdioServerParameters

from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import git
from tests.fleets.mcp_fleet import error_of, ok


def params(mcp_fleet) -> StdioServerParameters:
    argv = fleetdeck_argv("mcp")
    return StdioServerParameters(command=argv[0], args=argv[1:], env=fleetdeck_env(FLEETDECK_DB=str(mcp_fleet["_db"])))


@pytest.mark.slow
@pytest.mark.parametrize("mode,version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_stdio_client_both_eras(mcp_fleet, mode, version):
    async with Client(params(mcp_fleet), mode=mode) as client:
        assert client.protocol_version == version
        assert client.server_info.name == "fleetdeck"
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"fleet.repos", "fleet.radar", "fleet.search", "repo.brief"} <= tools
        radar = ok(await client.call_tool("fleet.radar", {"limit": 3}))
        assert radar["entries"][0]["status"] == "conflict"
        brief = ok(await client.call_tool("repo.brief", {"repo": str(mcp_fleet["dirty"])}))
        assert brief["head"]["sha"] == git(mcp_fleet["dirty"], "rev-parse", "--short=12", "HEAD").strip()
        code, _ = error_of(await client.call_tool("repo.brief", {"repo": "/"}))
        assert code == "REPO_NOT_IN_FLEET"
        assert ok(await client.call_tool("fleet.repos", {"limit": 1}))["truncated"] is True


def _rpc(id_: int, method: str, params: dict | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}})


@pytest.mark.slow
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_stdout_carries_only_json_rpc(mcp_fleet, era):
    """Every stdout line is a JSON-RPC message, however the calls go (git runs, errors, hostile input)."""
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
                      "io.modelcontextprotocol/clientCapabilities": {}}} if era == "modern" else {}
    calls = [
        ("repo.brief", {"repo": "dirty"}), ("repo.brief", {"repo": "empty"}),
        ("worktree.list", {"repo": "alpha"}), ("submodule.status", {"repo": "super"}),
        ("repo.brief", {"repo": "../../etc"}), ("repo.brief", {"repo": "x\n\0y"}),
        ("fleet.search", {"query": "commit"}), ("no.such", {}), ("fleet.radar", {"limit": -1}),
        ("fleet.radar", {}),
    ]
    if era == "modern":
        lines = [_rpc(1, "server/discover", meta)]
    else:
        lines = [_rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "raw-test", "version": "0"}}),
                 json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
    lines.append(_rpc(2, "tools/list", meta))
    for n, (name, args) in enumerate(calls, start=3):
        lines.append(_rpc(n, "tools/call", {"name": name, "arguments": args, **meta}))
    proc = subprocess.Popen(fleetdeck_argv("mcp"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=fleetdeck_env(FLEETDECK_DB=str(mcp_fleet["_db"])))
    proc.stdin.write(("\n".join(lines) + "\n").encode())
    proc.stdin.flush()
    messages, wanted = [], set(range(1, len(calls) + 3))
    deadline = time.monotonic() + 120
    while wanted - {m.get("id") for m in messages} and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        messages.append(json.loads(line))  # any stray text on stdout fails here
    proc.stdin.close()
    proc.wait(timeout=30)
    rest, stderr = proc.stdout.read(), proc.stderr.read()
    assert rest.strip() == b"", rest[:500]
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert set(by_id) == set(range(1, len(calls) + 3)), stderr.decode()[-2000:]
    results = [by_id[n]["result"] for n in range(3, len(calls) + 3)]
    assert [r.get("isError", False) for r in results] == [False, False, False, False, True, True, False, True,
                                                          True, False]
    assert results[4]["structuredContent"]["error"]["code"] == "REPO_NOT_IN_FLEET"
    assert results[5]["structuredContent"]["error"]["code"] == "BAD_PATH"
