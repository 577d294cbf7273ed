"""What the dashboard holds for its lifetime, typed: index handles and the services `serve` runs beside it.
The lifespan builds it; handlers read it from `request.state`.

Services are entered before the first request is answered, so each must be quick to enter; work that would
delay the first page (the watcher's re-check, building the MCP bridge) starts `behind` it.

Every index handle the dashboard uses comes from `index(request)` (or the SSE loop's own `poll`): this is
the one place that knows how web/ gets at the index.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable, Iterator, Sequence, TypedDict

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from fleet.index.pool import IndexPool
from fleet.index.store import Index
from fleet.index.wake import Bell

# Something to run for the app's whole life (the watcher, an MCP session manager): entered in the lifespan.
Service = Callable[[], contextlib.AbstractAsyncContextManager]

log = logging.getLogger("fleetdeck.serve")


def behind(after: Callable[[], Awaitable[object]], service: Service) -> Service:
    """`service`, entered in a task of its own once `after()` returns (the server is answering) and left when
    the app stops; entering it takes no time from the lifespan. A service that fails to start is logged and
    the dashboard goes on without it."""
    @contextlib.asynccontextmanager
    async def run_behind() -> AsyncIterator[None]:
        stop = asyncio.Event()
        started = False

        async def run() -> None:
            nonlocal started
            await after()
            started = True
            try:
                async with service():
                    await stop.wait()
            except Exception:
                log.exception("%s stopped", getattr(service, "__qualname__", "a background service"))

        task = asyncio.ensure_future(run())
        try:
            yield
        finally:
            stop.set()
            if not started:  # the app stops before it ever answered: nothing to wait for
                task.cancel()
            await asyncio.wait([task], timeout=30)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    return run_behind


class Tabs:
    """The dashboard tabs open now, counted from the live connections: every page holds one event stream
    (/api/events) while it is open, and the browser drops it when the tab closes. `serve`'s desktop
    notifications ask `any()` (from another thread)."""

    def __init__(self) -> None:
        self._open = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """One stream, counted while it lasts."""
        with self._lock:
            self._open += 1
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1

    def any(self) -> bool:
        return self._open > 0


class AppState(TypedDict):
    indexes: IndexPool  # per-thread handles for the handlers (sync handlers run in a thread pool)
    poll: Index         # the SSE loop's handle: the event loop thread's own
    tabs: Tabs          # the event streams open now
    bell: Bell | None   # rung beside the index when a hook recorded something (serve's; None: look on a timer)


@dataclass(frozen=True)
class Lifespan:
    """Opens the index handles, enters the services in order, and closes everything on the way out."""

    db_path: str | Path
    services: Sequence[Service] = ()
    tabs: Tabs = field(default_factory=Tabs)
    bell: Bell | None = None

    @contextlib.asynccontextmanager
    async def __call__(self, _app: Starlette) -> AsyncIterator[AppState]:
        indexes = IndexPool(self.db_path)
        poll = indexes.get()  # the lifespan runs on the event loop thread, as the SSE loop does
        try:
            # A handler thread with its index handle, before the first request: the handlers' thread pool, used
            # first, imports anyio's event-loop backend (~16 ms), which that request would otherwise wait for.
            await run_in_threadpool(indexes.get)
            async with contextlib.AsyncExitStack() as running:
                for service in self.services:
                    await running.enter_async_context(service())
                yield {"indexes": indexes, "poll": poll, "tabs": self.tabs, "bell": self.bell}
        finally:
            indexes.close()


def index(request: Request[AppState]) -> Index:
    """This thread's index handle."""
    return request.state["indexes"].get()


def has_index(request: Request) -> bool:
    """Whether this app serves a local index (the hub's dashboard reads PostgreSQL: web/hub.py)."""
    return "indexes" in request.scope.get("state", {})
