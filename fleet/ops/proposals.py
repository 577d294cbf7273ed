"""Proposals in the index: rows, and the lifecycle moves between their states.

    pending -> approved -> executing -> completed | failed
    pending -> rejected (a person) | cancelled (the proposing agent) | expired (time)
    completed | failed -> undone (a later `restore` of its restore point completed; back again when that
                          restore is itself undone)

Every move is a compare-and-set (`UPDATE ... WHERE status IN (...)` inside BEGIN IMMEDIATE), so two
processes (the CLI and `serve`) racing to approve or execute one proposal cannot both win. A proposal left
`executing` by a process that died is never re-run: it shows as `interrupted` until a person reconciles it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import secrets
import sqlite3
import time
from typing import Iterator

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
# The states fleetdeck's executor puts an approved proposal in: the audit credits them to it, not the agent.
RUN_BY_SERVER = ("executing", "completed", "failed", "undone")
SERVER = "fleetdeck"
# decisions and the claim that starts an execution: refused when the audit log cannot record them
AUDITED_FIRST = ("approved", "rejected", "cancelled", "executing")


def new_id() -> str:
    return "p-" + secrets.token_hex(6)


def fingerprint(value: object) -> str:
    """sha256 of canonical JSON: how a retried idempotency key is checked against the first call's args."""
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canon.encode()).hexdigest()


def expire_due(conn: sqlite3.Connection, now: float | None = None) -> list[dict]:
    """Pending proposals past their expiry become `expired`; so do approved ones whose approver died.

    Returns the rows this call moved (RETURNING, inside the caller's write transaction): the compare-and-set
    hands each expiry to exactly one caller, in whichever process, and that caller writes its audit entry
    once the transaction commits (`_expiring`).
    """
    now = time.time() if now is None else now
    cur = conn.execute("UPDATE proposals SET status = 'expired', finished_at = ? "
                       "WHERE status = 'pending' AND expires_at <= ? RETURNING *", (now, now))
    moved = _rows(cur)
    for pid, worker in conn.execute("SELECT id, worker_start FROM proposals WHERE status = 'approved' "
                                    "AND expires_at <= ?", (now,)).fetchall():
        if not worker_alive(worker):
            moved += _rows(conn.execute("UPDATE proposals SET status = 'expired', finished_at = ? "
                                        "WHERE id = ? AND status = 'approved' RETURNING *", (now, pid)))
    return moved


@contextlib.contextmanager
def _expiring(index: Index) -> Iterator[sqlite3.Connection]:
    """A write transaction that first expires what is due; the expiries' audit entries follow its commit
    (none when the block fails and the transaction, expiries included, rolls back)."""
    with index.write() as conn:
        expired = expire_due(conn)
        yield conn
    for row in expired:
        audit_state(index, row)


def _rows(cur: sqlite3.Cursor) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [decode(dict(zip(names, found))) for found in cur.fetchall()]


def insert(index: Index, row: dict, max_pending: int) -> tuple[dict, bool]:
    """Store a new proposal, or return the one an idempotency key already made. Returns (row, replayed).

    Over `max_pending` pending proposals from this agent: LIMIT. The same key with other arguments:
    BAD_ARGUMENT (a retry must be the same request).
    """
    with _expiring(index) as conn:
        key = row.get("idempotency_key")
        if key is not None:
            found = conn.execute("SELECT id, args_fingerprint FROM proposals WHERE agent = ? AND op = ? "
                                 "AND idempotency_key = ?", (row["agent"], row["op"], key)).fetchone()
            if found is not None:
                if found[1] != row["args_fingerprint"]:
                    raise FleetError("BAD_ARGUMENT", f"idempotency_key {key!r} was used for a different "
                                                     f"{row['op']} request (proposal {found[0]})")
                return _read(conn, found[0]), True
        pending = conn.execute("SELECT count(*) FROM proposals WHERE identity = ? AND status = 'pending'",
                               (row["identity"],)).fetchone()[0]
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
            _check_pending_bytes(conn, row["identity"], len(stored.get("args") or "")
                                 + len(stored.get("preview") or ""))
        cols = ", ".join(stored)
        conn.execute(f"INSERT INTO proposals ({cols}) VALUES ({', '.join('?' * len(stored))})",
                     tuple(stored.values()))
        made = _read(conn, row["id"])
    audit_state(index, made)
    return made, False


