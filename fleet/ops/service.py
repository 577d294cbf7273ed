"""The write side's one entry point for every surface (MCP tools, CLI, dashboard): propose, decide, execute.

- `propose` validates and previews at once (nothing is stored with `dry_run`), applies the policy (deny,
  approve, auto), honours idempotency keys and the per-agent quota, and stores a pending proposal;
- `approve` / `reject` are a person's decisions; `cancel` is the proposing agent's own;
- `execute` claims an approved proposal (compare-and-set), re-validates everything the preview pinned,
  takes the restore point, runs the operation as the person would, records the result and refreshes the
  index. A proposal whose executor dies stays `executing` (interrupted) until `reconcile`: never re-run;
- `undo` turns a completed proposal's restore point into a `restore` proposal the person approves at once.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time

from fleet.agents.identity import PERSON, is_authenticated, quota_key
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops import anchor, gitexec, observe, proposals, repocode, restore
# Each op module binds its ops' preview and run to their classes in the catalog (OpSpec.bind).
from fleet.ops import cleanup, coreops, integrate, partsops, patchops, planop, remote, snapshotop  # noqa: F401
from fleet.ops import undo as undo_op
from fleet.ops.catalog import OPS, op_info, risk_of
from fleet.ops.landing import SERVE_URL, SERVE_WORKER, running_dashboard
from fleet.ops.model import MAX_ARGS_BYTES, MAX_PATCH_BYTES, Ctx, Plan
from fleet.ops.policy import Decision, Subject, evaluate, load_policy, policy_subjects, repo_label
from fleet.ops.pins import pin, revalidate
from fleet.procinfo import process_identity
from fleet.index.scan import refresh_repo
from fleet.index.target import resolve_target
from fleet.snapshot.take import take
from fleet.snapshot.timeline import work_tree_of
from fleet.presence.store import read_rows

log = logging.getLogger("fleetdeck.ops")

KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")     # whole key (fullmatch: `$` would let a final newline by)
MAX_REASON = 500
ACTIVE = ("pending", "approved", "executing")


def _check_reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise FleetError("BAD_ARGUMENT", "reason is required: say why, in 1..500 characters")
    if len(reason) > MAX_REASON:
        raise FleetError("BAD_ARGUMENT", f"reason is longer than {MAX_REASON} characters")
    if any(ord(c) < 32 and c not in "\n\t" for c in reason):
        raise FleetError("BAD_ARGUMENT", "reason contains control characters")
    return reason


def _check_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise FleetError("BAD_ARGUMENT", "idempotency_key must be 1..128 characters of A-Z a-z 0-9 _ -")
    return key


def _other_agents(index: Index, repo: str, agent: str, paths: list[str], session: str | None = None) -> list[dict]:
    """Every presence row in `repo` but the proposer's own session (its MCP session's row, else its agent's
    newest row: the call just made it so): another session of the same agent is another agent here."""
    touched = set(paths)
    out = []
    rows = read_rows(index, repo)
    mine = [r for r in rows if r["agent"] == agent]
    own = next((r for r in mine if session and r.get("session") == f"mcp:{session}"), None) or max(
        mine, key=lambda r: r["last_activity"] or "", default=None)
    for row in rows:
        if row is own:
            continue
        files = row.get("files") or []
        overlap = sorted(f for f in files if f in touched or any(f.startswith(p.rstrip("/") + "/") for p in touched))
        out.append({"agent": row["agent"], "state": row["state"], "overlapping_paths": overlap[:50]})
    return out


def approve_url(index: Index, proposal_id: str) -> str | None:
    """The proposal's page on the running dashboard (no secret in it), or None when no `serve` runs."""
    base = running_dashboard(index)
    return f"{base}/proposals/{proposal_id}" if base else None


def announce_dashboard(index: Index, base_url: str | None) -> None:
    """`serve` says where its dashboard is (the proposals' approve_url), tied to this process's life;
    None withdraws it."""
    index.set_meta_texts({SERVE_URL: base_url, SERVE_WORKER: None if base_url is None
                          else process_identity()})


