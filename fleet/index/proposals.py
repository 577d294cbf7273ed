"""The `proposals` table's store: every statement the write side runs on it, as named queries.

Rows come back as stored (JSON fields as text, times as unix seconds); `fleet.ops.proposals` owns the
lifecycle, the quotas and how a row is shown. Each method runs on the index's connection: inside the caller's
`index.write()` / `index.read()` when there is one, else as one statement. A second engine implements this
class over the same columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.index.sqlrows import all_rows, first_row

if TYPE_CHECKING:
    import sqlite3

    from fleet.index.store import Index

HEAVY = ("args", "preview", "result", "policy", "args_fingerprint")   # not in a summary row
# The queue's order: pending oldest first, then the rest newest first (by when they were made), then id.
ORDER = ("status != 'pending'", "CASE WHEN status = 'pending' THEN created_at ELSE -created_at END", "id")


class ProposalRows:
    """Named queries on `proposals` (and the restore points that keep a proposal's row)."""

    def __init__(self, index: "Index") -> None:
        self.index = index

    @property
    def _conn(self) -> "sqlite3.Connection":
        return self.index.conn

    def get(self, proposal_id: str) -> dict | None:
        return first_row(self._conn.execute("SELECT * FROM proposals WHERE id = ?", (proposal_id,)))

    def insert(self, stored: dict) -> None:
        cols = ", ".join(stored)
        self._conn.execute(f"INSERT INTO proposals ({cols}) VALUES ({', '.join('?' * len(stored))})",
                           tuple(stored.values()))

    def move(self, proposal_id: str, allowed: tuple[str, ...], sets: dict) -> bool:
        """Compare-and-set: `sets` applied only while the proposal is in one of `allowed`; whether it was."""
        assignments = ", ".join(f"{k} = ?" for k in sets)
        return self._conn.execute(
            f"UPDATE proposals SET {assignments} WHERE id = ? AND status IN ({', '.join('?' * len(allowed))})",
            (*sets.values(), proposal_id, *allowed)).rowcount == 1

    def set(self, proposal_id: str, fields: dict) -> None:
        sets = ", ".join(f"{k} = ?" for k in fields)
        self._conn.execute(f"UPDATE proposals SET {sets} WHERE id = ?", (*fields.values(), proposal_id))

    def by_key(self, agent: str, op: str, key: str) -> tuple[str, str] | None:
        """(id, args fingerprint) of the proposal idempotency key `key` made for `agent`'s `op`."""
        return self._conn.execute("SELECT id, args_fingerprint FROM proposals WHERE agent = ? AND op = ? "
                                  "AND idempotency_key = ?", (agent, op, key)).fetchone()

    def pending_of(self, identity: str) -> tuple[int, int]:
        """(how many, bytes of arguments and preview) `identity` has pending: its quota's use."""
        count, held = self._conn.execute(
            "SELECT count(*), coalesce(sum(length(CAST(args AS BLOB)) + length(CAST(preview AS BLOB))), 0) "
            "FROM proposals WHERE identity = ? AND status = 'pending'", (identity,)).fetchone()
        return count, held

    def due(self, now: float) -> list[tuple[str, str, str | None]]:
        """(id, status, worker) of the pending and approved proposals whose expiry is at or before `now`."""
        return self._conn.execute("SELECT id, status, worker_start FROM proposals WHERE status IN "
                                  "('pending', 'approved') AND expires_at <= ?", (now,)).fetchall()

    def expire_pending(self, now: float) -> list[dict]:
        """Pending proposals past their expiry become `expired`: the rows moved."""
        return all_rows(self._conn.execute("UPDATE proposals SET status = 'expired', finished_at = ? "
                                       "WHERE status = 'pending' AND expires_at <= ? RETURNING *", (now, now)))

    def expire_approved(self, proposal_id: str, now: float) -> list[dict]:
        """An approved proposal past its expiry (its approver died) becomes `expired`: the row, if moved."""
        return all_rows(self._conn.execute("UPDATE proposals SET status = 'expired', finished_at = ? "
                                       "WHERE id = ? AND status = 'approved' RETURNING *", (now, proposal_id)))

    def approved(self) -> list[tuple[str, str | None]]:
        """(id, worker) of every approved proposal."""
        return self._conn.execute("SELECT id, worker_start FROM proposals WHERE status = 'approved'").fetchall()

    def session_of(self, proposal_id: str) -> str | None:
        row = self._conn.execute("SELECT agent_session FROM proposals WHERE id = ?", (proposal_id,)).fetchone()
        return None if row is None else row[0]

    def prune(self, statuses: tuple[str, ...], cutoff: float) -> int:
        """Delete proposals in `statuses` that ended before `cutoff`, but those whose restore point is kept."""
        marks = ", ".join("?" * len(statuses))
        return self._conn.execute(f"DELETE FROM proposals WHERE status IN ({marks}) AND coalesce(finished_at, "
                                  "decided_at, created_at) < ? AND id NOT IN (SELECT id FROM restore_points WHERE "
                                  "pruned = 0)", (*statuses, cutoff)).rowcount

    def listed(self, status: str | None, repo: str | None, limit: int) -> tuple[int, list[dict]]:
        """(how many match, the first `limit`): pending first (oldest first), then by their last move."""
        clause, params = _filters(status, repo)
        conn = self._conn
        total = conn.execute(f"SELECT count(*) FROM proposals {clause}", params).fetchone()[0]
        rows = all_rows(conn.execute(f"SELECT * FROM proposals {clause} ORDER BY status != 'pending', "
                                 "CASE WHEN status = 'pending' THEN created_at "
                                 "ELSE -coalesce(undone_at, finished_at, decided_at, created_at) END LIMIT ?",
                                 (*params, limit)))
        return total, rows

    def summaries(self, status: str | None, repo: str | None, after: tuple[int, float, str] | None,
                  limit: int) -> tuple[int, list[dict]]:
        """(how many match, up to `limit` summary rows after the `after` position in the queue's ORDER).

        A summary row is every column but HEAVY, plus `summary` (the preview's), `other_agents_on_paths`, and
        `_group`/`_key`: the row's position, for the next cursor."""
        clause, params = _filters(status, repo)
        paged, params_after = clause, list(params)
        if after is not None:
            paged = (f"{clause} AND " if clause else "WHERE ") + f"({', '.join(ORDER)}) > (?, ?, ?)"
            params_after += list(after)
        conn = self._conn
        columns = [c[1] for c in conn.execute("PRAGMA table_info(proposals)") if c[1] not in HEAVY]
        total = conn.execute(f"SELECT count(*) FROM proposals {clause}", params).fetchone()[0]
        rows = all_rows(conn.execute(
            f"SELECT {', '.join(columns)}, json_extract(preview, '$.summary') AS summary, "
            "EXISTS (SELECT 1 FROM json_each(preview, '$.other_agents') AS o WHERE "
            "json_array_length(o.value, '$.overlapping_paths') > 0) AS other_agents_on_paths, "
            f"{ORDER[0]} AS _group, {ORDER[1]} AS _key FROM proposals {paged} ORDER BY {', '.join(ORDER)} "
            "LIMIT ?", (*params_after, limit)))
        return total, rows

    def change_stamp(self, now: float) -> tuple[int, float]:
        """(pending and not yet due, the latest change to any proposal)."""
        row = self._conn.execute("SELECT sum(status = 'pending' AND expires_at > ?), max(max(created_at, "
                                 "ifnull(decided_at, 0), ifnull(started_at, 0), ifnull(finished_at, 0))) "
                                 "FROM proposals", (now,)).fetchone()
        return int(row[0] or 0), float(row[1] or 0)

    def pending_by_repo(self, now: float) -> list[tuple[str, str, str, str]]:
        """(repo, id, op, agent) of every proposal pending and not yet due, oldest first."""
        return self._conn.execute("SELECT repo, id, op, agent FROM proposals WHERE status = 'pending' "
                                  "AND expires_at > ? ORDER BY created_at", (now,)).fetchall()


def _filters(status: str | None, repo: str | None) -> tuple[str, list[str]]:
    """The WHERE clause (and its parameters) of a list by status and repo."""
    where, params = [], []
    if status:
        where.append("status = ?")
        params.append(status)
    if repo:
        where.append("repo = ?")
        params.append(repo)
    return ("WHERE " + " AND ".join(where)) if where else "", params

