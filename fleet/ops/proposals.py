"""Proposals in the index: rows, and the lifecycle moves between their states.

    pending -> approved -> executing -> completed | failed
    pending -> rejected (a person) | cancelled (the proposing agent) | expired (time)
    completed | failed -> undone (a later `restore` of its restore point completed; back again when that
                          restore is itself undone)

Every move is a compare-and-set (`UPDATE ... WHERE status IN (...)` inside BEGIN IMMEDIATE), so two
processes (the CLI and `serve`) racing to approve or execute one proposal cannot both win. A proposal left
`executing` by a process that died is never re-run: it shows as `interrupted` until a person reconciles it.

Reads take no write lock (a dashboard polls them): what is due to expire is expired first by one sweep, a
write transaction taken only when a read-only look finds something due (`expire`); every move expires what
is due inside its own transaction too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import secrets
import time
from typing import Iterator, NotRequired, TypedDict

from fleet import audit
from fleet.agents.identity import UNKNOWN
from fleet.audit.config import resolve as audit_config, unavailable
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops.model import MAX_PENDING_BYTES
from fleet.procinfo import worker_alive
from fleet.timespec import iso

STATES = ("pending", "approved", "executing", "completed", "failed", "rejected", "cancelled", "expired", "undone")
TERMINAL = ("completed", "failed", "rejected", "cancelled", "expired", "undone")
JSON_FIELDS = ("args", "preview", "result", "policy")
DECISIONS = ("approved", "rejected")  # the states a person (or the policy, for `auto`) puts a proposal in
logger = logging.getLogger("fleetdeck.ops")
TIME_FIELDS = ("created_at", "expires_at", "decided_at", "started_at", "finished_at", "undone_at")
DECIDERS = ("dashboard", "cli", "policy", "api")
HUB_DECIDER = "hub:"  # + the approver's name: a person's decision made on the team hub (fleet/team/decisions.py)
# The states fleetdeck's executor puts an approved proposal in: the audit credits them to it, not the agent.
RUN_BY_SERVER = ("executing", "completed", "failed", "undone")
SERVER = "fleetdeck"
# decisions and the claim that starts an execution: refused when the audit log cannot record them
AUDITED_FIRST = ("approved", "rejected", "cancelled", "executing")


# The answers every surface gives about proposals (the MCP tools' models are derived from them in
# mcp_bridge/tools_ops.py; no docstrings: their schemas have no description). Listed: the contract; the
# answers carry more (a summary's policy, result, error, restore point; a row's args, policy, reason for
# a decision, repo_label, ...).

class Proposal(TypedDict):
    proposal_id: str | None
    status: str
    op: str
    repo: str
    risk: str
    approve_url: str | None
    next_action: dict | None
    preview: dict | None
    expires_at: str | None


class ProposalRow(TypedDict):
    id: str
    op: str
    repo: str
    agent: str
    agent_declared: str | None
    agent_authenticated: bool
    reason: str
    status: str
    risk: str | None
    preview: dict | None
    result: dict | None
    error: str | None
    restore_point: str | None
    interrupted: bool
    created_at: str | None
    expires_at: str | None
    decided_at: str | None
    decided_by: str | None
    finished_at: str | None
    undone_by: NotRequired[str | None]
    undone_at: NotRequired[str | None]


def new_id() -> str:
    return "p-" + secrets.token_hex(6)


def fingerprint(value: object) -> str:
    """sha256 of canonical JSON: how a retried idempotency key is checked against the first call's args."""
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def expire_due(index: Index, now: float | None = None) -> list[dict]:
    """Pending proposals past their expiry become `expired`; so do approved ones whose approver died.

    Returns the rows this call moved (RETURNING, inside the caller's write transaction): the compare-and-set
    hands each expiry to exactly one caller, in whichever process, and that caller writes its audit entry
    once the transaction commits (`expire`, `_expiring`).
    """
    now = time.time() if now is None else now
    rows = index.proposals
    moved = rows.expire_pending(now)
    for pid, status, worker in rows.due(now):
        if status == "approved" and not worker_alive(worker):
            moved += rows.expire_approved(pid, now)
    return [decode(row) for row in moved]


