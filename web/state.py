"""What the dashboard holds for its lifetime, typed: index handles, the CSRF token pages embed, and the
services `serve` runs beside it. The lifespan builds it; handlers read it from `request.state`.

Every index handle the dashboard uses comes from `index(request)` (or the SSE loop's own `poll`): this is
the one place that knows how web/ gets at the index.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Callable, Sequence, TypedDict

from starlette.applications import Starlette
from starlette.requests import Request

from fleet.index.store import Index, open_index

# Something to run for the app's whole life (the watcher, an MCP session manager): entered in the lifespan.
Service = Callable[[], contextlib.AbstractAsyncContextManager]


class Indexes:
    """One index connection per thread (sqlite3 connections are not for sharing between threads): sync
    handlers run in Starlette's thread pool, and SQLite's WAL lets them read while the watcher writes."""

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = str(db_path)
        self._local = threading.local()
        self._all: list[Index] = []
        self._lock = threading.Lock()

    def get(self) -> Index:
        index = getattr(self._local, "index", None)
        if index is None:
            index = open_index(self.db_path)
            self._local.index = index
            with self._lock:
                self._all.append(index)
        return index

    def close(self) -> None:
        with self._lock:
            for index in self._all:
                index.close()
            self._all.clear()


class AppState(TypedDict):
    indexes: Indexes  # per-thread handles for the handlers
    poll: Index       # the SSE loop's own handle (it runs on the event loop, not in the pool)
    csrf: str         # embedded in every page for its forms and script


@dataclass(frozen=True)
class Lifespan:
    """Opens the index handles, enters the services in order, and closes everything on the way out."""

    db_path: str | Path
    csrf: str
    services: Sequence[Service] = ()

    @contextlib.asynccontextmanager
    async def __call__(self, _app: Starlette) -> AsyncIterator[AppState]:
        indexes = Indexes(self.db_path)
        poll = open_index(self.db_path)
        try:
            async with contextlib.AsyncExitStack() as running:
                for service in self.services:
                    await running.enter_async_context(service())
                yield {"indexes": indexes, "poll": poll, "csrf": self.csrf}
        finally:
            poll.close()
            indexes.close()


def index(request: Request[AppState]) -> Index:
    """This thread's index handle."""
    return request.state["indexes"].get()
