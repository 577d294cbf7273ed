"""Passkeys on the dashboard: the page that lists and registers them, and the assertion options a decision
asks for (fleet/ops/passkeys.py holds the rules). Registering needs the decision credential (the person's
tab), so neither the MCP bearer token nor a cookie another local port received can add a passkey.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops import passkeys
from fleet.ops.confirm import decision_risk
from web.errors import json_error
from web.guards import decision_actor, own_origin
from web.security import host_name
from web.state import index

REGISTER = "register"


def rp_id(request: Request) -> str:
    return passkeys.rp_id_for(host_name(request.headers.get("host", "")))


def approve_challenge(proposal_id: str) -> str:
    return f"approve:{proposal_id}"


def _session(request: Request):
    """The person's tab (its session, with the decision key checked), or FleetError."""
    if decision_actor(request) != "dashboard":
        raise FleetError("DECISION_KEY_REQUIRED", "passkeys are managed from the person's dashboard tab only")
    return request.user.session


def _json_error(exc: FleetError) -> Response:
    """A ceremony's refusal is a 403 whatever its code (an unknown proposal too), a malformed request a 400."""
    return json_error(exc.code, exc.message, 403 if exc.code != "BAD_ARGUMENT" else 400)


def page(request: Request) -> Response:
    from web.pages import render  # web.pages imports the proposals adapter; imported late, no cycle

    try:
        rp, problem, mode = rp_id(request), None, passkeys.mode()
    except FleetError as exc:  # on an IP address, or a settings file with a wrong `require`
        rp, problem, mode = None, exc.message, "high"
    return render(request, "passkeys.html", {"passkeys": passkeys.registered(index(request)), "rp_id": rp,
                                             "problem": problem, "mode": mode})


async def register_options(request: Request) -> Response:
    try:
        session = _session(request)
        options, challenge = await run_in_threadpool(passkeys.registration_options, index(request), rp_id(request))
    except FleetError as exc:
        return _json_error(exc)
    session.challenges[REGISTER] = challenge
    return Response(options, media_type="application/json")


async def register(request: Request) -> Response:
    try:
        session = _session(request)
        body = await request.json()
        credential, name = body.get("credential"), str(body.get("name") or "passkey")
        done = await run_in_threadpool(passkeys.register, index(request), credential,
                                       session.challenges.pop(REGISTER, None), own_origin(request.scope),
                                       rp_id(request), name)
    except FleetError as exc:
        return _json_error(exc)
    except ValueError:
        return _json_error(FleetError("BAD_ARGUMENT", "the body is not JSON"))
    return JSONResponse(done)


async def step_up(request: Request, idx: Index, subject: str, risk: str | None) -> Response:
    """What a decision on `subject` (a proposal's id, a restore) of this risk needs, by the passkeys of `idx`:
    `{"required": false}`, or assertion options bound to `subject`, whose challenge the tab's session keeps for
    `confirm`. FleetError when the request is not the person's tab."""
    session = _session(request)
    if not await run_in_threadpool(passkeys.required, idx, risk):
        return JSONResponse({"required": False})
    options, challenge = await run_in_threadpool(passkeys.assertion_options, idx, rp_id(request), subject)
    session.challenges[approve_challenge(subject)] = challenge
    return Response('{"required": true, "options": ' + options + "}", media_type="application/json")


async def decision_options(request: Request) -> Response:
    """What deciding this proposal (`?action=reject`, else approve) needs: `{"required": false}`, or the
    assertion options to sign."""
    from fleet.ops import service

    proposal_id = request.path_params["proposal_id"]
    try:
        _session(request)
        row = await run_in_threadpool(service.show, index(request), proposal_id)
        decision = "reject" if request.query_params.get("action") == "reject" else "approve"
        return await step_up(request, index(request), proposal_id, decision_risk(decision, row["risk"]))
    except FleetError as exc:
        return _json_error(exc)


def confirm(request: Request, subject: str, risk: str | None, by: str, credential: object,
            idx: Index | None = None) -> None:
    """The passkey check of one decision on `subject` (in a worker thread) by the passkeys of `idx` (this
    dashboard's index; the hub's dashboard passes the serving machine's own): nothing when none is required;
    otherwise only the person's tab with a fresh assertion for this subject passes."""
    idx = index(request) if idx is None else idx
    if not passkeys.required(idx, risk):
        return
    session = getattr(request.user, "session", None)
    if by != "dashboard" or session is None:
        raise FleetError("PASSKEY_REQUIRED", "this decision needs your passkey: make it on the dashboard")
    challenge = session.challenges.pop(approve_challenge(subject), None)
    passkeys.confirm(idx, credential, challenge, own_origin(request.scope), rp_id(request))


def routes() -> list[Route]:
    return [
        Route("/passkeys", page, name="passkeys"),
        Route("/api/passkeys/options", register_options, methods=["POST"], name="api_passkey_options"),
        Route("/api/passkeys", register, methods=["POST"], name="api_passkey_register"),
        Route("/api/proposals/{proposal_id}/passkey", decision_options, methods=["POST"],
              name="api_proposal_passkey"),
    ]