def _due(index: Index, now: float) -> bool:
    """Whether `expire_due` would move anything now, asked without a write lock."""
    return any(status == "pending" or not worker_alive(worker) for _, status, worker in index.proposals.due(now))


def expire(index: Index) -> list[dict]:
    """The expiry sweep: one write transaction, taken only when something is due; each expiry's audit entry
    follows its commit. Returns the rows this call moved."""
    if not _due(index, time.time()):
        return []
    with index.write():
        expired = expire_due(index)
    for row in expired:
        audit_state(index, row)
    return expired


@contextlib.contextmanager
def _expiring(index: Index) -> Iterator[None]:
    """A write transaction that first expires what is due; the expiries' audit entries follow its commit
    (none when the block fails and the transaction, expiries included, rolls back)."""
    with index.write():
        expired = expire_due(index)
        yield
    for row in expired:
        audit_state(index, row)


@contextlib.contextmanager
def _reading(index: Index) -> Iterator[None]:
    """A read of proposals: what is due expired first (`expire`), then one read transaction (a consistent
    view across its statements, no write lock)."""
    expire(index)
    with index.read():
        yield


def insert(index: Index, row: dict, max_pending: int) -> tuple[dict, bool]:
    """Store a new proposal, or return the one an idempotency key already made. Returns (row, replayed).

    Over `max_pending` pending proposals from this agent: LIMIT. The same key with other arguments:
    BAD_ARGUMENT (a retry must be the same request).
    """
    with _expiring(index):
        key = row.get("idempotency_key")
        if key is not None:
            found = made_by_key(index, row["agent"], row["op"], key, row["args_fingerprint"])
            if found is not None:
                return _read(index, found), True
        pending, held = index.proposals.pending_of(row["identity"])
        if row["status"] == "pending" and pending >= max_pending:
            who = (f"agent {row['agent']!r}" if row["identity"] != UNKNOWN else
                   "the unauthenticated clients (all of them together, whatever names they declare)")
            raise FleetError("LIMIT", f"{who} already {'has' if row['identity'] != UNKNOWN else 'have'} "
                                      f"{pending} pending proposals (the most allowed is {max_pending}); wait "
                                      "for decisions or cancel some"
                                      + ("" if row["identity"] != UNKNOWN else
                                         "; an agent credential (`fleetdeck agents add`) gives a quota of its own"))
        stored = {k: (stored_json(v) if k in JSON_FIELDS and v is not None else v) for k, v in row.items()}
        if row["status"] == "pending":
            _check_pending_bytes(row["identity"], held, len(stored.get("args") or "")
                                 + len(stored.get("preview") or ""))
        index.proposals.insert(stored)
        made = _read(index, row["id"])
    audit_state(index, made)
    return made, False


def made_by_key(index: Index, agent: str, op: str, key: str, args_fingerprint: str) -> str | None:
    """The id of the proposal idempotency key `key` already made for `agent`'s `op` (None: none yet);
    BAD_ARGUMENT when it was made with other arguments (a retry must be the same request)."""
    found = index.proposals.by_key(agent, op, key)
    if found is not None and found[1] != args_fingerprint:
        raise FleetError("BAD_ARGUMENT", f"idempotency_key {key!r} was used for a different {op} request "
                                         f"(proposal {found[0]})")
    return None if found is None else found[0]


def stored_json(value: object) -> str:
    """A JSON field as the index stores it (ASCII: its length is its size in bytes)."""
    return json.dumps(value, sort_keys=True, default=str)


def _check_pending_bytes(identity: str, held: int, size: int) -> None:
    """LIMIT when this proposal would take what `identity` (the quota key: every unauthenticated client
    shares `unknown`) has pending (`held` bytes) past MAX_PENDING_BYTES."""
    if held + size > MAX_PENDING_BYTES:
        raise FleetError("LIMIT", f"agent {identity!r} has {held} bytes of proposals pending and this one holds "
                                  f"{size}: the most allowed is {MAX_PENDING_BYTES}; wait for decisions or "
                                  "cancel some")


