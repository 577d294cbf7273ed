"""stdio's fast path for `tools/call` (mcp_bridge/fastcall.py) answers byte for byte as the SDK does.

The same frames go to `fleetdeck mcp` with the fast path on and off (FLEETDECK_MCP_FASTPATH=0), in both protocol
eras: successes, invalid and unknown arguments, an unknown tool, tool errors, params and envelopes the SDK itself
refuses, string ids, a call before the handshake, parallel calls and a cancelled one. Every stdout line must be the
same bytes. The official client in both eras must see the same results too, and in-process the fast path must
take the plain calls (so the comparison is not between two SDK runs) and leave the rest to the SDK.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from fleet.audit.read import entries as audit_entries
from mcp_bridge import fastcall
from mcp_bridge.fastcall import FastCalls
from mcp_bridge.server import build_server
from mcp_bridge.stdio import protocol_server
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env

pytestmark = pytest.mark.slow

MODERN = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1.0"},
                    "io.modelcontextprotocol/clientCapabilities": {}}}
BAD_ENVELOPE = {"_meta": {**MODERN["_meta"], "io.modelcontextprotocol/protocolVersion": "1999-01-01"}}


def _frame(id_, method: str, params: dict | None) -> str:
    body = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body)


def _calls(meta: dict) -> list[tuple[object, dict]]:
    """(id, tools/call params) of every single call, in order: what each must answer is the SDK's answer."""
    def call(name, args):
        return {"name": name, "arguments": args, **meta}
    return [
        (4, call("repo.status", {"repo": "dirty"})), (5, call("repo.brief", {"repo": "dirty"})),
        (6, call("worktree.list", {"repo": "alpha"})), (7, call("repo.history", {"repo": "alpha", "limit": 2})),
        (8, call("stash.list", {"repo": "dirty"})),
        (9, call("repo.status", {"repo": 5})), (10, call("repo.status", {"repo": "dirty", "bogus": 1})),
        (11, call("repo.history", {"repo": "alpha", "limit": 0})), (12, call("repo.status", {})),
        (13, call("no.such", {})),
        (14, call("repo.status", {"repo": "/"})), (15, call("repo.brief", {"repo": "../../etc"})),
        (16, call("commit.details", {"repo": "alpha", "rev": "no-such-rev"})),
        (17, {"name": "repo.status", "arguments": [1], **meta}), (18, {"arguments": {}, **meta}),
        (19, {"name": 5, "arguments": {}, **meta}), (20, {"name": "repo.status", **meta}),
        ("s21", call("repo.status", {"repo": "alpha"})), ("22", call("repo.status", {"repo": "beta"})),
        (23, {"name": "repo.status", "arguments": {"repo": "dirty"}, **(BAD_ENVELOPE if meta else MODERN)}),
    ]


def _steps(era: str) -> list[tuple[list[str], list[object]]]:
    """(frames written together, ids answered) in order."""
    meta = MODERN if era == "modern" else {}
    if era == "modern":
        steps = [([_frame(1, "server/discover", meta)], [1])]
    else:
        steps = [([_frame(3, "tools/call", {"name": "repo.status", "arguments": {"repo": "dirty"}})], [3]),
                 ([_frame(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "raw-test", "version": "1.0"}}),
                   json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})], [1])]
    steps += [([_frame(2, "tools/list", meta)], [2]), ([_frame(24, "ping", meta or None)], [24])]
    steps += [([_frame(id_, "tools/call", params)], [id_]) for id_, params in _calls(meta)]
    parallel = [(30 + n, {"name": "repo.status", "arguments": {"repo": repo}, **meta})
                for n, repo in enumerate(["dirty", "alpha", "beta", "dirty", "alpha", "beta"])]
    steps.append(([_frame(id_, "tools/call", p) for id_, p in parallel], [id_ for id_, _ in parallel]))
    cancel = {"requestId": 40, "reason": "test", **meta} if meta else {"requestId": 40, "reason": "test"}
    steps.append(([_frame(40, "tools/call", {"name": "repo.brief", "arguments": {"repo": "dirty"}, **meta}),
                   json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}),
                   _frame(41, "ping", meta or None)], [41]))
    return steps