def summary(index: Index, row: dict, replayed: bool = False) -> proposals.Proposal:
    """What an agent gets back for a proposal: its id, state, where a person approves it, what to call next."""
    url = approve_url(index, row["id"]) if row["status"] == "pending" else None
    if row["status"] == "pending":
        how = (f"a person approves it at {url}" if url else
               f"a person approves it with `fleetdeck proposals approve {row['id']}` (or on the dashboard)")
        next_action = {"tool": "operation.status", "args": {"proposal_id": row["id"]},
                       "message": f"Pending: {how}. Poll operation.status; never assume it ran."}
    elif row["status"] in ACTIVE:
        next_action = {"tool": "operation.status", "args": {"proposal_id": row["id"]},
                       "message": f"{row['status'].capitalize()}: poll operation.status for the result."}
    else:
        next_action = None
    out = {"proposal_id": row["id"], "status": row["status"], "op": row["op"], "repo": row["repo"],
           "risk": row["risk"], "approve_url": url, "next_action": next_action, "preview": public_preview(row),
           "expires_at": row["expires_at"], "policy": row.get("policy"), "result": row.get("result"),
           "error": row.get("error"), "restore_point": row.get("restore_point")}
    if replayed:
        out["replayed"] = True
    return out


def public_preview(row: dict) -> dict | None:
    preview = row.get("preview")
    return {k: v for k, v in preview.items() if not k.startswith("_")} if preview else None


def list_public(index: Index, status: str | None = None, repo: str | None = None, limit: int = 200) -> dict:
    """`proposals.list_proposals` with each preview as the person is shown it (`public_preview`): the CLI's
    list and a repository page's waiting proposals."""
    found = proposals.list_proposals(index, status, repo=repo, limit=limit)
    for row in found["proposals"]:
        row["preview"] = public_preview(row)
    return found


def show(index: Index, proposal_id: str) -> proposals.ProposalRow:
    """A proposal as every surface shows it (internal plan and pins left out), each repository it names
    with its fleet-relative label (`repo_label`)."""
    row = proposals.get(index, proposal_id)
    row["preview"] = public_preview(row)
    row["repo_label"] = repo_label(index, row["repo"])
    for item in [*(row["preview"] or {}).get("targets", []), *(row["preview"] or {}).get("recreate", [])]:
        if isinstance(item, dict) and isinstance(item.get("repo"), str):
            item["repo_label"] = repo_label(index, item["repo"])
    return row


# --- proposing -------------------------------------------------------------------------------------------

def propose(index: Index, agent: str, op: str, repo: str, args: dict, reason: str, *, dry_run: bool = False,
            idempotency_key: str | None = None, by_person: bool = False, declared: str | None = None,
            session: str | None = None) -> proposals.Proposal:
    """Validate, preview and (unless dry_run) store a proposal; run it at once when the policy says auto.

    `agent` is the caller's identity (fleet/agents/identity.py: a credential's name or `unknown:<declared>`);
    `declared` is the name the client gave itself and `session` its MCP session (an unauthenticated client
    may cancel only what its own session proposed; None: it cannot cancel)."""
    info = op_info(op)
    reason = _check_reason(reason)
    key = _check_key(idempotency_key)
    if not isinstance(args, dict):
        raise FleetError("BAD_ARGUMENT", "args must be an object")
    size = len(proposals.stored_json(args))
    if size > MAX_ARGS_BYTES:
        raise FleetError("LIMIT", f"the arguments are {size} bytes as stored; a proposal carries at most "
                                  f"{MAX_ARGS_BYTES} (a patch at most {MAX_PATCH_BYTES})")
    policy = load_policy()  # POLICY_INVALID refuses every write, whatever else is wrong
    found = resolve_target(index, repo)
    request = {"repo": found.path, "args": args}
    if key is not None and not dry_run:
        existing = proposals.made_by_key(index, agent, op, key, proposals.fingerprint(request))
        if existing is not None:
            return summary(index, proposals.get(index, existing), replayed=True)
    ctx = Ctx(found.path, agent, index)
    plan: Plan = info.preview(ctx, args)
    risk = risk_of(op, plan.args, plan.preview)
    code = repocode.inventory(found.path)
    subjects = policy_subjects(index, op, found.path, plan, risk)
    if by_person:
        decision = Decision("approve", None, "the person's own request")
    else:
        decision = _without_repo_code(evaluate(policy, agent, subjects, plan.deferred), op, plan.args, code)
    preview = {"op": op, "risk": risk, "destructive": info.destructive, "undoable": info.undoable,
               **plan.preview, "other_agents": _other_agents(index, found.path, agent, plan.policy_paths, session),
               "repo_code": code, "policy": decision.as_dict()}
    if decision.action == "deny":
        raise FleetError("POLICY_DENIED", f"the policy refuses this {op}: {decision.why}")
    if dry_run:
        return {"status": "dry_run", "op": op, "repo": found.path, "risk": risk, "preview": preview,
                "proposal_id": None, "approve_url": None, "next_action": None, "expires_at": None}
    preview["_plan"] = {"args": plan.args, "refs": plan.refs, "moves": plan.moves, "paths": plan.paths,
                        "untracked_content": plan.untracked_content, "undo": plan.undo,
                        "policy": {"subjects": [x.as_dict() for x in subjects], "deferred": plan.deferred},
                        "writes": plan.writes}
    preview["_pins"] = {**pin(found.path, plan.refs, plan.paths, plan.pin_index, plan.pin_head),
                        "anchor": anchor.identity(found.path), "repo_code": repocode.digest(code)}
    now = time.time()
    row = {"id": proposals.new_id(), "op": op, "repo": found.path, "agent": agent, "agent_declared": declared,
           "agent_authenticated": int(is_authenticated(agent)), "agent_session": session,
           "identity": quota_key(agent), "reason": reason,
           "args": args, "args_fingerprint": proposals.fingerprint(request), "idempotency_key": key,
           "preview": preview, "risk": risk, "status": "pending", "policy": decision.as_dict(),
           "created_at": now, "expires_at": now + policy.expiry_seconds}
    stored, replayed = proposals.insert(index, row, policy.max_pending)
    if decision.action == "auto" and not replayed:
        approve(index, stored["id"], "policy")
        stored = proposals.get(index, stored["id"])
    return summary(index, stored, replayed)