def prune_decided(index: Index, older_than_s: float, now: float | None = None) -> int:
    """Delete the proposals that ended (TERMINAL) more than `older_than_s` ago, except those whose restore
    point is kept (undoing them needs the row); their audit entries stay. Returns how many went."""
    cutoff = (time.time() if now is None else now) - older_than_s
    with index.write():
        gone = index.proposals.prune(TERMINAL, cutoff)
    if gone:
        audit.record("proposals.pruned", actor="fleetdeck", summary=f"{gone} proposals that ended more than "
                     f"{older_than_s / 86400:g} days ago removed from the index (their entries stay here)")
    return gone


def audit_state(index: Index, row: dict, required: bool = False) -> None:
    """One audit entry for each state a proposal enters: who asked, who decided (a person or the policy),
    what came of it. `required` (a decision, an execution): AUDIT_UNAVAILABLE when the entry cannot be
    written, inside the move's transaction, so the move does not happen; otherwise best-effort (a result
    or an expiry that already happened is never undone by a log that cannot be written)."""
    try:
        log = audit.setup(index.path)
    except FleetError as exc:  # the process's entry point refuses a bad key; here the move already happened
        config = audit_config(index.path) if required else None
        if config is not None and not config.allow_degraded_writes:
            raise unavailable(config.dir, exc.message) from None
        logger.error("audit entry for proposal %s not written: %s", row["id"], exc.message)
        return
    status = row["status"]
    decided = status in DECISIONS
    ran = status in RUN_BY_SERVER and row.get("decided_by") not in (None, "agent")
    actor = ((row.get("decided_by") or "policy") if decided else "expiry" if status == "expired"
             else SERVER if ran else None)
    how = {"expiry": " (its time ran out)", SERVER: f" (run by fleetdeck: {row.get('decided_by')} approved it)"}
    append = log.require if required else log.record
    append(f"proposal.{status}", op=row["op"], agent=row["agent"], agent_declared=row.get("agent_declared"),
           repo_path=row["repo"], args=row.get("args"),
           risk=row.get("risk"), proposal_id=row["id"], actor=actor,
           decision=status if decided else None, result="failed" if status == "failed" else "ok",
           summary=f"{row['op']} proposal {status}" + how.get(actor or "", ""))


def get(index: Index, proposal_id: str) -> ProposalRow:
    if not isinstance(proposal_id, str) or not proposal_id:
        raise FleetError("BAD_ARGUMENT", "proposal_id must be a non-empty string")
    with _reading(index):  # expiry is applied before anyone reads a status
        return _read(index, proposal_id)


def _read(index: Index, proposal_id: str) -> dict:
    found = index.proposals.get(proposal_id)
    if found is None:
        raise FleetError("NOT_FOUND", f"no proposal {proposal_id[:80]!r}")
    return decode(found)


def decode(row: dict) -> ProposalRow:
    """A stored row as the surfaces show it: JSON parsed, ISO times, and `interrupted` for a dead executor."""
    out = dict(row)
    for key in JSON_FIELDS:
        if out.get(key) is not None:
            out[key] = json.loads(out[key])
    for key in TIME_FIELDS:
        out[key] = iso(out[key]) if out.get(key) is not None else None
    out["interrupted"] = out["status"] == "executing" and not worker_alive(out.get("worker_start"))
    out["agent_authenticated"] = bool(out.get("agent_authenticated"))
    out.pop("args_fingerprint", None)
    out.pop("worker_pid", None)
    out.pop("agent_session", None)  # a transport's session id: compared (same_session), never shown
    return out


def same_session(index: Index, row: dict, session: str) -> bool:
    """Whether proposal `row` was made in MCP session `session` (its session is never in a shown row)."""
    found = index.proposals.session_of(row["id"])
    return found is not None and secrets.compare_digest(found, session)


