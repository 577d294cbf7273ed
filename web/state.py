"""What the dashboard holds for its lifetime, typed: index handles, the CSRF token pages embed, and the
services `serve` runs beside it. The lifespan builds it; handlers read it from `request.state`.

Every index handle the dashboard uses comes from `index(request)` (or the SSE loop's own `poll`): this is
the one place that knows how web/ gets at the index.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Callable, Sequence, TypedDict

from starlette.applications import Starlette
from starlette.requests import Request

from fleet.index.pool import IndexPool
from fleet.index.store import Index

# Something to run for the app's whole life (the watcher, an MCP session manager): entered in the lifespan.
Service = Callable[[], contextlib.AbstractAsyncContextManager]


class AppState(TypedDict):
    indexes: IndexPool  # per-thread handles for the handlers (sync handlers run in a thread pool)
    poll: Index         # the SSE loop's handle: the event loop thread's own
    csrf: str           # embedded in every page for its forms and script


@dataclass(frozen=True)
class Lifespan:
    """Opens the index handles, enters the services in order, and closes everything on the way out."""

    db_path: str | Path
    csrf: str
    services: Sequence[Service] = ()

    @contextlib.asynccontextmanager
    async def __call__(self, _app: Starlette) -> AsyncIterator[AppState]:
        indexes = IndexPool(self.db_path)
        poll = indexes.get()  # the lifespan runs on the event loop thread, as the SSE loop does
        try:
            async with contextlib.AsyncExitStack() as running:
                for service in self.services:
                    await running.enter_async_context(service())
                yield {"indexes": indexes, "poll": poll, "csrf": self.csrf}
        finally:
            indexes.close()


def index(request: Request[AppState]) -> Index:
    """This thread's index handle."""
    return request.state["indexes"].get()
