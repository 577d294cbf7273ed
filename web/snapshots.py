"""The safety net on the dashboard: a snapshot's page (its diff against its neighbour or the working tree now,
with "Restore this file" / "Restore all"), the diff as text, the confirmation that names the newer changes a
restore would overwrite, and the restore itself (the Timeline on the repo page is web/pages.py's context).

Restoring is a person's act, decided exactly like approving a proposal of the `restore_snapshot` op's risk:
the same decider (`web.guards.decision_actor`: the person's tab with its decision key, behind the guards'
Origin and CSRF checks, or the person's approver token; never the MCP bearer token), the same passkey rule
(web/passkeys.py: a challenge bound to this one restore), the same form macro and script. The logic is
fleet/snapshot/ (view, restore).
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from fleet.errors import FleetError
from fleet.ops.catalog import op_info
from fleet.repo.scope import check_rel_path
from fleet.snapshot.restore import restore_by_person
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.view import restore_plan, shown, snapshot_diff, tree_of
from web import proposals
from web.errors import error_response, wants_json
from web.guards import decision_actor
from web.passkeys import confirm as passkey_confirm, step_up
from web.pages import render, repo_id
from web.state import index


def _repo(request: Request) -> tuple[dict, WorkTree]:
    """The repository of the path and its working tree; 404 when there is no such repository or it is bare."""
    row = index(request).repo(repo_id(request))
    if row is None or row.get("gone"):
        raise HTTPException(404, f"no repository with id {request.path_params['repo_id']} in the index")
    tree = tree_of(row)
    if tree is None:
        raise HTTPException(404, f"{row['name']} is a bare repository: it has no working tree to snapshot")
    return row, tree


def _path(request: Request, fields: dict | None = None) -> str | None:
    value = (fields if fields is not None else request.query_params).get("path") or None
    return check_rel_path(value.rstrip("/") if isinstance(value, str) else value, "path") if value else None


async def snapshot_page(request: Request) -> Response:
    """One snapshot: its diff against its older neighbour (default) or the working tree now."""
    try:
        repo, tree = _repo(request)
        against = request.query_params.get("against") or None
        data = await run_in_threadpool(snapshot_diff, tree, str(index(request).path),
                                       request.path_params["snapshot"], against, _path(request))
    except FleetError as exc:
        return error_response(request, exc)
    return render(request, "snapshot.html", {"repo": repo, "s": {**data, "diff": shown(data["diff"])}})


async def snapshot_diff_text(request: Request) -> Response:
    """The same diff as text/plain, every control, bidi and zero-width character written as an escape."""
    try:
        _, tree = _repo(request)
        data = await run_in_threadpool(snapshot_diff, tree, str(index(request).path),
                                       request.path_params["snapshot"],
                                       request.query_params.get("against") or None, _path(request))
    except FleetError as exc:
        return error_response(request, exc)
    return PlainTextResponse(shown(data["diff"]))


async def restore_confirm(request: Request) -> Response:
    """Before a restore: what it would overwrite, recreate and remove now (a dry run), and the form."""
    try:
        repo, tree = _repo(request)
        plan = await run_in_threadpool(restore_plan, tree, str(index(request).path),
                                       request.path_params["snapshot"], _path(request))
    except FleetError as exc:
        return error_response(request, exc)
    return render(request, "snapshot_restore.html", {"repo": repo, "plan": {**plan, "diff": shown(plan["diff"])}})


RISK = op_info("restore_snapshot").risk


def _subject(request: Request) -> str:
    """What a passkey assertion for a restore confirms: this repository and this snapshot (as the form names it)."""
    return f"restore-snapshot:{repo_id(request)}:{request.path_params['snapshot']}"


async def restore_passkey(request: Request) -> Response:
    """What restoring needs: `{"required": false}`, or assertion options bound to this restore (the same rule
    as approving a proposal of this risk)."""
    try:
        return await step_up(request, index(request), _subject(request), RISK)
    except FleetError as exc:
        return error_response(request, exc)


async def restore_now(request: Request) -> Response:
    """The person restores the snapshot (one path or all): fleet.snapshot.restore.restore, which snapshots the
    present first."""
    try:
        by = decision_actor(request)
        repo, tree = _repo(request)
        fields = await proposals._fields(request)
        await run_in_threadpool(passkey_confirm, request, _subject(request), RISK, by, fields.get("passkey"))
        path = _path(request, fields)
        done = await run_in_threadpool(lambda: restore_by_person(tree, str(index(request).path),
                                                                 request.path_params["snapshot"], by=by,
                                                                 paths=[path] if path else [],
                                                                 expect=fields.get("expect") or None))
    except FleetError as exc:
        return error_response(request, exc)
    if wants_json(request):
        return JSONResponse(done)
    url = request.app.url_path_for("repo", repo_id=repo["id"])
    return RedirectResponse(f"{url}?restored={done['snapshot'][:12]}&before={done['snapshot_before'][:12]}"
                            "#snapshots", status_code=303)


def routes() -> list[Route]:
    base = "/repos/{repo_id:int}/snapshots/{snapshot}"
    return [
        Route(base, snapshot_page, name="snapshot"),
        Route(base + "/diff", snapshot_diff_text, name="snapshot_diff_text"),
        Route(base + "/restore", restore_confirm, name="snapshot_restore_confirm"),
        Route(base + "/restore", restore_now, methods=["POST"], name="snapshot_restore"),
        Route("/api" + base + "/restore", restore_now, methods=["POST"], name="api_snapshot_restore"),
        Route("/api" + base + "/passkey", restore_passkey, methods=["POST"], name="api_snapshot_passkey"),
    ]
