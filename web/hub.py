"""The hub's dashboard (`fleetdeck serve --team DSN`): the same pages, the same `/api/…` JSON (with `machine` on
every record) and the same live stream, read from the team hub's PostgreSQL through fleet/team/hubview.py,
behind the same guards as the local dashboard (token, session from a single-use landing link, CSRF, Host).

Its reads are read-only sessions and it has no refresh or restore route. Started with an approver's key
(`--key PEM --as NAME`), a proposal's hub page decides it: web/hubdecide.py signs the decision, which only
the machine it belongs to acts on; without one it shows how to decide instead. The live stream LISTENs on the
hub's channel (one NOTIFY per push, fleet/team/push.py) in a thread of its own and tells the pages which
machines moved (`change`) and that a push landed (`pushed`: a proposal or a decision's outcome may have moved);
every few seconds it says each machine's freshness anyway.
"""

from __future__ import annotations

import contextlib
import json
from functools import partial
from pathlib import Path
from typing import AsyncIterator, Callable, TypedDict

import anyio
from sse_starlette import ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from fleet.errors import FleetError
from fleet.index.events import KINDS
from fleet.index.pool import IndexPool
from fleet.team import hubview
from fleet.team.decisions import Approver
from fleet.team.hubread import Hub
from fleet.team.listen import Listener
from web import hubdecide
from web.api import live_response
from web.app import STATIC_DIR
from web.errors import json_error
from web.guards import API_PREFIXES, guards
from web.pages import Page, render
from web.params import DEFAULT_SINCE, digest_form, int_param, split_list
from web.security import Guard, allowed_hosts_for
from web.state import Tabs

POLL_SECONDS = 0.2
STATUS_EVERY = 25   # polls between freshness events (~5 s): "last push 40 s ago" moves on its own


class HubState(TypedDict):
    hub: Hub
    tabs: Tabs
    listener: Listener
    approver: Approver | None   # who signs this dashboard's decisions (None: it decides nothing)
    own: IndexPool | None       # the serving machine's own index: its passkeys (web/hubdecide.py)


def hub_of(request: Request) -> Hub:
    return request.state["hub"]


def _label(request: Request) -> dict:
    """The hub as every page names it (never its DSN) and who signs its decisions (None: read-only)."""
    approver = hubdecide.approver_of(request)
    return {"label": hub_of(request).label, "approver": approver.name if approver else None}


def _shown(request: Request, machines: list[dict]) -> dict:
    """What every hub page shows beside its data: the hub, each machine's freshness."""
    return {"hub": _label(request), "machines": machines, "machine_states": {m["name"]: m for m in machines},
            "audit_banner": None}


def _failing(context: Callable[[Request, Hub], dict]) -> Callable[[Request, Hub], dict]:
    """A hub context whose FleetError (an unknown machine, a hub gone) is the page's 404 or 503."""
    def guarded(request: Request, hub: Hub) -> dict:
        try:
            return context(request, hub)
        except FleetError as exc:
            raise HTTPException(404 if exc.code == "NOT_FOUND" else 503, exc.message) from None
    return guarded


@_failing
def queue_context(request: Request, hub: Hub) -> dict:
    data = hubview.queue(hub, dict(request.query_params))
    return {**data, **_shown(request, data["machines"])}


@_failing
def repo_context(request: Request, hub: Hub) -> dict:
    machine, repo_id = request.path_params["machine"], request.path_params["repo_id"]
    detail = hubview.repo_page(hub, machine, repo_id) if repo_id < 2**63 else None
    if detail is None:
        raise HTTPException(404, f"no repository with id {repo_id} on machine {machine}")
    return {**detail, "proposals": [], "safety_net": None, **_shown(request, hubview.freshness(hub))}


@_failing
def digest_context(request: Request, hub: Hub) -> dict:
    form = digest_form(request.query_params)
    machines = hubview.freshness(hub)
    names = sorted({name for row in machines for name, _path in hub.machine(row).repo_names().values()})
    context = {"form": form, "kinds": KINDS, "repo_names": names, "repo_ids": {}, "data": None, "error": None,
               **_shown(request, machines)}
    if form["since"] == "custom" and not form["custom"]:
        return dict(context, error="choose the start of the custom window (an ISO 8601 time)")
    try:
        data = hubview.hub_report(hub, form["effective_since"], repos=form["repos"] or None,
                                  kinds=form["kinds"] or None, max_events=form["max_events"])
    except FleetError as exc:
        if exc.code in ("HUB_UNREACHABLE", "HUB_REFUSED"):
            raise
        return dict(context, error=exc.message)
    from fleet.views.report import chart_geometry

    lost = {(c["repo"], c["sha"]) for c in data["fleet"]["recoverable"]}
    return dict(context, data=data, chart=chart_geometry(data["activity"]), recoverable=lost)