def _without_repo_code(decision: Decision, op: str, args: dict, code: list[dict]) -> Decision:
    """An `auto` decision stays auto only when the op can run without the repository's code and still do
    what the preview shows (fleet/ops/repocode.py says which code that is)."""
    blockers = repocode.auto_blockers(op, args, code) if decision.action == "auto" else []
    if not blockers:
        return decision
    return Decision("approve", decision.rule, f"{decision.why}; but this repository defines "
                                              f"{repocode.describe(blockers)}, which git would run: a person "
                                              "approves it")


def _policy_now(row: dict) -> str | None:
    """Why the policy as it is now refuses to run this proposal (a deny added since, or an `auto` that no
    longer holds), or None. The same evaluate() as at proposal time, over the subjects stored then."""
    stored = row["preview"]["_plan"].get("policy")
    if row["agent"] == PERSON or stored is None:
        return None
    decision = evaluate(load_policy(), row["agent"], [Subject.from_dict(x) for x in stored["subjects"]],
                        stored.get("deferred"))
    if decision.action == "deny":
        return f"POLICY_DENIED: the policy now refuses this {row['op']}: {decision.why}"
    if row.get("decided_by") == "policy" and decision.action != "auto":
        return f"POLICY_DENIED: the policy no longer runs this {row['op']} without a person: {decision.why}"
    return None


# --- deciding ----------------------------------------------------------------------------------------------

def approve(index: Index, proposal_id: str, by: str, *, run: bool = True) -> dict:
    """A person (or an `auto` policy rule) approves: pending -> approved, then executed here and now."""
    if by not in proposals.DECIDERS and not by.startswith(proposals.HUB_DECIDER):
        raise FleetError("BAD_ARGUMENT", f"decided_by must be one of {', '.join(proposals.DECIDERS)}")
    proposals.transition(index, proposal_id, ("pending",), "approved", decided_at=time.time(), decided_by=by,
                         worker_start=process_identity())
    return execute(index, proposal_id) if run else show(index, proposal_id)


def reject(index: Index, proposal_id: str, by: str, reason: str) -> dict:
    reason = _check_reason(reason)
    proposals.transition(index, proposal_id, ("pending",), "rejected", decided_at=time.time(), decided_by=by,
                         decision_reason=reason, finished_at=time.time())
    return show(index, proposal_id)


