"""Presence in the index: the merged rows (`presence`), what the MCP bridge heard (`presence_mcp`) and what
the agents' own hooks said (`presence_hooks`, fleet/presence/hooks.py).

Tables are created by migration `m002_presence` in `fleet/index/schema.py`. Refreshes replace the `presence` rows
wholesale; `presence_mcp` rows are the bridge's own evidence and survive refreshes until they age out. Only
agent ids, states, sources, branches, repo-relative paths, tool names, pids and times are stored. Writes go
through `Index.write()` (`BEGIN IMMEDIATE`: the CLI, the bridge and the watcher may write at once).
"""

from __future__ import annotations

import json
import sqlite3

from fleet.presence.merge import STATE_ORDER

PRESENCE_COLUMNS = ("agent", "repo", "session", "repo_id", "repo_name", "state", "waiting_since", "waiting_kind",
                    "sources", "branch", "tool", "files", "pid", "pids", "last_activity", "refreshed_at")
_JSON_COLUMNS = ("sources", "files", "pids")


def _encode(row: dict) -> tuple:
    return tuple(json.dumps(row.get(c) or []) if c in _JSON_COLUMNS else row.get("session") or "" if c == "session"
                 else row.get(c) for c in PRESENCE_COLUMNS)


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


def replace_rows(index, rows: list[dict]) -> None:
    with index.write() as conn:
        conn.execute("DELETE FROM presence")
        conn.executemany(_INSERT, [_encode(row) for row in rows])


def upsert_row(conn: sqlite3.Connection, row: dict) -> None:
    conn.execute(_INSERT, _encode(row))


def read_rows(index, repo: str | None = None) -> list[dict]:
    """Stored presence rows (optionally of one repo path), working first, newest first."""
    where, params = ("WHERE repo = ?", [repo]) if repo else ("", [])
    cur = index.conn.execute(f"SELECT * FROM presence {where}", params)
    names = [d[0] for d in cur.description]
    rows = [_decode(dict(zip(names, r))) for r in cur.fetchall()]
    rows.sort(key=lambda r: r["last_activity"] or "", reverse=True)
    rows.sort(key=lambda r: STATE_ORDER.get(r["state"], 9))
    return rows


def presence_stamp(index) -> tuple:
    """What moves when an agent's presence may have changed: (hook sightings, the newest one, presence rows,
    the newest refresh, how many wait)."""
    hooks = index.conn.execute("SELECT count(*), max(at) FROM presence_hooks").fetchone()
    rows = index.conn.execute("SELECT count(*), max(refreshed_at), sum(state = 'waiting') FROM presence").fetchone()
    return (*hooks, *rows)


def read_agent_rows(conn: sqlite3.Connection, agent: str, repo: str) -> list[dict]:
    """The rows of one agent in one repo (one per session), newest first."""
    cur = conn.execute("SELECT * FROM presence WHERE agent = ? AND repo = ? ORDER BY last_activity DESC",
                       (agent, repo))
    names = [d[0] for d in cur.description]
    return [_decode(dict(zip(names, r))) for r in cur.fetchall()]