@_failing
def agents_context(request: Request, hub: Hub) -> dict:
    data = hubview.agents(hub)
    return {**data, "switches": {"read_agent_sessions": True, "record_mcp_clients": True, "error": None},
            "fleet_wide": [], **_shown(request, data["machines"])}


@_failing
def proposals_context(request: Request, hub: Hub) -> dict:
    data = hubview.proposals(hub, request.query_params.get("machine") or None)
    return {**data, **_shown(request, data["machines"])}


@_failing
def proposal_context(request: Request, hub: Hub) -> dict:
    machine, proposal_id = request.path_params["machine"], request.path_params["proposal_id"]
    found = hubview.proposal(hub, machine, proposal_id)
    if found is None:
        raise HTTPException(404, f"machine {machine} has pushed no proposal {proposal_id}")
    return {**found, **_shown(request, hubview.freshness(hub))}


@_failing
def audit_context(request: Request, hub: Hub) -> dict:
    machines = hubview.freshness(hub)
    name = request.query_params.get("machine") or (machines[0]["name"] if machines else "")
    if not name:
        raise HTTPException(404, "no machine has enrolled on this hub yet")
    return {**hubview.audit(hub, name), **_shown(request, machines)}


def digest_status(context: dict) -> int:
    return 400 if context["error"] else 200


HUB_PAGES = tuple(Page(*args, source=hub_of, **kw) for *args, kw in (
    ("queue", "/", "/fragments/queue", queue_context, "queue.html", "_queue.html", "/api/radar", {}),
    ("repo", "/machines/{machine}/repos/{repo_id:int}", "/fragments/machines/{machine}/repos/{repo_id:int}",
     repo_context, "repo.html", "_repo.html", "/api/machines/{machine}/repos/{repo_id:int}", {}),
    ("digest", "/digest", "/fragments/digest", digest_context, "digest_page.html", "_digest.html", None,
     {"status": digest_status}),
    ("agents", "/agents", "/fragments/agents", agents_context, "agents.html", "_agents.html", "/api/presence", {}),
    ("proposals", "/proposals", "/fragments/proposals", proposals_context, "hub_proposals.html",
     "_hub_proposals.html", "/api/proposals", {}),
    ("proposal", "/machines/{machine}/proposals/{proposal_id}", "/fragments/machines/{machine}/proposals/{proposal_id}",
     proposal_context, "hub_proposal.html", "_hub_proposal.html", "/api/machines/{machine}/proposals/{proposal_id}",
     {}),
    ("audit", "/audit", "/fragments/audit", audit_context, "hub_audit.html", "_hub_audit.html", "/api/audit", {}),
))


def api_digest(request: Request) -> Response:
    """`/api/digest` over the hub: the digest contract merged across machines (`machine` on every event)."""
    params = request.query_params
    try:
        body = hubview.hub_digest(hub_of(request), params.get("since") or DEFAULT_SINCE,
                                  repos=params.getlist("repos") or None,
                                  kinds=split_list(params.getlist("kinds")) or None,
                                  max_events=int_param(params.get("max_events"), "max_events", 200),
                                  machine=params.get("machine") or None)
    except FleetError as exc:
        return json_error(exc.code, exc.message)
    return JSONResponse(body)


def api_search(request: Request) -> Response:
    """`/api/search?q=&kinds=&repos=&limit=&machine=`: the index's search across machines (`machine` on every
    match; branch names and pushed reflog lines)."""
    params = request.query_params
    try:
        body = hubview.search(hub_of(request), params.get("q") or "", kinds=split_list(params.getlist("kinds")) or None,
                              repos=params.getlist("repos") or None,
                              limit=int_param(params.get("limit"), "limit", 50), machine=params.get("machine") or None)
    except FleetError as exc:
        return json_error(exc.code, exc.message)
    return JSONResponse(body)


