"""Presence in the index: the merged rows (`presence`) and what the MCP bridge heard (`presence_mcp`).

Refreshes replace the `presence` rows wholesale; `presence_mcp` rows are the bridge's own evidence and
survive refreshes until they age out. Only agent ids, states, sources, branches, repo-relative paths, tool
names, pids and times are stored. Writers take `BEGIN IMMEDIATE` (the CLI, the bridge and the watcher may
write at once).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from typing import Iterator

from sqlite_utils import Database

from fleet.presence.merge import STATE_ORDER

PRESENCE_COLUMNS = ("agent", "repo", "repo_id", "repo_name", "state", "sources", "branch", "tool", "files",
                    "pid", "pids", "last_activity", "refreshed_at")
_JSON_COLUMNS = ("sources", "files", "pids")


def create_presence_tables(db: Database) -> None:
    """The presence tables (the body of the schema migration that adds them)."""
    db["presence"].create({
        "agent": str, "repo": str, "repo_id": int, "repo_name": str, "state": str, "sources": str,
        "branch": str, "tool": str, "files": str, "pid": int, "pids": str, "last_activity": str,
        "refreshed_at": str,
    }, pk=("agent", "repo"), not_null={"agent", "repo", "state"}, if_not_exists=True)
    db["presence_mcp"].create({"agent": str, "repo": str, "tool": str, "files": str, "at": float},
                              pk=("agent", "repo"), not_null={"agent", "repo", "at"}, if_not_exists=True)


@contextmanager
def immediate(db: Database) -> Iterator[sqlite3.Connection]:
    """A write transaction that takes the lock up front, so two writer processes never deadlock."""
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _encode(row: dict) -> tuple:
    return tuple(json.dumps(row.get(c) or []) if c in _JSON_COLUMNS else row.get(c) for c in PRESENCE_COLUMNS)


def _decode(row: dict) -> dict:
    out = dict(row)
    for column in _JSON_COLUMNS:
        try:
            out[column] = json.loads(row.get(column) or "[]")
        except ValueError:
            out[column] = []
    return out


_INSERT = (f"INSERT OR REPLACE INTO presence ({', '.join(PRESENCE_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(PRESENCE_COLUMNS))})")


def replace_rows(db: Database, rows: list[dict]) -> None:
    with immediate(db) as conn:
        conn.execute("DELETE FROM presence")
        conn.executemany(_INSERT, [_encode(row) for row in rows])


def upsert_row(conn: sqlite3.Connection, row: dict) -> None:
    conn.execute(_INSERT, _encode(row))


def read_rows(db: Database, repo: str | None = None) -> list[dict]:
    """Stored presence rows (optionally of one repo path), working first, newest first."""
    where, params = ("WHERE repo = ?", [repo]) if repo else ("", [])
    rows = [_decode(r) for r in db.query(f"SELECT * FROM presence {where}", params)]
    rows.sort(key=lambda r: r["last_activity"] or "", reverse=True)
    rows.sort(key=lambda r: STATE_ORDER.get(r["state"], 9))
    return rows


def read_row(conn: sqlite3.Connection, agent: str, repo: str) -> dict | None:
    cur = conn.execute("SELECT * FROM presence WHERE agent = ? AND repo = ?", (agent, repo))
    found = cur.fetchone()
    return _decode(dict(zip([d[0] for d in cur.description], found))) if found else None
