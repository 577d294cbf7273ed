"""Deciding a machine's proposal on the hub's dashboard (`serve --team DSN --key PEM --as NAME`): the person's
tab approves or rejects, the server signs the decision with the approver's Ed25519 key through the one
decision code `team decide` uses (fleet.team.decisions.decide), and the machine the proposal belongs to acts
on it as it acts on every hub decision (its own checks, pinned keys and local approve path).

The same rules as the local dashboard's decisions (web/proposals.py): the guards' Host, Origin and CSRF
checks, the tab's decision key (`web.guards.decision_actor`: the MCP bearer token never decides), the
explicit confirmation of a high-risk approval and the passkey its risk asks for, by the passkeys and
`[passkeys] require` of the machine serving the dashboard. The page posts the digest of the mirrored row it
showed (`seen`): a proposal that changed on the hub since is refused (STALE), nothing is signed.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops.confirm import decision_risk, require_explicit
from fleet.team.decisions import Approver, decide
from web.errors import json_error, wants_json
from web.guards import decision_actor
from web.passkeys import confirm as passkey_confirm, step_up
from web.proposals import _fields

CONFIRMED = (True, "yes", "on", "true", "1")
NO_APPROVER = ("this hub dashboard signs no decisions: start it with `fleetdeck serve --team DSN --key PEM --as "
               "NAME` (your Ed25519 key, `fleetdeck audit keygen`), or use `fleetdeck team decide`")


def approver_of(request: Request) -> Approver | None:
    return request.scope["state"].get("approver")


def own_index(request: Request) -> Index:
    """This thread's handle on the serving machine's own index (its passkeys, as its own dashboard's)."""
    return request.scope["state"]["own"].get()


def _refused(request: Request, exc: FleetError) -> Response:
    """The envelope for the page's script; for a person's plain form post, the hub's error page."""
    if wants_json(request):
        return json_error(exc.code, exc.message)
    raise HTTPException(exc.status, exc.message)


def subject(machine: str, proposal_id: str) -> str:
    """What a passkey assertion for a hub decision confirms: this machine's proposal."""
    return f"hub:{machine}:{proposal_id}"


def _mirrored_risk(request: Request) -> str | None:
    found = request.scope["state"]["hub"].proposal(request.path_params["machine"], request.path_params["proposal_id"])
    if found is None:
        raise FleetError("NOT_FOUND", f"machine {request.path_params['machine']} has pushed no proposal "
                                      f"{request.path_params['proposal_id']}")
    return found.get("risk")


async def passkey_options(request: Request) -> Response:
    """What deciding this hub proposal (`?action=reject`, else approve) needs: `{"required": false}`, or
    assertion options bound to it."""
    machine, proposal_id = request.path_params["machine"], request.path_params["proposal_id"]
    verdict = "reject" if request.query_params.get("action") == "reject" else "approve"
    try:
        risk = await run_in_threadpool(_mirrored_risk, request)
        return await step_up(request, own_index(request), subject(machine, proposal_id), decision_risk(verdict, risk))
    except FleetError as exc:
        return _refused(request, exc)


async def _decide(request: Request, verdict: str) -> Response:
    machine, proposal_id = request.path_params["machine"], request.path_params["proposal_id"]
    try:
        by = decision_actor(request)
        approver = approver_of(request)
        if approver is None:
            raise FleetError("NO_APPROVER", NO_APPROVER)
        fields = await _fields(request)
        reason = str(fields.get("reason") or "").strip() or None

        def confirm(row: dict) -> None:   # with the row `decide` read, before anything is signed
            if verdict == "approve":
                require_explicit(row, fields.get("confirm_high_risk") in CONFIRMED)
            passkey_confirm(request, subject(machine, proposal_id), decision_risk(verdict, row.get("risk")), by,
                            fields.get("passkey"), own_index(request))

        made = await run_in_threadpool(decide, request.scope["state"]["hub"].conns.dsn, machine, proposal_id,
                                       verdict, approver.name, approver.key, reason if verdict == "reject" else None,
                                       confirm, str(fields.get("seen") or ""))
    except FleetError as exc:
        return _refused(request, exc)
    if wants_json(request):
        return JSONResponse(made)
    url = request.app.url_path_for("proposal", machine=machine, proposal_id=proposal_id)
    return RedirectResponse(f"{url}?decided={verdict.rstrip('e')}ed", status_code=303)


async def approve(request: Request) -> Response:
    return await _decide(request, "approve")


async def reject(request: Request) -> Response:
    return await _decide(request, "reject")


def routes() -> list[Route]:
    base = "/machines/{machine}/proposals/{proposal_id}"
    return [Route(base + "/approve", approve, methods=["POST"], name="hub_proposal_approve"),
            Route(base + "/reject", reject, methods=["POST"], name="hub_proposal_reject"),
            Route("/api" + base + "/passkey", passkey_options, methods=["POST"], name="api_hub_proposal_passkey")]
