"""The dashboard's pages, as a small registry: each page is a context function (request + index -> the
data), a page template, a fragment template (the part the page's script re-fetches and patches in place on
a live update) and, where the data is also an API, a JSON route. Context functions call one `fleet/`
function each and know nothing of HTML.

A page's `status` function picks the status from the data (the digest's bad form is a 400 that still shows
the form); a missing thing is an `HTTPException(404)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from fleet.audit.view import audit_banner, audit_view
from fleet.errors import FleetError
from fleet.index.events import KINDS
from fleet.index.freshness import freshness, watcher_state
from fleet.inbox.items import KINDS as INBOX_KINDS, counts as inbox_counts, inbox
from fleet.index.store import Index
from fleet.notify.status import notifiers
from fleet.ops.confirm import needs_explicit
from fleet.presence import collisions, presence
from fleet.presence.bridge import fleet_wide_agents
from fleet.presence.switches import switches_view
from fleet.views.detail import repo_detail
from fleet.snapshot.view import repo_timeline
from fleet.views.digest import report
from fleet.views.queue import QueueFilter, attention_queue
from fleet.views.render import environment
from fleet.views.report import chart_geometry
from web.params import digest_form
from web.proposals import list_context, pending_badge, proposal_context, waiting_in
from web.state import AppState, has_index, index

MAX_ROW_ID = 2**63 - 1  # SQLite's integer range: a larger id names no row (and must not overflow)


def _paths(request: Request) -> dict:
    """`url_for` in templates gives paths (`/repos/3`) rather than absolute URLs, so every link stays on
    the address the browser used; `repo_url(id, machine)` is a repo page's (the hub's name the machine too)."""
    def repo_url(repo_id: int, machine: object = None, name: str = "repo") -> str:
        return request.app.url_path_for(name, repo_id=repo_id, **({"machine": machine} if machine else {}))

    return {"url_for": lambda name, /, **params: request.app.url_path_for(name, **params), "repo_url": repo_url}


def needs_you(request: Request) -> dict:
    """The "Needs you" strip every page shows: the inbox's counts by kind."""
    try:
        counts = inbox_counts(index(request))
    except (KeyError, AttributeError):  # an error page rendered outside the app's lifespan
        counts = {kind: 0 for kind in INBOX_KINDS}
    return {"needs_you": {"counts": counts, "total": sum(counts.values())}}


templates = Jinja2Templates(env=environment(), context_processors=[_paths, pending_badge, needs_you])
templates.env.globals["needs_explicit"] = needs_explicit  # _decide.html asks for the confirmation the route requires

Context = Callable[[Request, Any], dict]   # (request, what `Page.source` gives: the index, or the hub)


def ok(_context: dict) -> int:
    return 200


def render(request: Request[AppState], name: str, context: dict, status: int = 200) -> Response:
    """A template with what every page needs (the session's CSRF token for forms and the script, none for a
    bearer client; the audit banner; the watcher's start-up re-check)."""
    session = getattr(request.scope.get("user"), "session", None)
    return templates.TemplateResponse(request, name, {"csrf_token": session.csrf if session else "",
                                                      "audit_banner": audit_banner(), **context,
                                                      "reverify": reverify(request)},
                                      status_code=status)


def reverify(request: Request) -> dict | None:
    """The watcher's start-up re-check (`fleet.index.freshness.reverify_progress`), or None (the hub's
    dashboard has no watcher)."""
    return watcher_state(index(request))["reverify"] if has_index(request) else None


def reverify_fragment(request: Request) -> Response:
    """The re-check banner alone: the page script re-fetches it when the event stream says it moved."""
    return render(request, "_reverify.html", {})


def repo_id(request: Request) -> int:
    """The `{repo_id}` of the path, or a 404 when no row can have it."""
    value: int = request.path_params["repo_id"]
    if value > MAX_ROW_ID:
        raise HTTPException(404, f"no repository with id {value} in the index")
    return value


def queue_context(request: Request, idx: Index) -> dict:
    data = attention_queue(idx, QueueFilter.from_params(dict(request.query_params)), presence(idx))
    data["freshness"] = freshness(idx)
    return data


