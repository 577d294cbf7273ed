"""Team mode's outbox, on the index side: what has not reached the hub yet, and marking what has.

Rows are read here and handed to fleet/team/push.py, which sends them; the cursors move only after the
hub committed (`advance`), so a push cut short is sent again and lands once (the hub's
upserts are keyed by the rows' natural keys). Kinds: `repos` (the change counter `generation`, children
with their repo), `events` (the event id), `audit` (the log's seq), and digests per key for the sets that
are replaced whole (`presence`, `proposals`, `lost`).
"""

from __future__ import annotations

from fleet.index.events import REWOUND_KEY
from fleet.index.sqlrows import all_rows
from fleet.index.store import Index

REPO_CHILDREN = ("branches", "worktrees", "submodules")   # the hub's child tables of a repo record
AUDIT_CHAIN_KEY = "team.audit_chain"   # meta: the audit log's chain on the hub (fleet/team/auditchain.py)


def cursor(index: Index, kind: str) -> int:
    row = index.conn.execute("SELECT value FROM team_cursors WHERE kind = ?", (kind,)).fetchone()
    return row[0] if row else 0


def rewound(index: Index) -> int | None:
    """The lowest event id the index replaced since `advance` last cleared it: the hub's events from it on are
    sent again (a HEAD event a branch's reflog line replaced, its id free for reuse)."""
    found = index.meta(REWOUND_KEY)
    return found if isinstance(found, int) else None


def advance(index: Index, moves: dict[str, int], sent: dict[str, dict[str, str | None]] | None = None,
            rewound: int | None = None) -> None:
    """After the hub committed: cursors to their new values and the digests of what the hub now holds
    (None: the hub dropped that key), and the rewind sent (unless a lower one came meanwhile), in one local
    transaction."""
    with index.write() as conn:
        if rewound is not None:
            conn.execute("DELETE FROM meta WHERE key = ? AND cast(value as integer) = ?", (REWOUND_KEY, rewound))
        conn.executemany("INSERT OR REPLACE INTO team_cursors (kind, value) VALUES (?, ?)", moves.items())
        for kind, keys in (sent or {}).items():
            conn.executemany("DELETE FROM team_sent WHERE kind = ? AND key = ?",
                             [(kind, k) for k, d in keys.items() if d is None])
            conn.executemany("INSERT OR REPLACE INTO team_sent (kind, key, digest) VALUES (?, ?, ?)",
                             [(kind, k, d) for k, d in keys.items() if d is not None])


def sent(index: Index, kind: str) -> dict[str, str]:
    """{key: digest} of the `kind` rows the hub holds."""
    return dict(index.conn.execute("SELECT key, digest FROM team_sent WHERE kind = ?", (kind,)))


def forget(index: Index) -> None:
    """Every cursor and digest back to nothing (`team leave`; a later join sends everything again)."""
    with index.write() as conn:
        conn.execute("DELETE FROM team_cursors")
        conn.execute("DELETE FROM meta WHERE key IN (?, ?)", (REWOUND_KEY, AUDIT_CHAIN_KEY))
        conn.execute("DELETE FROM team_sent")


def pending_repos(index: Index, after: int) -> int:
    return index.conn.execute("SELECT count(*) FROM repos WHERE generation > ?", (after,)).fetchone()[0]


def events_after(index: Index, after: int, limit: int) -> list[dict]:
    """Up to `limit` events with ids above `after`, in id order (the order they were stored in)."""
    return all_rows(index.conn.execute("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", (after, limit)))


def pending_events(index: Index, after: int) -> int:
    return index.conn.execute("SELECT count(*) FROM event_rows WHERE id > ?", (after,)).fetchone()[0]


def proposals(index: Index) -> list[dict]:
    """Every proposal the index still holds (retention bounds them), without the arguments: the hub mirrors
    what a person reviews (the preview and the arguments' fingerprint), never what an agent passed."""
    rows = all_rows(index.conn.execute("SELECT * FROM proposals ORDER BY created_at"))
    for row in rows:
        row.pop("args", None)
    return rows


def repo_names(index: Index) -> dict[int, tuple[str, str]]:
    """{repo id: (name, path)}, gone ones included."""
    return {r[0]: (r[1], r[2]) for r in index.conn.execute("SELECT id, name, path FROM repos")}


def change_mark(index: Index) -> tuple:
    """A cheap value that moves whenever anything the outbox sends may have changed (the pusher's poll)."""
    return index.conn.execute(
        "SELECT (SELECT ifnull(max(generation), 0) FROM repos), (SELECT ifnull(max(id), 0) FROM event_rows),"
        " (SELECT count(*) || ':' || ifnull(max(refreshed_at), '') || ':' || ifnull(max(last_activity), '')"
        "  FROM presence),"
        " (SELECT count(*) || ':' || ifnull(max(max(created_at, ifnull(decided_at, 0), ifnull(started_at, 0),"
        "  ifnull(finished_at, 0), ifnull(undone_at, 0))), 0) || ':' || group_concat(status, '') FROM proposals)"
    ).fetchone()