def _transcript(mcp_fleet, steps: list[tuple[list[str], list[object]]], fast: bool) -> list[bytes]:
    """Every stdout line, step by step (a step's lines in id order: parallel answers may come in any order)."""
    env = fleetdeck_env(FLEETDECK_DB=str(mcp_fleet["_db"]), FLEETDECK_MCP_FASTPATH=None if fast else "0")
    proc = subprocess.Popen(fleetdeck_argv("mcp"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    lines: list[bytes] = []
    try:
        for frames, ids in steps:
            proc.stdin.write(("\n".join(frames) + "\n").encode())
            proc.stdin.flush()
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < len(ids) and time.monotonic() < deadline:
                line = proc.stdout.readline()
                assert line, proc.stderr.read().decode()
                assert json.loads(line).get("id") in ids, line
                got.append(line)
            lines += sorted(got, key=lambda raw: str(json.loads(raw)["id"]))
        proc.stdin.close()
        lines += proc.stdout.read().splitlines(keepends=True)  # nothing more: the cancelled call is unanswered
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return lines


def _audited(mcp_fleet, steps: list[tuple[list[str], list[object]]], fast: bool) -> tuple[list[bytes], Counter]:
    """`_transcript`, and the audit entries it appended, up to the parallel calls' (what the cancelled call
    leaves depends on when the cancel lands), as (event, tool, result, arguments' fingerprint, agent)."""
    folder = Path(mcp_fleet["_db"]).parent / "audit"
    start = len(list(audit_entries(folder))) if folder.exists() else 0
    lines = _transcript(mcp_fleet, steps, fast)
    written = list(audit_entries(folder))[start:]
    last_parallel = max(n for n, entry in enumerate(written) if entry["tool"] == "repo.status")
    return lines, Counter((e["event"], e["tool"], e["result"], e["args"], (e["agent"] or {}).get("name"))
                          for e in written[:last_parallel + 1])


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_fast_path_writes_the_sdks_bytes(mcp_fleet, era):
    (sdk, sdk_audit), (fast, fast_audit) = (_audited(mcp_fleet, _steps(era), on) for on in (False, True))
    assert fast_audit == sdk_audit and sum(fast_audit.values()) >= 20  # every call audited as the SDK's path does
    assert len(sdk) == sum(len(ids) for _, ids in _steps(era))
    for before, after in zip(sdk, fast):
        assert after == before
    assert len(fast) == len(sdk)
    answers = {json.loads(line)["id"]: json.loads(line) for line in fast}
    assert 40 not in answers and 41 in answers  # the cancelled call unanswered, the ping after it answered
    assert answers[4]["result"]["structuredContent"]["branch"] == "main"
    assert answers[13]["result"]["structuredContent"]["error"]["code"] == "UNKNOWN_TOOL"
    assert answers[17]["error"]["code"] == -32602  # the SDK's own refusal, through the SDK
    assert "error" in answers[23]  # an envelope the SDK refuses (2026) or does not take on this connection
    if era == "legacy":
        assert "error" in answers[3]  # before the handshake


def _large_commit(repo) -> str:
    """A dangling commit (no ref, index or work tree touched) over 400 files: renames, binaries, non-ASCII and
    quoted paths, tabs, quotes, backslashes and control characters in lines, and a change too big to keep."""
    def git(*args: str, data: bytes | None = None, index: str | None = None) -> str:
        env = {**fleetdeck_env(), **({"GIT_INDEX_FILE": index} if index else {})}
        return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=True,
                              env=env).stdout.decode().strip()

    index = str(repo / ".git" / "large-commit-index")
    git("read-tree", "HEAD", index=index)

    def put(path: str, body: bytes) -> None:
        blob = git("hash-object", "-w", "--stdin", data=body)
        git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", index=index)

    def commit(parent: str, message: str) -> str:
        tree = git("write-tree", index=index)
        return git("commit-tree", tree, "-p", parent, "-m", message)

    for n in range(420):
        put(f"dir{n % 7}/file {n} ñ.txt" if n % 3 else f"src/f{n}.py", "".join(
            f"line {k} of {n}\n" for k in range(12)).encode())
    put("data/logo.bin", bytes(range(256)) * 8)
    put("moved/keep.txt", b"same words here\n" * 30)
    base = commit(git("rev-parse", "HEAD"), "large base")
    for n in range(0, 420, 2):
        path = f"dir{n % 7}/file {n} ñ.txt" if n % 3 else f"src/f{n}.py"
        put(path, f'changed {n}\t"quoted" \\back \x01ctl é\n\nline 3 of {n}\n'.encode() + b"tail\n" * (n % 5))
    git("update-index", "--force-remove", "moved/keep.txt", index=index)
    put("moved/renamed ☃.txt", b"same words here\n" * 30)
    put("data/logo.bin", bytes(range(255, -1, -1)) * 8)
    put("big/huge.txt", b"".join(b"huge line %d\n" % k for k in range(30000)))
    return commit(base, "large change: renames, binaries, non-ASCII")


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_fast_path_writes_the_sdks_bytes_for_a_large_commit(mcp_fleet, era):
    """A diff's answer is spliced into the frame as its text mirror's JSON (fastcall._SLOT): the same bytes."""
    sha = _large_commit(mcp_fleet["alpha"])
    meta = MODERN if era == "modern" else {}
    steps = _steps(era)[:2 if era == "modern" else 3]  # the handshake and tools/list
    for n, args in enumerate([{"rev": sha}, {"rev": sha, "max_bytes": 40000}, {"rev": sha, "max_files": 5000,
                              "max_bytes": 16 * 1024 * 1024}, {"rev": f"{sha}^"}]):
        steps.append(([_frame(50 + n, "tools/call", {"name": "commit.details",
                                                      "arguments": {"repo": "alpha", **args}, **meta})], [50 + n]))
    sdk, fast = _transcript(mcp_fleet, steps, False), _transcript(mcp_fleet, steps, True)
    assert fast == sdk
    answers = [json.loads(line)["result"]["structuredContent"] for line in fast[-4:]]
    assert answers[0]["file_count"] == 213 and answers[1]["truncated"]
    statuses = {c["status"] for c in answers[2]["changes"]}
    assert {"renamed", "modified", "added"} <= statuses, statuses
    assert any(c["binary"] for c in answers[2]["changes"])


async def _client_results(mcp_fleet, mode: str, fast: bool) -> list[dict]:
    env = fleetdeck_env(FLEETDECK_DB=str(mcp_fleet["_db"]), FLEETDECK_MCP_FASTPATH=None if fast else "0")
    argv = fleetdeck_argv("mcp")
    out = []
    async with Client(StdioServerParameters(command=argv[0], args=argv[1:], env=env), mode=mode) as client:
        out.append((await client.list_tools()).model_dump(mode="json"))
        for _, params in _calls({})[:13]:  # the ones the client itself lets through
            result = await client.call_tool(params["name"], params["arguments"])
            out.append(result.model_dump(mode="json"))
        parallel = await asyncio.gather(*(client.call_tool("repo.status", {"repo": repo})
                                          for repo in ["dirty", "alpha", "beta", "dirty"]))
        out += [result.model_dump(mode="json") for result in parallel]
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_official_client_sees_the_same_results(mcp_fleet, mode):
    assert await _client_results(mcp_fleet, mode, True) == await _client_results(mcp_fleet, mode, False)


class _Lines:
    """A wire that keeps what is written."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def write(self, text: str) -> None:
        self.lines.append(text)


async def test_fast_path_takes_plain_calls_only(mcp_fleet):
    """In-process: which frames the fast path answers itself (and that parallel calls run side by side)."""
    server = build_server(str(mcp_fleet["_db"]), lazy_tools=True)
    wire = _Lines()
    async with anyio.create_task_group() as tasks:
        fast = FastCalls(server, protocol_server(server), wire, tasks)
        assert not fast.take(_frame(1, "server/discover", MODERN))  # the first request: the SDK's
        taken = {id_: fast.take(_frame(id_, "tools/call", params)) for id_, params in _calls(MODERN)}
        assert [id_ for id_, took in taken.items() if took] == [*range(4, 17), 20, "s21", "22"]
        assert not fast.take(_frame(2, "tools/list", MODERN)) and not fast.take(_frame(3, "ping", MODERN))
        assert len(fast.running) == 16 and not wire.lines  # all started, the reader never waited for one
    answered = sorted(str(json.loads(line)["id"]) for line in wire.lines)
    assert answered == sorted(str(id_) for id_, took in taken.items() if took)
    assert not fast.running


def test_only_verified_sdk_releases_get_the_fast_path(mcp_fleet, monkeypatch):
    """The path copies SDK steps, private ones too: an unverified release is served by the SDK alone, and the
    release installed here must be a verified one, or this file would be testing a path nobody runs."""
    installed = importlib.metadata.version("mcp")
    assert fastcall.verified(installed), f"mcp {installed}: run this file against it, then add it to VERIFIED"
    assert fastcall.verified("2.3.7") and not fastcall.verified("2.4.0") and not fastcall.verified("3.0.0")
    server = build_server(str(mcp_fleet["_db"]), lazy_tools=True)

    async def built() -> tuple[object, object]:
        async with anyio.create_task_group() as tasks:
            on = fastcall.fast_calls(server, protocol_server(server), _Lines(), tasks)
            monkeypatch.setattr(fastcall, "installed_version", lambda name: "2.4.0")
            return on, fastcall.fast_calls(server, protocol_server(server), _Lines(), tasks)

    on, unverified = anyio.run(built)
    assert isinstance(on, FastCalls) and unverified is None


async def test_a_middleware_the_fast_path_does_not_take_turns_it_off(mcp_fleet):
    """A server middleware added beside fleetdeck's own (a limit, a policy) would be skipped by the fast path:
    with one installed, every call goes to the SDK, whose chain runs it."""
    server = build_server(str(mcp_fleet["_db"]), lazy_tools=True)
    call = _frame(4, "tools/call", {"name": "repo.status", "arguments": {"repo": "dirty"}, **MODERN})
    async with anyio.create_task_group() as tasks:
        fast = FastCalls(server, protocol_server(server), _Lines(), tasks)
        fast.take(_frame(1, "server/discover", MODERN))
        server.toolkit()  # its audit middleware is one the path takes itself
        assert fast.take(call)

        async def limit(ctx, call_next):
            return await call_next(ctx)

        server.middleware.append(limit)
        assert not fast.take(_frame(5, "tools/call", {"name": "repo.status", "arguments": {"repo": "dirty"}, **MODERN}))