def stored_json(value: object) -> str:
    """A JSON field as the index stores it (ASCII: its length is its size in bytes)."""
    return json.dumps(value, sort_keys=True, default=str)


def _check_pending_bytes(conn: sqlite3.Connection, identity: str, size: int) -> None:
    """LIMIT when this proposal would take what `identity` (the quota key: every unauthenticated client
    shares `unknown`) has pending past MAX_PENDING_BYTES."""
    held = conn.execute("SELECT coalesce(sum(length(CAST(args AS BLOB)) + length(CAST(preview AS BLOB))), 0) "
                        "FROM proposals WHERE identity = ? AND status = 'pending'", (identity,)).fetchone()[0]
    if held + size > MAX_PENDING_BYTES:
        raise FleetError("LIMIT", f"agent {identity!r} has {held} bytes of proposals pending and this one holds "
                                  f"{size}: the most allowed is {MAX_PENDING_BYTES}; wait for decisions or "
                                  "cancel some")


def prune_decided(index: Index, older_than_s: float, now: float | None = None) -> int:
    """Delete the proposals that ended (TERMINAL) more than `older_than_s` ago, except those whose restore
    point is kept (undoing them needs the row); their audit entries stay. Returns how many went."""
    cutoff = (time.time() if now is None else now) - older_than_s
    marks = ", ".join("?" * len(TERMINAL))
    with index.write() as conn:
        gone = conn.execute(f"DELETE FROM proposals WHERE status IN ({marks}) AND coalesce(finished_at, "
                            "decided_at, created_at) < ? AND id NOT IN (SELECT id FROM restore_points WHERE "
                            "pruned = 0)", (*TERMINAL, cutoff)).rowcount
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


def get(index: Index, proposal_id: str) -> dict:
    if not isinstance(proposal_id, str) or not proposal_id:
        raise FleetError("BAD_ARGUMENT", "proposal_id must be a non-empty string")
    with _expiring(index) as conn:  # expiry is applied before anyone reads a status
        return _read(conn, proposal_id)


def _read(conn: sqlite3.Connection, proposal_id: str) -> dict:
    cur = conn.execute("SELECT * FROM proposals WHERE id = ?", (proposal_id,))
    found = cur.fetchone()
    if found is None:
        raise FleetError("NOT_FOUND", f"no proposal {proposal_id[:80]!r}")
    return decode(dict(zip([d[0] for d in cur.description], found)))


def decode(row: dict) -> dict:
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
    found = index.conn.execute("SELECT agent_session FROM proposals WHERE id = ?", (row["id"],)).fetchone()
    return found is not None and found[0] is not None and secrets.compare_digest(found[0], session)


def list_proposals(index: Index, status: str | None = None, repo: str | None = None, limit: int = 200) -> dict:
    """Proposals, pending first (oldest first: the queue), then the rest by their last move (undone, finished
    or decided), newest first; capped honestly."""
    where, params = _filters(status, repo)
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    with _expiring(index) as conn:
        total = conn.execute(f"SELECT count(*) FROM proposals {clause}", params).fetchone()[0]
        cur = conn.execute(f"SELECT * FROM proposals {clause} ORDER BY status != 'pending', "
                           "CASE WHEN status = 'pending' THEN created_at "
                           "ELSE -coalesce(undone_at, finished_at, decided_at, created_at) END LIMIT ?",
                           (*params, limit))
        names = [d[0] for d in cur.description]
        rows = [decode(dict(zip(names, r))) for r in cur.fetchall()]
    return {"proposals": rows, "total": total, "truncated": total > len(rows),
            "omitted_count": max(0, total - len(rows))}


def _filters(status: str | None, repo: str | None) -> tuple[list[str], list[str]]:
    """The WHERE terms (and their parameters) of a list by status and repo."""
    if status is not None and status not in STATES:
        raise FleetError("BAD_ARGUMENT", f"status must be one of {', '.join(STATES)}")
    where, params = [], []
    if status:
        where.append("status = ?")
        params.append(status)
    if repo:
        where.append("repo = ?")
        params.append(repo)
    return where, params


