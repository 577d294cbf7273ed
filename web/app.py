"""The dashboard's Starlette app: the pages of web/pages.py, the API and stream of web/api.py, the static
files, and whatever `serve` mounts beside them (the MCP bridge), all behind the guards of web/guards.py.

Every handler is a thin adapter: parse the request, call one `fleet/` function, render or serialise.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from fleet.agents import credentials
from fleet.index.store import open_index
from fleet.ops import landing
from fleet.ops.approver import is_approver
from web import api, passkeys, proposals, snapshots
from web.errors import json_error
from web.guards import API_PREFIXES, guards
from web.pages import PAGES, render, reverify_fragment
from web.security import Guard, allowed_hosts_for
from fleet.index.wake import Bell
from web.state import Lifespan, Service, Tabs

STATIC_DIR = Path(__file__).resolve().parent / "static"


async def http_error(request: Request, exc: HTTPException) -> Response:
    """404s and friends: structured JSON under /api/, the site's error page elsewhere."""
    if request.url.path.startswith(API_PREFIXES):
        return json_error("NOT_FOUND" if exc.status_code == 404 else "HTTP_ERROR", exc.detail, exc.status_code)
    return render(request, "error.html", {"status": exc.status_code, "message": exc.detail}, exc.status_code)


def routes() -> list[BaseRoute]:
    """The dashboard's own routes (named, so templates and redirects use `url_for`)."""
    return [
        *(route for page in PAGES for route in page.routes()),
        Route("/api/repos", api.api_repos, name="api_repos"),
        Route("/api/repos/{repo_id:int}/refresh", api.api_refresh, methods=["POST"], name="api_refresh"),
        Route("/api/digest", api.api_digest, name="api_digest"),
        Route("/api/events", api.api_events, name="api_events"),
        Route("/fragments/reverify", reverify_fragment, name="reverify_fragment"),
        *proposals.routes(),
        *passkeys.routes(),
        *snapshots.routes(),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]


def redeem_landing(db_path: str | Path, code: str | None) -> bool:
    """Spend a landing code (fleet/ops/landing.py) on the index the dashboard serves."""
    with open_index(db_path) as idx:
        return landing.redeem(idx, code)


def create_app(db_path: str | Path, token: str, bind_host: str = "127.0.0.1", *,
               services: Sequence[Service] = (), mounts: Sequence[BaseRoute] = (),
               tabs: Tabs | None = None, bell: Bell | None = None) -> Starlette:
    """The whole dashboard as one ASGI app, every route behind the guards.

    The two extension points, so `fleetdeck serve` can host more than the dashboard in one process:
    `services` are async context managers entered (in order) for the app's lifetime — the watcher, or an MCP
    session manager (mounted apps' own lifespans never run); `mounts` are extra routes placed after the
    dashboard's own, behind the same guards — e.g. `Route("/mcp", mcp_app)`. `tabs` counts the open event
    streams (`serve` hands the same counter to its desktop notifications); `bell`, rung by the agents' hooks,
    wakes the event streams at once.
    """
    guard = Guard(token, allowed_hosts_for(bind_host), redeem=partial(redeem_landing, db_path),
                  approver=partial(is_approver, db_path), agent_of=credentials.Lookup(db_path))
    return Starlette(routes=[*routes(), *mounts], lifespan=Lifespan(db_path, services, tabs or Tabs(), bell),
                     exception_handlers={HTTPException: http_error}, middleware=guards(guard))
