"""The dashboard's Starlette app: pages, HTML fragments for live patching, the JSON API and the SSE stream.

Every handler is a thin adapter: parse the request, call one `fleet/` function, render or serialise.
Sync handlers run in Starlette's thread pool, each thread with its own index connection (SQLite WAL lets
them read while the watcher writes); the SSE loop polls the change counter on a connection of its own.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import AsyncIterator

import anyio
import jinja2
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import templates as templates_pkg
from fleet.detail import repo_detail
from fleet.freshness import freshness
from fleet.index import Index, open_index
from fleet.presence import collisions, presence
from fleet.queue import QueueFilter, attention_queue
from fleet.scan import refresh_repo
from web import filters
from web.security import Guard, SecurityMiddleware, allowed_hosts_for

POLL_SECONDS = 0.2
STATUS_EVERY = 25  # polls between index freshness / watcher state events (~5 s)
STATIC_DIR = Path(__file__).resolve().parent / "static"
NAV_LINKS = [("/", "Queue"), ("/agents", "Agents")]


class Indexes:
    """One index connection per thread (sqlite3 connections are not for sharing between threads)."""

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


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(templates_pkg.__file__).parent),
                             autoescape=True)
    filters.install(env)
    env.globals["nav_links"] = NAV_LINKS
    return Jinja2Templates(env=env)


def create_app(db_path: str | Path, token: str, bind_host: str = "127.0.0.1") -> Starlette:
    """The whole dashboard as one ASGI app, wrapped in the security middleware."""
    indexes = Indexes(db_path)
    guard = Guard(token, allowed_hosts_for(bind_host))
    views = _templates()

    def render(request: Request, name: str, context: dict, status: int = 200) -> Response:
        context = {"csrf_token": guard.csrf, "request_path": request.url.path, **context}
        return views.TemplateResponse(request, name, context, status_code=status)

    def queue_context(request: Request) -> dict:
        index = indexes.get()
        data = attention_queue(index, QueueFilter.from_params(dict(request.query_params)), presence(index))
        data["freshness"] = freshness(index)
        return data

    def agents_context() -> dict:
        index = indexes.get()
        rows = presence(index)
        return {"agents": rows, "collisions": collisions(rows), "freshness": freshness(index)}

    def detail_or_404(request: Request) -> dict:
        index = indexes.get()
        detail = repo_detail(index, request.path_params["repo_id"], presence(index))
        if detail is None:
            raise HTTPException(404, f"no repository with id {request.path_params['repo_id']} in the index")
        return detail

    def queue_page(request: Request) -> Response:
        return render(request, "queue.html", queue_context(request))

    def queue_fragment(request: Request) -> Response:
        return render(request, "_queue.html", queue_context(request))

    def repo_page(request: Request) -> Response:
        return render(request, "repo.html", detail_or_404(request))

    def repo_fragment(request: Request) -> Response:
        return render(request, "_repo.html", detail_or_404(request))

    def agents_page(request: Request) -> Response:
        return render(request, "agents.html", agents_context())

    def agents_fragment(request: Request) -> Response:
        return render(request, "_agents.html", agents_context())

    def api_presence(request: Request) -> Response:
        return JSONResponse(agents_context())

    def api_repos(request: Request) -> Response:
        include_gone = request.query_params.get("all") in ("1", "true")
        return JSONResponse(indexes.get().repos(include_gone=include_gone))

    def api_repo(request: Request) -> Response:
        return JSONResponse(detail_or_404(request))

    def api_radar(request: Request) -> Response:
        return JSONResponse(queue_context(request))

    def api_refresh(request: Request) -> Response:
        """Re-read one repository now (writes the index only, never the repository)."""
        index = indexes.get()
        record = index.repo(request.path_params["repo_id"])
        if record is None:
            raise HTTPException(404, f"no repository with id {request.path_params['repo_id']} in the index")
        refresh_repo(index, record["path"])
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"id": record["id"], "generation": index.generation()})
        return RedirectResponse(f"/repos/{record['id']}", status_code=303)

    async def api_events(request: Request) -> Response:
        poll: Index = request.app.state.poll_index
        return EventSourceResponse(_changes(poll), ping=15)

    async def not_found(request: Request, exc: HTTPException) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": {"code": "NOT_FOUND" if exc.status_code == 404 else "HTTP_ERROR",
                                           "message": exc.detail}}, status_code=exc.status_code)
        return render(request, "error.html", {"status": exc.status_code, "message": exc.detail},
                      status=exc.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.poll_index = open_index(db_path)
        try:
            yield
        finally:
            app.state.poll_index.close()
            indexes.close()

    routes = [
        Route("/", queue_page, name="queue"),
        Route("/fragments/queue", queue_fragment),
        Route("/repos/{repo_id:int}", repo_page, name="repo"),
        Route("/fragments/repos/{repo_id:int}", repo_fragment),
        Route("/agents", agents_page, name="agents"),
        Route("/fragments/agents", agents_fragment),
        Route("/api/presence", api_presence),
        Route("/api/repos", api_repos),
        Route("/api/repos/{repo_id:int}", api_repo),
        Route("/api/repos/{repo_id:int}/refresh", api_refresh, methods=["POST"]),
        Route("/api/radar", api_radar),
        Route("/api/events", api_events),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: not_found},
                     middleware=[Middleware(SecurityMiddleware, guard=guard)])


async def _changes(index: Index) -> AsyncIterator[ServerSentEvent]:
    """Push the ids of repos whose rows changed, by polling the index's change counter.

    Polling the counter works whether the watcher runs in this process or another one, and costs one
    indexed `max()` per tick.
    """
    seen = index.generation()
    yield ServerSentEvent(event="status", data=json.dumps(freshness(index)))
    ticks = 0
    while True:
        await anyio.sleep(POLL_SECONDS)
        ticks += 1
        current = index.generation()
        if current != seen:
            changed = index.changed_since(seen)
            seen = current
            yield ServerSentEvent(event="change", data=json.dumps({"generation": current, "ids": changed}))
        if ticks % STATUS_EVERY == 0:
            yield ServerSentEvent(event="status", data=json.dumps(freshness(index)))