def api_machines(request: Request) -> Response:
    """Each machine's freshness: `[{name, state, last_push_at, age_s, last_push, share, …}]`."""
    try:
        return JSONResponse(hubview.freshness(hub_of(request)))
    except FleetError as exc:
        return json_error(exc.code, exc.message)


async def api_events(request: Request) -> Response:
    state = request.state
    return await live_response(state["tabs"], changes(state["hub"], state["listener"]))


def _moved(hub: Hub, seen: dict[str, int]) -> tuple[dict[str, int], list[int]]:
    """Each machine's change counter now, and the ids of the repos written since `seen` (all machines)."""
    now, ids = {}, []
    for row in hub.machines():
        m = hub.machine(row)
        now[row["name"]] = m.generation()
        if row["name"] in seen and now[row["name"]] != seen[row["name"]]:
            ids += m.changed_since(seen[row["name"]])
    return now, ids


async def changes(hub: Hub, listener: Listener) -> AsyncIterator[ServerSentEvent]:
    """The local stream's events over the hub: `pushed` when a push landed, then `change` (repo ids that moved,
    and the machines) when repos moved, `status` (each machine's freshness) every STATUS_EVERY ticks."""
    def status() -> ServerSentEvent:
        machines = hubview.freshness(hub)
        return ServerSentEvent(event="status", data=json.dumps(
            {"watcher": {"state": "running"}, "machines": machines,
             "presence": [m["last_push_at"] for m in machines]}))

    heard = listener.count
    seen, _ = await anyio.to_thread.run_sync(_moved, hub, {})
    yield await anyio.to_thread.run_sync(status)
    ticks = 0
    while True:
        await anyio.sleep(POLL_SECONDS)
        ticks += 1
        if listener.count != heard:
            heard = listener.count
            yield ServerSentEvent(event="pushed", data="{}")
            current, ids = await anyio.to_thread.run_sync(_moved, hub, seen)
            if current != seen or ids:
                moved = sorted(name for name in current if current[name] != seen.get(name))
                seen = current
                yield ServerSentEvent(event="change", data=json.dumps({"ids": ids, "machines": moved}))
        if ticks % STATUS_EVERY == 0:
            yield await anyio.to_thread.run_sync(status)


def routes() -> list[BaseRoute]:
    return [*(route for page in HUB_PAGES for route in page.routes()), *hubdecide.routes(),
            Route("/api/digest", api_digest, name="api_digest"),
            Route("/api/machines", api_machines, name="api_machines"),
            Route("/api/search", api_search, name="api_search"),
            Route("/api/events", api_events, name="api_events"),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static")]


async def http_error(request: Request, exc: HTTPException) -> Response:
    if request.url.path.startswith(API_PREFIXES):
        return json_error("NOT_FOUND" if exc.status_code == 404 else "UNAVAILABLE" if exc.status_code == 503
                          else "HTTP_ERROR", exc.detail, exc.status_code)
    return render(request, "error.html", {"status": exc.status_code, "message": exc.detail, "hub": _label(request),
                                          "audit_banner": None}, exc.status_code)


@contextlib.asynccontextmanager
async def _lifespan(hub: Hub, listener: Listener, tabs: Tabs, approver: Approver | None, own: Path | None,
                    _app: Starlette) -> AsyncIterator[HubState]:
    pool = IndexPool(own) if own is not None else None
    listener.start()
    try:
        yield {"hub": hub, "tabs": tabs, "listener": listener, "approver": approver, "own": pool}
    finally:
        listener.stop()
        hub.close()
        if pool is not None:
            pool.close()


def create_hub_app(hub: Hub, listener: Listener, token: str, bind_host: str = "127.0.0.1", *,
                   redeem: Callable[[str | None], bool], approver: Approver | None = None,
                   own: Path | None = None) -> Starlette:
    """The hub's dashboard as one ASGI app behind the local dashboard's guards; `redeem` spends a landing code
    (serve's: kept in this machine's own index `own`, as for the local dashboard, which holds its passkeys
    too). With `approver` (and `own`), its proposal pages decide."""
    if approver is not None and own is None:
        raise ValueError("a hub dashboard that decides needs the serving machine's own index (its passkeys)")
    guard = Guard(token, allowed_hosts_for(bind_host), redeem=redeem)
    return Starlette(routes=routes(), lifespan=partial(_lifespan, hub, listener, Tabs(), approver, own),
                     exception_handlers={HTTPException: http_error}, middleware=guards(guard))

