"""Proposals on the dashboard: the list (pending first), one proposal's page with its preview, and the
person's decisions (approve, reject) as JSON for the page's script and for the person's scripts.

Deciding is a person's act: `web.guards.decision_actor` says who decides — the person's tab (its session
plus the decision key only that tab's script holds) or the approver token of the person's own scripts
(`X-Fleetdeck-Approver`, see fleet/ops/approver.py); the MCP bearer token is refused outright. A high-risk
proposal needs a second, explicit confirmation (`confirm_high_risk`; the rule, the CLI's too: fleet/ops/confirm.py).
Approving runs the proposal here and now (fleet.ops.service.approve).
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from fleet.audit.view import proposal_trail
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops import proposals, service
from fleet.ops.confirm import decision_risk, require_explicit
from fleet.ops.patchops import full_patch
from fleet.ops.policy import repo_label
from web.errors import error_response, wants_json
from web.guards import decision_actor
from web.passkeys import confirm as passkey_confirm
from web.params import int_param
from web.state import index

MAX_BODY = 64 * 1024


def list_context(request: Request, idx: Index) -> dict:
    """The list page: summary rows (no previews: a proposal's page shows its own), the newest 300."""
    found = proposals.page(idx, limit=300)
    rows = found["proposals"]
    for row in rows:
        row["repo_label"] = repo_label(idx, row["repo"])
    return {"pending": [r for r in rows if r["status"] == "pending"],
            "active": [r for r in rows if r["status"] in ("approved", "executing")],
            "history": [r for r in rows if r["status"] not in service.ACTIVE],
            "total": found["total"], "truncated": found["next_cursor"] is not None,
            "omitted_count": found["total"] - len(rows)}


def api_list(request: Request) -> Response:
    """`GET /api/proposals?limit=&cursor=&status=`: one page of summary rows (docs/proposals.md); each row's
    `href` is the whole proposal."""
    params = request.query_params
    try:
        limit = int_param(params.get("limit"), "limit", 50)
        if not 1 <= limit <= proposals.PAGE_MAX:
            raise FleetError("BAD_ARGUMENT", f"limit must be 1..{proposals.PAGE_MAX}")
        found = proposals.page(index(request), limit, params.get("cursor"), params.get("status") or None)
    except FleetError as exc:
        return error_response(request, exc)
    for row in found["proposals"]:
        row["href"] = request.app.url_path_for("api_proposal", proposal_id=row["id"])
    return JSONResponse(found)


def waiting_in(idx: Index, repo_path: str) -> list[dict]:
    """The proposals waiting for a person in one repository, oldest first (the repo page decides them)."""
    return service.list_public(idx, status="pending", repo=repo_path, limit=50)["proposals"]


def proposal_context(request: Request, idx: Index) -> dict:
    try:
        row = service.show(idx, request.path_params["proposal_id"])
    except FleetError as exc:
        raise HTTPException(404 if exc.code == "NOT_FOUND" else 400, exc.message) from None
    try:
        trail = proposal_trail(idx, row["id"])
    except FleetError as exc:  # an audit the process could not open: the page still shows the proposal
        trail = {"enabled": True, "entries": [], "truncated": False, "omitted_count": 0, "error": exc.message}
    return {"proposal": row, "trail": trail}


def pending_badge(request: Request) -> dict:
    """The pending count every page's header shows (one indexed count)."""
    try:
        return {"pending_proposals": proposals.change_stamp(index(request))[0]}
    except (KeyError, AttributeError):  # an error page rendered outside the app's lifespan
        return {"pending_proposals": 0}


# --- decisions ---------------------------------------------------------------------------------------------

async def _fields(request: Request) -> dict:
    if request.headers.get("content-type", "").startswith("application/json"):
        body = await request.body()
        if len(body) > MAX_BODY:
            raise FleetError("BAD_ARGUMENT", "request body too large")
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            raise FleetError("BAD_ARGUMENT", "the body is not JSON") from None
        return data if isinstance(data, dict) else {}
    form = await request.form(max_files=0, max_fields=20)
    return {k: v for k, v in form.items() if isinstance(v, str)}


def _done(request: Request, row: dict, what: str) -> Response:
    if wants_json(request):
        return JSONResponse(row)
    url = request.app.url_path_for("proposal", proposal_id=row["id"])
    return RedirectResponse(f"{url}?decided={what}", status_code=303)


async def approve(request: Request) -> Response:
    proposal_id = request.path_params["proposal_id"]
    try:
        by = decision_actor(request)
        fields = await _fields(request)
        row = await run_in_threadpool(service.show, index(request), proposal_id)
        require_explicit(row, fields.get("confirm_high_risk") in (True, "yes", "on", "true", "1"))
        await run_in_threadpool(passkey_confirm, request, proposal_id, decision_risk("approve", row["risk"]),
                                by, fields.get("passkey"))
        done = await run_in_threadpool(lambda: service.approve(index(request), proposal_id, by))
    except FleetError as exc:
        return error_response(request, exc)
    return _done(request, done, "approved")


async def reject(request: Request) -> Response:
    proposal_id = request.path_params["proposal_id"]
    try:
        by = decision_actor(request)
        fields = await _fields(request)
        reason = fields.get("reason") or ""
        await run_in_threadpool(passkey_confirm, request, proposal_id, decision_risk("reject", None), by,
                                fields.get("passkey"))
        done = await run_in_threadpool(lambda: service.reject(index(request), proposal_id, by, reason))
    except FleetError as exc:
        return error_response(request, exc)
    return _done(request, done, "rejected")


async def patch_text(request: Request) -> Response:
    """A `patch` proposal's whole patch as text/plain (fleet.ops.patchops.full_patch: the display rule
    applied), for a change longer than the page's diff cut."""
    try:
        body = await run_in_threadpool(full_patch, index(request), request.path_params["proposal_id"])
    except FleetError as exc:
        return error_response(request, exc)
    return PlainTextResponse(body)


def routes() -> list[Route]:
    """The paged list API and the decision routes (the pages and a proposal's JSON are Page entries in
    web/pages.py)."""
    return [
        Route("/api/proposals", api_list, name="api_proposals"),
        Route("/proposals/{proposal_id}/patch", patch_text, name="proposal_patch"),
        Route("/proposals/{proposal_id}/approve", approve, methods=["POST"], name="proposal_approve"),
        Route("/proposals/{proposal_id}/reject", reject, methods=["POST"], name="proposal_reject"),
        Route("/api/proposals/{proposal_id}/approve", approve, methods=["POST"], name="api_proposal_approve"),
        Route("/api/proposals/{proposal_id}/reject", reject, methods=["POST"], name="api_proposal_reject"),
    ]