def cancel(index: Index, proposal_id: str, agent: str, session: str | None = None) -> proposals.Proposal:
    """The proposing agent withdraws its own pending proposal: the same authenticated identity, or for an
    unauthenticated client the same MCP session too (anyone else's is NOT_FOUND to it)."""
    row = proposals.get(index, proposal_id)
    mine = row["agent"] == agent and (is_authenticated(agent) or (session is not None
                                                                  and proposals.same_session(index, row, session)))
    if not mine:
        why = ("" if is_authenticated(agent) else " in this MCP session" if session is not None else
               " that this client can cancel: without an agent credential (`fleetdeck agents add`) only a "
               "session fleetdeck can tell apart (stdio) cancels its own")
        raise FleetError("NOT_FOUND", f"no proposal {proposal_id} from agent {agent!r}{why}")
    proposals.transition(index, proposal_id, ("pending",), "cancelled", decided_at=time.time(),
                         decided_by="agent", finished_at=time.time())
    return summary(index, proposals.get(index, proposal_id))


def reconcile(index: Index, proposal_id: str, as_status: str, by: str) -> dict:
    """A person settles an interrupted proposal (its executor died while running): never re-run."""
    if as_status not in ("failed", "completed"):
        raise FleetError("BAD_ARGUMENT", "reconcile --as takes failed or completed")
    row = proposals.get(index, proposal_id)
    if row["status"] != "executing":
        raise FleetError("NOT_PENDING", f"proposal {proposal_id} is {row['status']}, not executing")
    if not row["interrupted"]:
        raise FleetError("NOT_PENDING", f"proposal {proposal_id} is still running (its executor is alive)")
    proposals.transition(index, proposal_id, ("executing",), as_status, decision=True, finished_at=time.time(),
                         error=(row.get("error") or f"interrupted; reconciled as {as_status} by {by}"))
    return show(index, proposal_id)


# --- executing ----------------------------------------------------------------------------------------------

def execute(index: Index, proposal_id: str) -> dict:
    """Run one approved proposal: claim, re-validate, restore point, run, record, refresh the index."""
    row = proposals.transition(index, proposal_id, ("approved",), "executing", started_at=time.time(),
                               worker_start=process_identity())
    internal = row["preview"]
    plan, pins, repo = internal["_plan"], internal["_pins"], row["repo"]
    ctx = Ctx(repo, row["agent"], index, proposal_id)
    neutral = row.get("decided_by") == "policy"     # no person: the repository's code does not run
    with (gitexec.neutralized() if neutral else contextlib.nullcontext()):
        return _execute(index, row, ctx, plan, pins, neutral)


def _execute(index: Index, row: dict, ctx: Ctx, plan: dict, pins: dict, neutral: bool) -> dict:
    proposal_id, repo = row["id"], row["repo"]
    try:
        anchor.check(index, repo, pins.get("anchor"), plan["paths"])
        if pins.get("repo_code") != repocode.digest(repocode.inventory(repo)):
            raise FleetError("STALE", "the code this repository defines (hooks, filters, drivers, programs) "
                                      "changed since the preview")
        revalidate(repo, pins)
        refused = _policy_now(row)
    except FleetError as exc:
        return _finish(index, proposal_id, "failed", error=f"{exc.code}: {exc.message}",
                       result={"touched": False})
    if refused:
        return _finish(index, proposal_id, "failed", error=refused, result={"touched": False})
    try:
        restore.take(index, repo, proposal_id, plan["moves"], plan["untracked_content"], plan["undo"],
                     plan.get("writes", []))
    except FleetError as exc:
        return _finish(index, proposal_id, "failed", error=f"{exc.code}: restore point not taken, nothing "
                                                           f"ran: {exc.message}", result={"touched": False})
    _set(index, proposal_id, restore_point=proposal_id)
    _safety_net_snapshot(index, repo, proposal_id)
    seen = observe.before(repo)
    try:
        result = OPS[row["op"]].run(ctx, plan["args"])
        status, error = "completed", None
    except FleetError as exc:
        result = {"touched": True, "stderr": exc.details.get("stderr", "")[-2000:],
                  "stdout": exc.details.get("stdout", "")[-2000:], **exc.details.get("partial", {})}
        status, error = "failed", f"{exc.code}: {exc.message}"
    if isinstance(result, dict):
        result.update(observe.report(repo, seen, public_preview(row) or {}, neutral))
    undo_steps = result.pop("undo", {}) if isinstance(result, dict) else {}
    try:
        restore.record_after(index, proposal_id, pin(repo, [*plan["refs"], *plan["moves"]], None), undo_steps)
    except FleetError as exc:
        log.warning("state after %s not recorded: %s", proposal_id, exc.message)
    return _finish(index, proposal_id, status, error=error, result=result)


