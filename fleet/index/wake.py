"""A doorbell beside the index: a process that wrote something the person must see at once (an agent's hook
recorded that it waits) rings it, and `serve` — whose event streams and notifications otherwise look at the
index every few hundred milliseconds — looks now.

The bell is a FIFO next to the index file (`<index>.wake`, 0600). `ring` opens it without blocking and writes
one byte: no import beyond `os`, nothing to wait for, and nothing at all when no `serve` reads it (the open
fails with ENXIO). `Bell` is `serve`'s end: a thread reads the FIFO and wakes every waiter, threads
(`wait`) and asyncio tasks (`wait_async`). What a ring means is only "look again": the byte carries nothing,
and a reader that misses one (two `serve`s on one index share the bytes) finds the change at its next look.
"""

from __future__ import annotations

import os
import select
import stat
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:            # the hook imports this module to ring: asyncio stays out of its start-up
    import asyncio

MAX_READ = 4096


def wake_path(db_path: str | os.PathLike[str]) -> str:
    return os.fspath(db_path) + ".wake"


def ring(db_path: str | os.PathLike[str]) -> None:
    """Wake the `serve` that watches this index, if one does; never blocks, never fails."""
    try:
        fd = os.open(wake_path(db_path), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:           # no FIFO, or nobody reading it
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"!")
    except OSError:           # a full pipe is a bell already rung
        pass
    finally:
        os.close(fd)


class Bell:
    """`serve`'s end of the doorbell. `rung` counts the rings seen; `wait(seen, timeout)` returns once it
    moved past `seen` (or at the timeout), `wait_async(timeout)` once the next ring comes (or the timeout)."""

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.path = wake_path(db_path)
        self.rung = 0
        self._cond = threading.Condition()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._fds: tuple[int, ...] = ()
        self._stop_r, self._stop_w = os.pipe()
        self._thread: threading.Thread | None = None

    def open(self) -> "Bell":
        """Make the FIFO (a path there that is not one is left alone: the bell stays silent, looks go on)."""
        try:
            if not os.path.lexists(self.path):
                os.mkfifo(self.path, 0o600)
            reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            if not stat.S_ISFIFO(os.fstat(reader).st_mode):
                os.close(reader)
                raise OSError(f"{self.path} is not a FIFO")
            keeper = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)   # no end-of-file when a ringer closes
        except OSError as exc:
            import logging

            logging.getLogger("fleetdeck.wake").warning("no doorbell beside the index (%s): changes are seen at the next look", exc)
            return self
        self._fds = (reader, keeper)
        self._thread = threading.Thread(target=self._listen, name="index-wake", daemon=True)
        self._thread.start()
        return self

    def _listen(self) -> None:
        reader = self._fds[0]
        while True:
            ready, _, _ = select.select([reader, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            try:
                os.read(reader, MAX_READ)     # every byte waiting: one wake for a burst of rings
            except BlockingIOError:
                continue
            with self._cond:
                self.rung += 1
                self._cond.notify_all()
                for loop, event in list(self._waiters):
                    loop.call_soon_threadsafe(event.set)

    def wait(self, seen: int, timeout: float) -> int:
        """The ring count once it is past `seen`, or at `timeout` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: self.rung != seen, timeout)
            return self.rung

    async def wait_async(self, timeout: float) -> None:
        """Until the next ring, or `timeout` seconds."""
        import asyncio

        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._cond:
            self._waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter[1].wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            with self._cond:
                self._waiters.discard(waiter)

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fd in (*self._fds, self._stop_r, self._stop_w):
            os.close(fd)
        self._fds = ()