def repo_context(request: Request, idx: Index) -> dict:
    detail = repo_detail(idx, repo_id(request), presence(idx))
    if detail is None:
        raise HTTPException(404, f"no repository with id {request.path_params['repo_id']} in the index")
    detail["proposals"] = waiting_in(idx, detail["repo"]["path"])
    detail["safety_net"] = repo_timeline(idx, detail["repo"])
    return detail


def agents_context(request: Request, idx: Index) -> dict:
    rows = presence(idx)
    return {"agents": rows, "collisions": collisions(rows), "freshness": freshness(idx),
            "switches": switches_view(), "fleet_wide": fleet_wide_agents(idx)}


def digest_context(request: Request, idx: Index) -> dict:
    """The digest page's data for the form in the query string; a bad form sets `error` (a 400)."""
    form = digest_form(request.query_params)
    repo_ids = {r["name"]: r["id"] for r in sorted(idx.summaries(), key=lambda r: r["name"])}
    context = {"form": form, "kinds": KINDS, "repo_names": list(repo_ids), "repo_ids": repo_ids,
               "freshness": freshness(idx), "data": None, "error": None}
    if form["since"] == "custom" and not form["custom"]:
        return dict(context, error="choose the start of the custom window (an ISO 8601 time)")
    try:
        data = report(idx, form["effective_since"], repos=form["repos"] or None,
                      kinds=form["kinds"] or None, max_events=form["max_events"])
    except FleetError as exc:
        return dict(context, error=exc.message)
    lost = {(c["repo"], c["sha"]) for c in data["fleet"]["recoverable"]}
    return dict(context, data=data, chart=chart_geometry(data["activity"]), recoverable=lost)


def inbox_context(request: Request, idx: Index) -> dict:
    """Exactly `fleetdeck inbox --json`."""
    return {**inbox(idx), "notifiers": notifiers(idx.path)}


def audit_context(request: Request, idx: Index) -> dict:
    return audit_view(idx, dict(request.query_params))


def digest_status(context: dict) -> int:
    return 400 if context["error"] else 200


@dataclass(frozen=True)
class Page:
    """One page of the dashboard: its routes are `path` (named `name`), `fragment_path` (named
    `<name>_fragment`) and, when set, `api_path` (named `api_<name>`), all fed by `context`."""

    name: str
    path: str
    fragment_path: str
    context: Context
    template: str
    fragment: str
    api_path: str | None = None
    status: Callable[[dict], int] = ok
    source: Callable[[Request], object] = index   # what `context` reads: the index (the hub's: web/hub.py)

    def _rendered(self, request: Request, template: str) -> Response:
        data = self.context(request, self.source(request))
        return render(request, template, data, self.status(data))

    def page(self, request: Request) -> Response:
        return self._rendered(request, self.template)

    def fragment_view(self, request: Request) -> Response:
        return self._rendered(request, self.fragment)

    def json(self, request: Request) -> Response:
        return JSONResponse(self.context(request, self.source(request)))

    def routes(self) -> list[Route]:
        routes = [Route(self.path, self.page, name=self.name),
                  Route(self.fragment_path, self.fragment_view, name=f"{self.name}_fragment")]
        if self.api_path:
            routes.append(Route(self.api_path, self.json, name=f"api_{self.name}"))
        return routes


PAGES = (
    Page("queue", "/", "/fragments/queue", queue_context, "queue.html", "_queue.html", "/api/radar"),
    Page("repo", "/repos/{repo_id:int}", "/fragments/repos/{repo_id:int}", repo_context, "repo.html",
         "_repo.html", "/api/repos/{repo_id:int}"),
    Page("digest", "/digest", "/fragments/digest", digest_context, "digest_page.html", "_digest.html",
         status=digest_status),
    Page("agents", "/agents", "/fragments/agents", agents_context, "agents.html", "_agents.html",
         "/api/presence"),
    Page("proposals", "/proposals", "/fragments/proposals", list_context, "proposals.html", "_proposals.html"),
    Page("proposal", "/proposals/{proposal_id}", "/fragments/proposals/{proposal_id}", proposal_context,
         "proposal.html", "_proposal.html", "/api/proposals/{proposal_id}"),
    Page("audit", "/audit", "/fragments/audit", audit_context, "audit.html", "_audit.html", "/api/audit"),
    Page("inbox", "/inbox", "/fragments/inbox", inbox_context, "inbox.html", "_inbox.html", "/api/inbox"),
)