def _safety_net_snapshot(index: Index, repo: str, proposal_id: str) -> None:
    """The restore point as a safety-net snapshot too (trigger `proposal:<id>`: one store, one timeline), best
    effort: a snapshot that cannot be taken (snapshots off, a bare repository) never blocks the op."""
    try:
        found = resolve_target(index, repo)
        if not found.bare:
            take(work_tree_of(found), index.path, f"proposal:{proposal_id}")
    except (FleetError, OSError) as exc:
        log.warning("no snapshot before %s: %s", proposal_id, getattr(exc, "message", exc))


def _set(index: Index, proposal_id: str, **fields: object) -> None:
    with index.write():
        index.proposals.set(proposal_id, fields)


def _finish(index: Index, proposal_id: str, status: str, *, error: str | None, result: dict) -> dict:
    proposals.transition(index, proposal_id, ("executing",), status, finished_at=time.time(), error=error,
                         result=result)
    row = proposals.get(index, proposal_id)
    if status == "completed" and row["op"] == "restore":
        _undone_by(index, row)
    try:
        refresh_repo(index, row["repo"])
    except Exception as exc:  # the index catches up on its next sweep; the proposal's outcome stands
        log.warning("index not refreshed after %s: %s", proposal_id, exc)
    return show(index, proposal_id)


def _undone_by(index: Index, restore_row: dict) -> None:
    """A completed `restore` makes the proposal it went back from `undone` (who undid it, when, and in
    `result` what is there now, the old result kept under `before_undo`); when what it undid was itself a
    restore, the proposal that one had undone is back in its state from before."""
    target_id = (restore_row.get("args") or {}).get("restore_point")
    try:
        target = proposals.get(index, target_id)
    except FleetError:  # a restore point that belongs to no proposal
        return
    if target["status"] in ("completed", "failed"):
        now = {k: v for k, v in (restore_row.get("result") or {}).items() if k != "restored"}
        proposals.transition(index, target_id, ("completed", "failed"), "undone", undone_by=restore_row["id"],
                             undone_at=time.time(),
                             result={**now, "undone_by": restore_row["id"],
                                     "before_undo": {"status": target["status"], "result": target["result"]}})
    if target["op"] != "restore":
        return
    try:
        earlier = proposals.get(index, (target.get("args") or {}).get("restore_point"))
    except FleetError:
        return
    before = (earlier.get("result") or {}).get("before_undo")
    if earlier["status"] == "undone" and earlier.get("undone_by") == target_id and before:
        proposals.transition(index, earlier["id"], ("undone",), before["status"], undone_by=None, undone_at=None,
                             result=before["result"])


def resume_orphans(index: Index) -> list[dict]:
    """Approved proposals whose approver died before starting them: claimed and run (after re-validation)."""
    done = []
    for proposal_id in proposals.orphaned_approved(index):
        try:
            done.append(execute(index, proposal_id))
        except FleetError as exc:  # another executor claimed it first
            log.debug("orphan %s not claimed: %s", proposal_id, exc.message)
    return done


def sweep(index: Index) -> int:
    """Prune proposals that ended longer ago than the policy's `keep_decided_days` (serve runs this at start
    and then hourly); a policy that cannot be read prunes nothing. Returns how many went."""
    try:
        policy = load_policy()
    except FleetError as exc:
        log.warning("proposals not pruned: %s", exc.message)
        return 0
    return proposals.prune_decided(index, policy.keep_decided_seconds)


def undo(index: Index, proposal_id: str, by: str) -> dict:
    """The person undoes a completed proposal: a `restore` proposal, approved by them and run at once."""
    row = proposals.get(index, proposal_id)
    undo_op.undoable(row)
    made = propose(index, PERSON, "restore", row["repo"], {"restore_point": row["restore_point"]},
                   f"undo {proposal_id} ({row['op']})", by_person=True)
    return approve(index, made["proposal_id"], by)


def wait(index: Index, proposal_id: str, timeout: float, poll: float = 0.2) -> dict:
    """Block until the proposal leaves pending/approved/executing (or is interrupted), or the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        row = show(index, proposal_id)
        if row["status"] not in ACTIVE or row["interrupted"] or time.monotonic() >= deadline:
            return row
        time.sleep(poll)