PAGE_MAX = 200
HEAVY = ("args", "preview", "result", "policy", "args_fingerprint")   # not in a summary row
ORDER = ("status != 'pending'", "CASE WHEN status = 'pending' THEN created_at ELSE -created_at END", "id")
CURSOR = re.compile(r"([01]):(-?[0-9][0-9.e+-]*):([A-Za-z0-9_-]{1,64})")


def page(index: Index, limit: int = 50, cursor: str | None = None, status: str | None = None,
         repo: str | None = None) -> dict:
    """One page of proposals as summary rows, in the queue's order (pending oldest first, then the rest newest
    first): every column but the arguments, preview and result, plus the preview's `summary` and whether
    another agent works on its paths (`other_agents_on_paths`); the whole proposal is `get()`. `next_cursor`
    continues after the last row (None: this was the last page)."""
    if not isinstance(limit, int) or not 1 <= limit:
        raise FleetError("BAD_ARGUMENT", "limit must be a positive integer")
    where, params = _filters(status, repo)
    after, params_after = [], []
    if cursor is not None:
        found = CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
        if found is None:
            raise FleetError("BAD_ARGUMENT", "cursor must be a next_cursor this list returned")
        after = [f"({', '.join(ORDER)}) > (?, ?, ?)"]
        params_after = [int(found.group(1)), float(found.group(2)), found.group(3)]
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    paged = ("WHERE " + " AND ".join(where + after)) if where or after else ""
    with _expiring(index) as conn:
        columns = [c[1] for c in conn.execute("PRAGMA table_info(proposals)") if c[1] not in HEAVY]
        total = conn.execute(f"SELECT count(*) FROM proposals {clause}", params).fetchone()[0]
        cur = conn.execute(f"SELECT {', '.join(columns)}, json_extract(preview, '$.summary') AS summary, "
                           "EXISTS (SELECT 1 FROM json_each(preview, '$.other_agents') AS o WHERE "
                           "json_array_length(o.value, '$.overlapping_paths') > 0) AS other_agents_on_paths, "
                           f"{', '.join(ORDER[:2])} FROM proposals {paged} ORDER BY {', '.join(ORDER)} LIMIT ?",
                           (*params, *params_after, limit + 1))
        names = [d[0] for d in cur.description]
        found_rows = [dict(zip(names, r)) for r in cur.fetchall()]
    more = len(found_rows) > limit
    rows = []
    for raw in found_rows[:limit]:
        group, key = raw.pop(names[-2]), raw.pop(names[-1])
        row = decode(raw)
        row["other_agents_on_paths"] = bool(row["other_agents_on_paths"])
        rows.append(row)
        last = (group, key, raw["id"])
    next_cursor = f"{last[0]}:{last[1]!r}:{last[2]}" if more else None
    return {"proposals": rows, "total": total, "next_cursor": next_cursor, "limit": limit}


def change_stamp(index: Index) -> tuple[int, float]:
    """(pending count, the latest change to any proposal): what a live page polls to know it must refresh.
    Read-only, so expiry shows up on the next write or list."""
    row = index.conn.execute("SELECT sum(status = 'pending' AND expires_at > ?), max(max(created_at, "
                             "ifnull(decided_at, 0), ifnull(started_at, 0), ifnull(finished_at, 0))) "
                             "FROM proposals", (time.time(),)).fetchone()
    return int(row[0] or 0), float(row[1] or 0)


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
    assignments = ", ".join(f"{k} = ?" for k in sets)
    marks = ", ".join("?" * len(allowed))
    with _expiring(index) as conn:
        cur = conn.execute(f"UPDATE proposals SET {assignments} WHERE id = ? AND status IN ({marks})",
                           (*sets.values(), proposal_id, *allowed))
        moved = _read(conn, proposal_id) if cur.rowcount == 1 else None
        current = moved or _read(conn, proposal_id)  # NOT_FOUND when there is no such proposal
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
    with _expiring(index) as conn:
        rows = conn.execute("SELECT id, worker_start FROM proposals WHERE status = 'approved'").fetchall()
    return [pid for pid, worker in rows if not worker_alive(worker)]
