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
from typing import AsyncIterator, Callable, Sequence

import anyio
import jinja2
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import templates as templates_pkg
from fleet.repo.detail import repo_detail
from fleet.views.digest import digest, report
from fleet.caps import parse_int
from fleet.errors import FleetError
from fleet.index.events import KINDS
from fleet.index.freshness import freshness
from fleet.index.store import Index, open_index
from fleet.presence import collisions, presence
from fleet.views.queue import QueueFilter, attention_queue
from fleet.views.repos import public_records
from fleet.views.report import chart_geometry
from fleet.index.scan import refresh_repo
from web import filters
from web.security import Guard, SecurityMiddleware, allowed_hosts_for

POLL_SECONDS = 0.2
STATUS_EVERY = 25  # polls between index freshness / watcher state events (~5 s)
STATIC_DIR = Path(__file__).resolve().parent / "static"
NAV_LINKS = [("/", "Queue"), ("/digest", "Digest"), ("/agents", "Agents")]
# Something to run for the app's whole life (the watcher, an MCP session manager): entered in the lifespan.
Service = Callable[[], contextlib.AbstractAsyncContextManager]


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


def create_app(db_path: str | Path, token: str, bind_host: str = "127.0.0.1", *,
               services: Sequence[Service] = (), mounts: Sequence[BaseRoute] = ()) -> Starlette:
    """The whole dashboard as one ASGI app, wrapped in the security middleware.

    The two extension points, so `fleetdeck serve` can host more than the dashboard in one process:
    `services` are async context managers entered (in order) for the app's lifetime — the watcher, or an MCP
    session manager (mounted apps' own lifespans never run); `mounts` are extra routes placed after the
    dashboard's own, behind the same token/Host/CSRF checks — e.g. `Mount("/", app=mcp_app)` for `/mcp`.
    """
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

    def digest_context(request: Request) -> tuple[dict, int]:
        """The digest page's data for the form in the query string; a bad form is a 400 with its message."""
        index = indexes.get()
        form = digest_form(request)
        repo_ids = {r["name"]: r["id"] for r in sorted(index.summaries(), key=lambda r: r["name"])}
        context = {"form": form, "kinds": KINDS, "repo_names": list(repo_ids), "repo_ids": repo_ids,
                   "freshness": freshness(index), "data": None, "error": None}
        if form["since"] == "custom" and not form["custom"]:
            return dict(context, error="choose the start of the custom window (an ISO 8601 time)"), 400
        try:
            data = report(index, form["effective_since"], repos=form["repos"] or None,
                          kinds=form["kinds"] or None, max_events=form["max_events"])
        except FleetError as exc:
            return dict(context, error=exc.message), 400
        lost = {(c["repo"], c["sha"]) for c in data["fleet"]["recoverable"]}
        return dict(context, data=data, chart=chart_geometry(data["activity"]), recoverable=lost), 200

    def digest_page(request: Request) -> Response:
        context, status = digest_context(request)
        return render(request, "digest_page.html", context, status)

    def digest_fragment(request: Request) -> Response:
        context, status = digest_context(request)
        return render(request, "_digest.html", context, status)

    def api_digest(request: Request) -> Response:
        """Exactly `fleet.digest.digest()` (the MCP tool's contract); a bad argument is a 400."""
        params = request.query_params
        try:
            body = digest(indexes.get(), params.get("since") or DEFAULT_SINCE,
                          repos=params.getlist("repos") or None, kinds=split_list(params.getlist("kinds")) or None,
                          max_events=int_param(params.get("max_events"), "max_events", 200))
        except FleetError as exc:
            return JSONResponse({"error": {"code": exc.code, "message": exc.message}}, status_code=400)
        return JSONResponse(body)

    def api_presence(request: Request) -> Response:
        return JSONResponse(agents_context())

    def api_repos(request: Request) -> Response:
        include_gone = request.query_params.get("all") in ("1", "true")
        return JSONResponse(public_records(indexes.get(), include_gone=include_gone))

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
            async with contextlib.AsyncExitStack() as running:
                for service in services:
                    await running.enter_async_context(service())
                yield
        finally:
            app.state.poll_index.close()
            indexes.close()

    routes = [
        Route("/", queue_page, name="queue"),
        Route("/fragments/queue", queue_fragment),
        Route("/repos/{repo_id:int}", repo_page, name="repo"),
        Route("/fragments/repos/{repo_id:int}", repo_fragment),
        Route("/digest", digest_page, name="digest"),
        Route("/fragments/digest", digest_fragment),
        Route("/agents", agents_page, name="agents"),
        Route("/fragments/agents", agents_fragment),
        Route("/api/presence", api_presence),
        Route("/api/repos", api_repos),
        Route("/api/repos/{repo_id:int}", api_repo),
        Route("/api/repos/{repo_id:int}/refresh", api_refresh, methods=["POST"]),
        Route("/api/radar", api_radar),
        Route("/api/digest", api_digest),
        Route("/api/events", api_events),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        *mounts,
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: not_found},
                     middleware=[Middleware(SecurityMiddleware, guard=guard)])


DEFAULT_SINCE = "24h"
SINCE_PRESETS = (("90m", "last 90 minutes"), ("24h", "last 24 hours"), ("7d", "last 7 days"))


def split_list(values: list[str]) -> list[str]:
    """`kinds=commit,amend&kinds=reset` -> ['commit', 'amend', 'reset']."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def int_param(value: str | None, name: str, default: int) -> int:
    """A query-string integer (range checked by the fleet/ function it feeds)."""
    return parse_int(value, name, default, -2**63, 2**63)


def digest_form(request: Request) -> dict:
    """The digest page's form as given: a preset (`90m`, `24h`, `7d`) or `custom` with an ISO time in
    `custom`; any other `since` (a link with an ISO time or unix ms) shows up as a custom value."""
    params = request.query_params
    since = params.get("since") or DEFAULT_SINCE
    custom = params.get("custom", "").strip()
    if since != "custom" and since not in dict(SINCE_PRESETS):
        since, custom = "custom", since
    try:
        max_events = int_param(params.get("max_events"), "max_events", 200)
    except FleetError:
        max_events = 0  # refused with the library's own message by fleet.digest
    return {"since": since, "custom": custom, "effective_since": custom if since == "custom" else since,
            "presets": SINCE_PRESETS, "repos": [r for r in params.getlist("repos") if r],
            "kinds": split_list(params.getlist("kinds")), "max_events": max_events}


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
