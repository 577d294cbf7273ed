"""Presence in the index: the merged rows (`presence`), what the MCP bridge heard (`presence_mcp`) and what
the agents' own hooks said (`presence_hooks`, fleet/presence/hooks.py).

Tables are created by migration `m002_presence` in `fleet/index/schema.py`; their statements are the index's
(`index.presence`, fleet/index/presence.py); this module encodes and decodes the rows. Refreshes replace the
`presence` rows wholesale; `presence_mcp` rows are the bridge's own evidence and survive refreshes until they
age out. Only agent ids, states, sources, branches, repo-relative paths, tool names, pids and times are
stored. Writes go through `Index.write()` (`BEGIN IMMEDIATE`: the CLI, the bridge and the watcher may write
at once).
"""

from __future__ import annotations

import json

from fleet.index.presence import PRESENCE_COLUMNS
from fleet.presence.merge import STATE_ORDER

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


def replace_rows(index, rows: list[dict]) -> None:
    index.presence.replace_all([_encode(row) for row in rows])


def upsert_row(index, row: dict) -> None:
    """Store one row (inside the caller's write transaction)."""
    index.presence.put(_encode(row))


def read_rows(index, repo: str | None = None) -> list[dict]:
    """Stored presence rows (optionally of one repo path), working first, newest first."""
    rows = [_decode(r) for r in index.presence.rows(repo)]
    rows.sort(key=lambda r: r["last_activity"] or "", reverse=True)
    rows.sort(key=lambda r: STATE_ORDER.get(r["state"], 9))
    return rows


def read_agent_rows(index, agent: str, repo: str) -> list[dict]:
    """The rows of one agent in one repo (one per session), newest first."""
    return [_decode(r) for r in index.presence.agent_rows(agent, repo)]
