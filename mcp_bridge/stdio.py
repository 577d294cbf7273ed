"""MCP over stdio: bounded frames, and the wire read and written on the event loop itself.

The SDK's `stdio_server()` reads each line whole, however long, and moves every read, write and flush to a
worker thread (anyio.wrap_file): three thread round trips a call beside the tool's own. Here the wire is
handed to `stdio_server(stdin=…, stdout=…)` (which keeps its own JSON-RPC framing): `Frames` splits what
arrives into lines of at most MAX_FRAME bytes — a longer frame is skipped as it arrives, never held whole,
and answered with a JSON-RPC error (`data.code: LIMIT`) for the request id found in its first bytes — and
`Wire` writes each answer straight to the descriptor. A pipe or socket (what an MCP client gives its server)
is read and written non-blocking, woken by the event loop; anything else (a file, a terminal, whose mode
other processes share) through a thread as before. Like the SDK, fd 0 points at /dev/null and fd 1 at
stderr while serving, so child processes read EOF and stray output misses the wire. A plain `tools/call` is
answered by mcp_bridge/fastcall.py from the frame itself, with the SDK's own bytes; everything else reaches
the SDK as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
from typing import Iterator

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from mcp_bridge.envelope import MAX_FRAME, frame_limit_error
from mcp_bridge.fastcall import FastCalls, fast_calls

_CHUNK = 256 * 1024
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


class Framer:
    """Bytes in, frames out: `(line, None)` for a line of at most `max_frame` bytes (its newline aside),
    `(None, first bytes)` for a longer one, whose rest is dropped as it arrives."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self.buffer = bytearray()  # the start of a frame whose newline has not arrived
        self.skipping: bytes | None = None  # the first bytes of the oversized frame being dropped

    def feed(self, data: bytes) -> list[tuple[bytes | None, bytes | None]]:
        out: list[tuple[bytes | None, bytes | None]] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self.skipping is not None:
                out.append((None, self.skipping))
                self.skipping = None
            elif len(self.buffer) + end - start <= self.max_frame:
                out.append((bytes(self.buffer) + data[start:end + 1], None))
            else:
                out.append((None, bytes((self.buffer + data[start:start + _ID_PREFIX])[:_ID_PREFIX])))
            self.buffer.clear()
            start = end + 1
        if self.skipping is None and start < len(data):
            self.buffer += data[start:]
            if len(self.buffer) > self.max_frame:
                self.skipping = bytes(self.buffer[:_ID_PREFIX])
                self.buffer.clear()
        return out

    def end(self) -> list[tuple[bytes | None, bytes | None]]:
        """What is left at EOF: an unterminated last line, or the oversized frame it was."""
        if self.skipping is not None:
            prefix, self.skipping = self.skipping, None
            return [(None, prefix)]
        line = bytes(self.buffer)
        self.buffer.clear()
        return [(line, None)] if line else []


def pollable(fd: int) -> bool:
    """A pipe or a socket: the event loop can wait on it, and its non-blocking mode is this process's own
    business (a file cannot be waited on; a terminal's mode is shared with the shell)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Frames:
    """The frames of fd `fd` as text, for `stdio_server(stdin=…)`; `replies` gets the LIMIT errors."""

    def __init__(self, fd: int, max_frame: int = MAX_FRAME) -> None:
        self.fd = fd
        self.framer = Framer(max_frame)
        self.ready: list[tuple[bytes | None, bytes | None]] = []
        self.at_eof = False
        self.on_loop = pollable(fd)
        self.replies: anyio.abc.ObjectSendStream | None = None  # set once the transport's streams exist
        self.fast: FastCalls | None = None  # the tools/call requests answered without the SDK (fastcall.py)

    def __aiter__(self) -> "Frames":
        return self

    async def __anext__(self) -> str:
        while True:
            while not self.ready:
                if self.at_eof:
                    raise StopAsyncIteration
                data = await self._read()
                if data:
                    self.ready = self.framer.feed(data)
                else:
                    self.at_eof, self.ready = True, self.framer.end()
            line, oversized = self.ready.pop(0)
            if oversized is not None:
                if self.replies is not None:
                    await self.replies.send(SessionMessage(frame_limit_error(request_id(oversized))))
                continue
            text = line.decode("utf-8", "replace")
            if self.fast is None or not self.fast.take(text):
                return text

    async def _read(self) -> bytes:
        if not self.on_loop:
            return await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK)
        while True:
            try:
                return os.read(self.fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)


class Wire:
    """fd `fd` as the text stream `stdio_server(stdout=…)` writes each JSON-RPC line to, unbuffered."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.on_loop = pollable(fd)
        self.lock = anyio.Lock()  # the SDK's writer and the fast path's calls: one whole line at a time

    async def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        async with self.lock:
            await self._write(view)

    async def _write(self, view: memoryview) -> None:
        while view:
            if not self.on_loop:
                view = view[await anyio.to_thread.run_sync(os.write, self.fd, view):]
                continue
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)

    async def flush(self) -> None:
        """Nothing is buffered: each write reached the descriptor."""


@contextlib.contextmanager
def claimed(fd: int, diversion: int) -> Iterator[int]:
    """A private, close-on-exec copy of `fd` (non-blocking when it is a pipe or socket), with `fd` itself
    pointed at `diversion` until the block ends; then `fd` is the wire again, its mode as it was."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    flags = fcntl.fcntl(private, fcntl.F_GETFL)
    try:
        os.dup2(diversion, fd)
        if pollable(private):
            fcntl.fcntl(private, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        yield private
    finally:
        fcntl.fcntl(private, fcntl.F_SETFL, flags)
        os.dup2(private, fd)
        os.close(private)


@contextlib.contextmanager
def private_wire() -> Iterator[tuple[int, int]]:
    """(stdin, stdout) of the wire, private to the transport: fd 0 reads /dev/null and fd 1 writes to stderr
    meanwhile."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        with claimed(0, devnull) as stdin, claimed(1, 2 if _is_open(2) else devnull) as stdout:
            yield stdin, stdout
    finally:
        os.close(devnull)


def _is_open(fd: int) -> bool:
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
    except OSError:
        return False
    return True


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
    with private_wire() as (stdin, stdout):
        frames, wire = Frames(stdin), Wire(stdout)
        async with anyio.create_task_group() as calls:  # the fast path's calls; their answers go out before exit
            async with stdio_server(stdin=frames, stdout=wire) as (read_stream,  # type: ignore[arg-type]
                                                                   write_stream):
                frames.replies = write_stream
                frames.fast = fast_calls(server, lowlevel, wire, calls)
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
