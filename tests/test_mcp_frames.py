"""Bounded input: a JSON-RPC frame is at most 8 MiB on stdio and on HTTP `/mcp`, and a tool's arguments at
most MAX_TOOL_INPUT, each refused with a clear LIMIT error; the server stays up and its memory stays flat."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from fleet.index.scan import scan
from fleet.index.store import open_index
from mcp_bridge.envelope import MAX_FRAME
from mcp_bridge.server import build_server
from mcp_bridge.stdio import Framer, Frames, Wire, protocol_server, request_id
from mcp_bridge.toolkit import MAX_TOOL_INPUT
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import init_repo
from tests.fleets.mcp_fleet import call, error_of
from tests.fleets.stdio import StdioSession
from tests.test_mcp_http import TOKEN, served  # noqa: F401  (the uvicorn-served /mcp fixture)

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("frames")
    init_repo(base / "fleet" / "alpha", commits=1)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(base / "fleet")])
    return db


def big_patch_args(size: int) -> dict:
    return {"repo": "alpha", "changes": [{"mode": "create_file", "path": "big.txt", "new_content": "x" * size}]}


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.slow
def test_stdio_refuses_an_oversized_frame_without_reading_it(small):
    with StdioSession(fleetdeck_argv("mcp"), fleetdeck_env(FLEETDECK_DB=str(small))) as session:
        assert "result" in session.call_tool("fleet.repos", {})
        before = peak_rss_kib(session.proc.pid)
        frame = json.dumps({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                            "params": {"name": "patch.validate", "arguments": {"patch": "y" * (40 * MiB)}}})
        session.send_bytes(frame.encode() + b"\n")
        reply = session.reply(41)
        assert reply["error"]["data"]["code"] == "LIMIT" and str(MAX_FRAME) in reply["error"]["message"]
        grown_mib = (peak_rss_kib(session.proc.pid) - before) / 1024
        assert grown_mib < 24, f"a 40 MiB frame grew the server by {grown_mib:.0f} MiB"
        # no id before `params`: the error says id null; the next request is answered as usual
        session.send_bytes(b'{"params": {"x": "' + b"z" * (9 * MiB) + b'"}, "id": 42}\n')
        assert session.reply(42)["error"]["data"]["code"] == "LIMIT"
        after = session.call_tool("repo.brief", {"repo": "alpha"})
        assert after["result"].get("isError") is not True


@pytest.mark.slow
async def test_stdio_official_client_gets_limit_for_a_big_tool_input_and_a_big_frame(small):
    argv = fleetdeck_argv("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=fleetdeck_env(FLEETDECK_DB=str(small)))
    async with Client(params) as client:
        code, message = error_of(await client.call_tool("patch.generate", big_patch_args(MAX_TOOL_INPUT)))
        assert code == "LIMIT" and str(MAX_TOOL_INPUT) in message
        with pytest.raises(Exception) as raised:
            await client.call_tool("patch.generate", big_patch_args(MAX_FRAME + MiB))
        assert "larger than" in str(raised.value)
        assert (await client.call_tool("fleet.repos", {})).is_error is False


async def test_in_process_calls_are_capped_too(small):
    code, _ = error_of(await call(build_server(str(small)), "patch.validate", {"patch": "p" * (MAX_TOOL_INPUT + 1)}))
    assert code == "LIMIT"


def test_http_refuses_an_oversized_body_with_a_limit_error(served):  # noqa: F811
    url, _repo = served
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "patch.validate", "arguments": {"patch": "y" * (MAX_FRAME + 1)}}})
    r = httpx2.post(url, content=body, timeout=60, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
    assert r.status_code == 413
    assert r.json()["error"]["data"]["code"] == "LIMIT"


async def test_http_official_client_gets_limit_for_a_big_tool_input(served):  # noqa: F811
    url, _repo = served
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            code, _ = error_of(await client.call_tool("patch.generate", big_patch_args(MAX_TOOL_INPUT)))
            assert code == "LIMIT"
            with pytest.raises(Exception):
                await client.call_tool("patch.generate", big_patch_args(MAX_FRAME + MiB))
            assert (await client.call_tool("fleet.repos", {})).is_error is False


FRAMES = b'{"a":1}\n' + b'{"jsonrpc":"2.0","id":"r-1","params":"' + b"q" * 300 + b'"}\n' + b"x" * 100 + b"\n" + b"tail"


def frames_of(chunks: list[bytes], max_frame: int = 100) -> list[tuple[bytes | None, bytes | None]]:
    framer = Framer(max_frame)
    out = [frame for chunk in chunks for frame in framer.feed(chunk)]
    return out + framer.end()


@pytest.mark.parametrize("size", [1, 7, 100, 101, len(FRAMES)])
def test_frames_are_cut_alike_however_the_bytes_arrive(size: int):
    """Lines of up to max_frame bytes (newline aside) pass whole; a longer one becomes its first bytes, where
    the request id is looked for; an unterminated last line still counts; the chunking changes nothing."""
    frames = frames_of([FRAMES[i:i + size] for i in range(0, len(FRAMES), size)])
    assert frames[0] == (b'{"a":1}\n', None)
    assert frames[1][0] is None and request_id(frames[1][1]) == "r-1"
    assert frames[2] == (b"x" * 100 + b"\n", None)
    assert frames[3:] == [(b"tail", None)]
    assert frames_of([b"y" * 250]) == [(None, b"y" * 250)]  # oversized up to EOF: still refused
    assert frames_of([]) == []


def test_id_sniffing():
    assert request_id(b'{"params": {"id": 5}, "id": 6') is None
    assert request_id(b'{"jsonrpc": "2.0", "id": 12345, "method"') == 12345


async def read_all(frames: Frames) -> list[str]:
    return [line async for line in frames]


def test_frames_read_a_file_through_a_thread_and_a_pipe_on_the_loop(tmp_path: Path):
    """The two ways the wire is read give the same lines: a regular file (which no event loop can wait on)
    through a worker thread, a pipe written in odd-sized pieces, non-blocking, woken by the loop."""
    path = tmp_path / "frames"
    path.write_bytes(FRAMES)
    fd = os.open(path, os.O_RDONLY)
    try:
        from_file = Frames(fd, max_frame=100)
        assert not from_file.on_loop
        assert anyio.run(read_all, from_file) == ['{"a":1}\n', "x" * 100 + "\n", "tail"]
    finally:
        os.close(fd)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)

    def writer() -> None:
        for i in range(0, len(FRAMES), 37):
            os.write(write_end, FRAMES[i:i + 37])
            time.sleep(0.002)
        os.close(write_end)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        from_pipe = Frames(read_end, max_frame=100)
        assert from_pipe.on_loop
        assert anyio.run(read_all, from_pipe) == ['{"a":1}\n', "x" * 100 + "\n", "tail"]
    finally:
        thread.join()
        os.close(read_end)


def test_the_wire_writes_a_large_answer_whole_into_a_full_pipe():
    """An answer larger than a pipe holds is written as the reader drains it (waits on the loop, no loss)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    answer = "z" * (3 * 1024 * 1024) + "\n"
    got = bytearray()

    def reader() -> None:
        while chunk := os.read(read_end, 65536):
            got.extend(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        async def write() -> None:
            wire = Wire(write_end)
            assert wire.on_loop
            await wire.write(answer)
            await wire.flush()
        anyio.run(write)
    finally:
        os.close(write_end)
        thread.join()
        os.close(read_end)
    assert got == answer.encode()


def test_the_protocol_server_adapter_finds_the_sdk_internals(small):
    """The one private SDK attribute fleetdeck reads: this fails loudly on an SDK that moved it."""
    assert callable(protocol_server(build_server(str(small))).run)
    with pytest.raises(RuntimeError):
        protocol_server(object())
