"""MCP over stdio with bounded frames: a JSON-RPC line longer than MAX_FRAME is never held in memory.

The SDK's `stdio_server()` reads each line whole, however long. Here stdin is read through `CappedFrames`
(handed to `stdio_server(stdin=…)`, which keeps its own handling of stdout): a frame over the cap is
skipped in small chunks and answered with a JSON-RPC error (`data.code: LIMIT`) for the request id found in
its first bytes. Like the SDK, fd 0 is pointed at /dev/null while serving, so child processes read EOF.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from typing import BinaryIO, Iterator

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from mcp_bridge.envelope import MAX_FRAME, frame_limit_error

_SKIP_CHUNK = 1024 * 1024
_ID_PREFIX = 64 * 1024
# The request id, looked for before `params` (clients write jsonrpc/id/method first): best effort only.
_ID_RE = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


def request_id(prefix: bytes) -> int | str | None:
    """The id of an oversized request, when its first bytes name one before any `params`."""
    head = prefix.split(b'"params"', 1)[0]
    match = _ID_RE.search(head)
    if match is None:
        return None
    raw = match.group(1)
    try:
        return int(raw) if raw[:1] != b'"' else raw[1:-1].decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


class CappedFrames:
    """The lines of a binary stream as text, each at most MAX_FRAME bytes; `replies` gets the errors."""

    def __init__(self, raw: BinaryIO, max_frame: int = MAX_FRAME) -> None:
        self.raw = raw
        self.max_frame = max_frame
        self.replies: anyio.abc.ObjectSendStream | None = None  # set once the transport's streams exist

    def __aiter__(self) -> "CappedFrames":
        return self

    async def __anext__(self) -> str:
        while True:
            line, oversized = await anyio.to_thread.run_sync(self._read_frame)
            if oversized is not None:
                if self.replies is not None:
                    await self.replies.send(SessionMessage(frame_limit_error(request_id(oversized))))
                continue
            if line is None:
                raise StopAsyncIteration
            return line.decode("utf-8", "replace")

    def _read_frame(self) -> tuple[bytes | None, bytes | None]:
        """(line, None), (None, first bytes of an oversized frame that was skipped), or (None, None) at EOF."""
        data = self.raw.readline(self.max_frame + 1)
        if not data:
            return None, None
        if len(data) <= self.max_frame or data.endswith(b"\n"):
            return data, None
        prefix = data[:_ID_PREFIX]
        while True:  # drop the rest of the frame without keeping it
            chunk = self.raw.readline(_SKIP_CHUNK)
            if not chunk or chunk.endswith(b"\n"):
                return None, prefix


@contextlib.contextmanager
def private_stdin() -> Iterator[BinaryIO]:
    """fd 0 as a private stream, with fd 0 itself pointed at /dev/null until the block ends."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
    finally:
        os.close(devnull)
    stream = os.fdopen(private, "rb", closefd=False)
    try:
        yield stream
    finally:
        os.dup2(private, 0)


def protocol_server(server):
    """The protocol-level `Server` inside an MCPServer, to run it over our own streams.

    MCPServer offers no public way to do that (its `run_stdio_async` hard-wires `stdio_server()`), so this
    is the one place that reads its private `_lowlevel_server`; tests/test_mcp_frames.py fails loudly when
    an SDK release (pinned `mcp>=2.3,<3`) moves it.
    """
    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None or not callable(getattr(lowlevel, "run", None)):
        raise RuntimeError("this mcp release has no MCPServer._lowlevel_server.run; see mcp_bridge/stdio.py")
    return lowlevel


async def serve_stdio(server) -> None:
    """Serve `server` (an MCPServer) on stdin/stdout until the client closes stdin."""
    lowlevel = protocol_server(server)
    with private_stdin() as raw:
        frames = CappedFrames(raw)
        async with stdio_server(stdin=frames) as (read_stream, write_stream):  # type: ignore[arg-type]
            frames.replies = write_stream
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