def list_proposals(index: Index, status: str | None = None, repo: str | None = None, limit: int = 200) -> dict:
    """Proposals, pending first (oldest first: the queue), then the rest by their last move (undone, finished
    or decided), newest first; capped honestly."""
    _check_status(status)
    with _reading(index):
        total, found = index.proposals.listed(status, repo, limit)
    rows = [decode(r) for r in found]
    return {"proposals": rows, "total": total, "truncated": total > len(rows),
            "omitted_count": max(0, total - len(rows))}


def _check_status(status: str | None) -> None:
    if status is not None and status not in STATES:
        raise FleetError("BAD_ARGUMENT", f"status must be one of {', '.join(STATES)}")


PAGE_MAX = 200
CURSOR = re.compile(r"([01]):(-?[0-9][0-9.e+-]*):([A-Za-z0-9_-]{1,64})")


def page(index: Index, limit: int = 50, cursor: str | None = None, status: str | None = None,
         repo: str | None = None) -> dict:
    """One page of proposals as summary rows, in the queue's order (pending oldest first, then the rest newest
    first): every column but the arguments, preview and result, plus the preview's `summary` and whether
    another agent works on its paths (`other_agents_on_paths`); the whole proposal is `get()`. `next_cursor`
    continues after the last row (None: this was the last page)."""
    if not isinstance(limit, int) or not 1 <= limit:
        raise FleetError("BAD_ARGUMENT", "limit must be a positive integer")
    _check_status(status)
    after = None
    if cursor is not None:
        found = CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
        if found is None:
            raise FleetError("BAD_ARGUMENT", "cursor must be a next_cursor this list returned")
        after = (int(found.group(1)), float(found.group(2)), found.group(3))
    with _reading(index):
        total, found_rows = index.proposals.summaries(status, repo, after, limit + 1)
    more = len(found_rows) > limit
    rows = []
    for raw in found_rows[:limit]:
        group, key = raw.pop("_group"), raw.pop("_key")
        row = decode(raw)
        row["other_agents_on_paths"] = bool(row["other_agents_on_paths"])
        rows.append(row)
        last = (group, key, raw["id"])
    next_cursor = f"{last[0]}:{last[1]!r}:{last[2]}" if more else None
    return {"proposals": rows, "total": total, "next_cursor": next_cursor, "limit": limit}


def change_stamp(index: Index) -> tuple[int, float]:
    """(pending count, the latest change to any proposal): what a live page polls to know it must refresh.
    Read-only, so expiry shows up on the next write or list."""
    return index.proposals.change_stamp(time.time())


def transition(index: Index, proposal_id: str, allowed: tuple[str, ...], to: str, *, decision: bool | None = None,
               **fields: object) -> dict:
    """Move a proposal from one of `allowed` to `to` in one compare-and-set; NOT_PENDING names the state
    it is really in when it is no longer in any of `allowed` (someone else decided it first).

    A `decision` (by default: a move into one of AUDITED_FIRST; a person's reconcile says so) is written to
    the audit log before the move commits: when it cannot be, AUDIT_UNAVAILABLE and nothing moved."""
    assert to in STATES
    decision = to in AUDITED_FIRST if decision is None else decision
    sets = {"status": to, **{k: (stored_json(v) if k in JSON_FIELDS and v is not None else v)
                             for k, v in fields.items()}}
    with _expiring(index):
        moved = _read(index, proposal_id) if index.proposals.move(proposal_id, allowed, sets) else None
        current = moved or _read(index, proposal_id)  # NOT_FOUND when there is no such proposal
        if moved is not None and decision:
            audit_state(index, moved, required=True)   # raising here rolls the move back
    if moved is not None:
        if not decision:
            audit_state(index, moved)
        return moved
    raise FleetError("NOT_PENDING", f"proposal {proposal_id} is {current['status']}, not "
                                    f"{' or '.join(allowed)}")


def orphaned_approved(index: Index) -> list[str]:
    """Approved proposals whose approving process died before it started them (the next executor claims
    them after re-validating)."""
    with _reading(index):
        rows = index.proposals.approved()
    return [pid for pid, worker in rows if not worker_alive(worker)]
