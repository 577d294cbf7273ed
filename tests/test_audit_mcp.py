"""The bridge's audit: one entry per tool call (stdio, HTTP, in-process), `audit.tail`, best-effort appends,
and a configured signing key that cannot be used stopping `fleetdeck mcp` and `serve` (fail closed)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections import Counter

import httpx2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from fleet.audit.verify import verify_log
from fleet.index.scan import scan
from fleet.index.store import open_index
from mcp_bridge.server import build_server
from tests.fleets.audit_log import new_key, pubkeys, read_lines
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import init_repo
from tests.fleets.locks import write_locked
from tests.fleets.mcp_fleet import error_of, ok
from tests.fleets.serving import Server

pytestmark = pytest.mark.slow


@pytest.fixture
def small_fleet(tmp_path):
    root = tmp_path / "fleet"
    alpha = init_repo(root / "alpha", commits=2)
    init_repo(root / "beta", commits=1)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"root": root, "alpha": alpha, "db": db, "audit": tmp_path / "audit"}


def entries(folder) -> list[dict]:
    return [json.loads(line) for line in read_lines(folder / "current.jsonl")[1:]]


async def test_every_call_appends_one_entry_and_tail_shows_them(small_fleet):
    server = build_server(str(small_fleet["db"]))
    log = server.kit.audit
    me = Implementation(name="claude-code", version="2")
    async with Client(server, client_info=me) as client:
        ok(await client.call_tool("repo.brief", {"repo": "alpha"}))
        assert error_of(await client.call_tool("repo.brief", {"repo": "/etc"}))[0] == "REPO_NOT_IN_FLEET"
        ok(await client.call_tool("fleet.repos", {"limit": 1}))
        tail = ok(await client.call_tool("audit.tail", {"limit": 2}))
        assert [e["tool"] for e in tail["entries"]] == ["fleet.repos", "repo.brief"]
        assert tail["truncated"] is True and tail["omitted_count"] == 1
        assert tail["audit"]["state"] == "ok" and "sig" not in tail["entries"][0]
        alpha = ok(await client.call_tool("audit.tail", {"repo": "alpha", "mine": True}))
        assert [(e["tool"], e["result"]) for e in alpha["entries"]] == [("repo.brief", "ok")]
        failed = ok(await client.call_tool("audit.tail", {"result": "REPO_NOT_IN_FLEET"}))
        assert [e["tool"] for e in failed["entries"]] == ["repo.brief"] and failed["omitted_count"] == 0
    log.sync()
    written = entries(small_fleet["audit"])
    assert [(e["tool"], e["result"]) for e in written] == [
        ("repo.brief", "ok"), ("repo.brief", "REPO_NOT_IN_FLEET"), ("fleet.repos", "ok"), ("audit.tail", "ok"),
        ("audit.tail", "ok"), ("audit.tail", "ok")]
    first = written[0]
    assert first["agent"] == {"name": "unknown:claude-code", "authenticated": False, "self_declared": True,
                              "declared_name": "claude-code"} and first["risk"] == "read"  # no credential
    assert first["repo"] == log.fingerprint("repo", str(small_fleet["alpha"]))
    assert first["args"] == log.fingerprint("args", {"repo": "alpha", "recent_commits": 5})
    assert first["event"] == "tool_call" and first["duration_us"] > 0 and "alpha" not in json.dumps(first)
    assert written[1]["repo"] is None
    assert verify_log(small_fleet["audit"]).ok


async def test_audit_failure_never_costs_an_answer(small_fleet, caplog):
    server = build_server(str(small_fleet["db"]))
    folder = small_fleet["audit"]
    async with Client(server) as client:
        ok(await client.call_tool("fleet.repos", {}))
        shutil.rmtree(folder)
        folder.write_text("not a folder")                       # appends fail from now on
        answered = await client.call_tool("repo.brief", {"repo": "alpha"})
        assert ok(answered)["head"]["sha"]
        (problem,) = answered.meta["io.fleetdeck/degraded"]
        assert problem["code"] == "AUDIT_DEGRADED" and "Not a directory" in problem["message"]
        tail = ok(await client.call_tool("audit.tail", {}))
        assert tail["audit"]["state"] == "degraded" and tail["audit"]["degraded"]["lost"] == 1
        folder.unlink()
        folder.mkdir(mode=0o700)                                # the disk is back (empty: a new chain)
        ok(await client.call_tool("fleet.radar", {}))
        tail = ok(await client.call_tool("audit.tail", {}))
        assert tail["audit"]["state"] == "ok"
        assert [(e["event"], e["tool"]) for e in tail["entries"]][::-1] == [("gap", None), ("tool_call", "fleet.radar")]
        assert tail["entries"][-1]["summary"].startswith("2 entries could not be appended")  # brief + tail
    assert "audit log degraded" in caplog.text


async def test_serve_and_two_stdio_bridges_append_one_chain(small_fleet):
    """`fleetdeck serve` (MCP over HTTP) and two `fleetdeck mcp` processes, called at once: one chain."""
    db = small_fleet["db"]
    server = Server(db, [small_fleet["root"]], ["--no-watch"])
    calls = 25

    async def burst(client):
        for i in range(calls):
            ok(await client.call_tool("repo.status" if i % 2 else "fleet.repos",
                                      {"repo": "alpha"} if i % 2 else {"limit": 1}))

    def stdio(name):
        argv = fleetdeck_argv("mcp")
        return Client(StdioServerParameters(command=argv[0], args=argv[1:],
                                            env=fleetdeck_env(FLEETDECK_DB=str(db))),
                      client_info=Implementation(name=name, version="1"))

    try:
        server.first_page()
        async with httpx2.AsyncClient(headers=server.auth, timeout=60) as http, \
                Client(streamable_http_client(server.base + "/mcp", http_client=http),
                       client_info=Implementation(name="via-serve", version="1")) as web, \
                stdio("stdio-a") as a, stdio("stdio-b") as b:
            await asyncio.gather(burst(web), burst(a), burst(b))
    finally:
        server.stop()
    report = verify_log(small_fleet["audit"])
    assert report.ok and report.entries == 3 * calls, report
    written = [json.loads(line) for line in read_lines(small_fleet["audit"] / "current.jsonl")[1:]]
    assert Counter(e["agent"]["declared_name"] for e in written) == {"via-serve": calls, "stdio-a": calls,
                                                                     "stdio-b": calls}
    assert {e["agent"]["name"] for e in written} == {"unknown:via-serve", "unknown:stdio-a", "unknown:stdio-b"}
    assert [e["seq"] for e in written] == list(range(1, 3 * calls + 1))


def _bad_keys(tmp_path):
    private, _, _ = new_key(tmp_path / "keys")
    loose = tmp_path / "loose.pem"
    shutil.copy(private, loose)
    os.chmod(loose, 0o640)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    os.chmod(garbage, 0o600)
    other = tmp_path / "ec.pem"
    other.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    os.chmod(other, 0o600)
    link = tmp_path / "link.pem"
    link.symlink_to(private)
    return {"missing": (tmp_path / "nope.pem", "does not exist"),
            "group-readable": (loose, "readable by others than its owner"),
            "malformed": (garbage, "not an unencrypted PKCS8 PEM private key"),
            "not ed25519": (other, "not an Ed25519 key"),
            "unreadable (a folder)": (tmp_path / "keys", "not a regular file"),
            "a symlink": (link, "cannot be opened")}


def test_unusable_key_stops_mcp_and_serve(small_fleet, tmp_path):
    for case, (path, message) in _bad_keys(tmp_path).items():
        run = subprocess.run(fleetdeck_argv("mcp"), input="", capture_output=True, text=True, timeout=120,
                             env=fleetdeck_env(FLEETDECK_DB=str(small_fleet["db"]), FLEETDECK_AUDIT_KEY=str(path)))
        assert run.returncode == 1 and message in run.stderr and "AUDIT_KEY" in run.stderr, (case, run.stderr)
        assert run.stdout == "", case
    serve = subprocess.run(fleetdeck_argv("--db", str(small_fleet["db"]), "serve", "--no-watch", "--port", "0"),
                           capture_output=True, text=True, timeout=120,
                           env=fleetdeck_env(FLEETDECK_AUDIT_KEY=str(tmp_path / "nope.pem")))
    assert serve.returncode == 1 and "does not exist" in serve.stderr and "http://" not in serve.stdout


async def test_signed_bridge_entries_verify_with_the_key(small_fleet, tmp_path, monkeypatch):
    private, public, kid = new_key(tmp_path / "keys")
    monkeypatch.setenv("FLEETDECK_AUDIT_KEY", str(private))
    monkeypatch.setenv("FLEETDECK_AUDIT_DIR", str(tmp_path / "signed-audit"))
    server = build_server(str(small_fleet["db"]))
    async with Client(server) as client:
        ok(await client.call_tool("repo.brief", {"repo": "alpha"}))
        assert ok(await client.call_tool("audit.tail", {}))["audit"]["key_id"] == kid
    report = verify_log(tmp_path / "signed-audit", pubkeys(public), require_signed=True)
    assert report.ok and report.signed == 2


async def test_write_tool_entries_carry_the_proposals_risk(small_fleet):
    server = build_server(str(small_fleet["db"]))
    (small_fleet["alpha"] / "new.txt").write_text("x\n")
    async with Client(server, client_info=Implementation(name="codex", version="1")) as client:
        for op, args in (("stage", {"paths": ["new.txt"]}), ("discard", {"paths": ["new.txt"],
                                                                          "include_untracked": True})):
            ok(await client.call_tool(f"operation.preview.{op}",
                                      {"repo": "alpha", "reason": "tidy", "dry_run": True, **args}))
    server.kit.audit.sync()
    written = [e for e in entries(small_fleet["audit"]) if e["tool"].startswith("operation.preview.")]
    assert [(e["op"], e["risk"]) for e in written] == [("stage", "low"), ("discard", "high")]


REFUSED = [("no.such.tool", {"x": 1}, "UNKNOWN_TOOL"), ("fleet.repos", {"limit": "many"}, "BAD_ARGUMENT"),
           ("fleet.repos", {"colour": "red"}, "BAD_ARGUMENT"),
           ("fleet.repos", {"limit": 1, "pad": "x" * (6 * 1024 * 1024 + 10)}, "LIMIT")]


def _calls(folder) -> list[tuple]:
    return [(e["tool"], e["result"], e["args"], (e["agent"] or {}).get("name")) for e in entries(folder)
            if e["event"] == "tool_call"]


async def test_calls_refused_before_a_tool_runs_are_audited_over_stdio(small_fleet):
    """`fleetdeck mcp` as a subprocess, the official client: every refusal is one entry with its code."""
    argv = fleetdeck_argv("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:],
                                   env=fleetdeck_env(FLEETDECK_DB=str(small_fleet["db"])))
    async with Client(params, client_info=Implementation(name="stdio-agent", version="1")) as client:
        for name, args, code in REFUSED:
            assert error_of(await client.call_tool(name, args))[0] == code
        ok(await client.call_tool("fleet.repos", {"limit": 1}))
    calls = _calls(small_fleet["audit"])
    assert [(t, r, n) for t, r, _, n in calls] == [
        *((name, code, "unknown:stdio-agent") for name, _, code in REFUSED),
        ("fleet.repos", "ok", "unknown:stdio-agent")]
    assert all(a and a.startswith("hmac-sha256:") for _, _, a, _ in calls)
    written = json.dumps(entries(small_fleet["audit"]))
    assert "many" not in written and "colour" not in written and "xxxx" not in written  # no argument contents
    assert verify_log(small_fleet["audit"]).ok


MODERN = "2026-07-28"


def _modern(name: str, arguments: object, req_id: int = 1) -> tuple[dict, dict]:
    """A raw 2026-era `tools/call` (no session): headers and body."""
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name,
               "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-client", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    return headers, {"jsonrpc": "2.0", "id": req_id, "method": "tools/call",
                     "params": {"name": name, "arguments": arguments, "_meta": meta}}


async def test_calls_refused_over_http_are_audited_once(small_fleet):
    """`fleetdeck serve`: no token, a wrong token, a foreign Host, params the SDK rejects, our own refusals —
    each tool call recorded once (those no credential authenticated folded into a counted entry); requests
    that are not tool calls none."""
    server = Server(small_fleet["db"], [small_fleet["root"]], ["--no-watch"])
    try:
        server.first_page()
        async with httpx2.AsyncClient(timeout=60) as raw:
            url = server.base + "/mcp"
            headers, body = _modern("fleet.repos", {"limit": 1})
            assert (await raw.post(url, headers=headers, json=body)).status_code == 401
            wrong = {**headers, "Authorization": "Bearer wrong"}
            assert (await raw.post(url, headers=wrong, json=_modern("repo.brief", {"repo": "alpha"})[1]))\
                .status_code == 401
            init = {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {}}
            assert (await raw.post(url, headers={"Content-Type": "application/json"}, json=init)).status_code == 401
            authed = {**headers, **server.auth}
            foreign = {**authed, "Host": "evil.example"}
            assert (await raw.post(url, headers=foreign, json=body)).status_code == 421
            bad = await raw.post(url, headers=authed, json=_modern("fleet.repos", "not an object", 2)[1])
            assert bad.json()["error"]["code"] == -32602          # the SDK's INVALID_PARAMS, before our code
            good = await raw.post(url, headers=authed, json=_modern("fleet.repos", {"limit": 1}, 3)[1])
            assert good.status_code == 200 and not good.json()["result"].get("isError")
        async with httpx2.AsyncClient(headers=server.auth, timeout=60) as http, \
                Client(streamable_http_client(url, http_client=http),
                       client_info=Implementation(name="via-serve", version="1")) as client:
            assert error_of(await client.call_tool("no.such.tool", {}))[0] == "UNKNOWN_TOOL"
    finally:
        server.stop()
    calls = [(t, r, a is not None) for t, r, a, _ in _calls(small_fleet["audit"])]
    # the first call no credential authenticated has its entry; the next ones (a wrong token, a foreign Host)
    # are counted into one `calls_folded` entry (tests/test_audit_flood.py), so a flood cannot fill the log
    assert calls == [("fleet.repos", "UNAUTHORIZED", True), ("fleet.repos", "INVALID_PARAMS", False),
                     ("fleet.repos", "ok", True), ("no.such.tool", "UNKNOWN_TOOL", True)]
    (counted,) = [e for e in entries(small_fleet["audit"]) if e["event"] == "calls_folded"]
    assert counted["count"] == 2 and "UNAUTHORIZED x1, HOST_REFUSED x1" in counted["summary"]
    assert "alpha" not in json.dumps(entries(small_fleet["audit"]))
    assert verify_log(small_fleet["audit"]).ok


async def test_calls_while_the_index_is_write_locked_are_audited(small_fleet):
    """Another process holds the index's write lock: a read answers (WAL), a proposal cannot be stored
    (INDEX_BUSY); both calls are entries with their results."""
    (small_fleet["alpha"] / "new.txt").write_text("x\n")
    argv = fleetdeck_argv("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:],
                                   env=fleetdeck_env(FLEETDECK_DB=str(small_fleet["db"])))
    with write_locked(small_fleet["db"]):
        async with Client(params, client_info=Implementation(name="busy-agent", version="1")) as client:
            ok(await client.call_tool("repo.status", {"repo": "alpha"}))
            busy = await client.call_tool("operation.preview.stage", {"repo": "alpha", "reason": "stage it",
                                                                      "paths": ["new.txt"]})
            assert error_of(busy)[0] == "INDEX_BUSY"
    assert [(t, r) for t, r, _, _ in _calls(small_fleet["audit"])] == [
        ("repo.status", "ok"), ("operation.preview.stage", "INDEX_BUSY")]
