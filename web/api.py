"""The JSON API routes that are not a page's data (those are in web/pages.py) and the live stream."""

from __future__ import annotations

import json
from typing import AsyncIterator

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from fleet.errors import FleetError
from fleet.index.freshness import freshness, history_progress, prediction_progress, watcher_state
from fleet.index.scan import refresh_repo
from fleet.inbox.items import counts_stamp, inbox
from fleet.index.store import Index
from fleet.index.wake import Bell
from fleet.ops.proposals import change_stamp
from fleet.views.digest import digest
from fleet.views.repos import public_records
from web.errors import json_error
from web.pages import repo_id
from web.params import DEFAULT_SINCE, int_param, split_list
from web.state import AppState, Tabs, index

POLL_SECONDS = 0.2
STATUS_EVERY = 25  # polls between index freshness / watcher state events (~5 s)


def api_digest(request: Request) -> Response:
    """Exactly `fleet.views.digest.digest()` (the MCP tool's contract); a bad argument is a 400."""
    params = request.query_params
    try:
        body = digest(index(request), params.get("since") or DEFAULT_SINCE,
                      repos=params.getlist("repos") or None, kinds=split_list(params.getlist("kinds")) or None,
                      max_events=int_param(params.get("max_events"), "max_events", 200))
    except FleetError as exc:
        return json_error(exc.code, exc.message)
    return JSONResponse(body)


def api_repos(request: Request) -> Response:
    include_gone = request.query_params.get("all") in ("1", "true")
    return JSONResponse(public_records(index(request), include_gone=include_gone))


def api_refresh(request: Request) -> Response:
    """Re-read one repository now (writes the index only, never the repository)."""
    idx = index(request)
    record = idx.repo(repo_id(request))
    if record is None:
        raise HTTPException(404, f"no repository with id {request.path_params['repo_id']} in the index")
    refresh_repo(idx, record["path"])
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"id": record["id"], "generation": idx.generation()})
    return RedirectResponse(request.app.url_path_for("repo", repo_id=record["id"]), status_code=303)


def _inbox_event(idx: Index) -> dict:
    found = inbox(idx)
    return {"counts": found["counts"], "total": sum(found["counts"].values()),
            "items": [{k: i[k] for k in ("key", "kind", "summary", "url")} for i in found["items"]]}


async def api_events(request: Request[AppState]) -> Response:
    return await live_response(request.state["tabs"], changes(request.state["poll"], request.state["bell"]))


async def live_response(tabs: Tabs, stream: AsyncIterator[ServerSentEvent]) -> Response:
    """`stream` as the event-stream response, its first event made before the response starts. A stream takes
    its starting point (the counters it reports moves against) before its first event, and the browser sees
    the stream open when the headers arrive: started lazily, after them, a change made in between (a
    proposal stored as the page went live) was already in the starting point and never pushed."""
    first = await anext(stream)
    return EventSourceResponse(held(tabs, first, stream), ping=15)


async def held(tabs: Tabs, first: ServerSentEvent,
               stream: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    """`first`, then `stream`, counted as an open tab until the client goes (sse-starlette then closes the
    generator)."""
    with tabs.holding():
        yield first
        async for event in stream:
            yield event


async def changes(idx: Index, bell: Bell | None = None) -> AsyncIterator[ServerSentEvent]:
    """Push the ids of repos whose rows changed, by polling the index's change counter.

    Polling the counter works whether the watcher runs in this process or another one, and costs one
    indexed `max()` per tick; the `bell` (rung by an agent's hook, fleet/index/wake.py) starts a tick at once.
    The status (freshness, the watcher) goes out every STATUS_EVERY ticks, and at once when the watcher's
    start-up re-check, the history backlog or the merge predictions' backlog moves, so their progress is live.
    """
    seen = idx.generation()
    stamp = change_stamp(idx)
    needs = None
    progress = (watcher_state(idx)["reverify"], history_progress(idx), prediction_progress(idx))
    yield ServerSentEvent(event="status", data=json.dumps(freshness(idx)))
    ticks = 0
    while True:
        await (bell.wait_async(POLL_SECONDS) if bell else anyio.sleep(POLL_SECONDS))
        ticks += 1
        if change_stamp(idx) != stamp:  # a proposal arrived or was decided: pending count and pages
            stamp = change_stamp(idx)
            yield ServerSentEvent(event="proposals", data=json.dumps({"pending": stamp[0]}))
        moved_needs = counts_stamp(idx)
        if moved_needs != needs:     # the "Needs you" strip, the title badge and the tab's notifications
            needs = moved_needs
            yield ServerSentEvent(event="inbox", data=json.dumps(_inbox_event(idx)))
        current = idx.generation()
        if current != seen:
            changed = idx.changed_since(seen)
            seen = current
            yield ServerSentEvent(event="change", data=json.dumps({"generation": current, "ids": changed}))
        moved = (watcher_state(idx)["reverify"], history_progress(idx), prediction_progress(idx))
        if ticks % STATUS_EVERY == 0 or moved != progress:
            progress = moved
            yield ServerSentEvent(event="status", data=json.dumps(freshness(idx)))
