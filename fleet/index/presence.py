"""The presence tables' store: the merged rows (`presence`), what the MCP bridge heard (`presence_mcp`) and
what the agents' hooks said (`presence_hooks`). Rows go in and come out as stored (JSON lists as text);
`fleet.presence` owns what they mean, how rows merge, and when evidence ages out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.index.sqlrows import all_rows

if TYPE_CHECKING:
    import sqlite3

    from fleet.index.store import Index

PRESENCE_COLUMNS = ("agent", "repo", "session", "repo_id", "repo_name", "state", "waiting_since", "waiting_kind",
                    "sources", "branch", "tool", "files", "pid", "pids", "last_activity", "refreshed_at")
_INSERT = (f"INSERT OR REPLACE INTO presence ({', '.join(PRESENCE_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(PRESENCE_COLUMNS))})")
_PUT_MCP = ("INSERT OR REPLACE INTO presence_mcp (agent, repo, session, tool, files, at, client_version, client_pid)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


class PresenceRows:
    """Named queries on `presence`, `presence_mcp` and `presence_hooks`. Writers that read and write one
    row (a hook, an MCP call) run these inside their own `index.write()`."""

    def __init__(self, index: "Index") -> None:
        self.index = index

    @property
    def _conn(self) -> "sqlite3.Connection":
        return self.index.conn

    # --- presence: the merged rows ---

    def replace_all(self, rows: list[tuple]) -> None:
        """Every presence row replaced by `rows` (tuples in PRESENCE_COLUMNS order), in one transaction."""
        with self.index.write() as conn:
            conn.execute("DELETE FROM presence")
            conn.executemany(_INSERT, rows)

    def put(self, row: tuple) -> None:
        self._conn.execute(_INSERT, row)

    def drop(self, agent: str, repo: str, session: str) -> None:
        self._conn.execute("DELETE FROM presence WHERE agent = ? AND repo = ? AND session = ?", (agent, repo, session))

    def rows(self, repo: str | None = None) -> list[dict]:
        """The stored rows (of one repo path, or all), unordered."""
        where, params = ("WHERE repo = ?", [repo]) if repo else ("", [])
        return all_rows(self._conn.execute(f"SELECT * FROM presence {where}", params))

    def agent_rows(self, agent: str, repo: str) -> list[dict]:
        """The rows of one agent in one repo (one per session), newest first."""
        return all_rows(self._conn.execute("SELECT * FROM presence WHERE agent = ? AND repo = ? "
                                       "ORDER BY last_activity DESC", (agent, repo)))

    def stamp(self) -> tuple:
        """(hook records, the newest, presence rows, the newest refresh, how many wait): moves on any change."""
        hooks = self._conn.execute("SELECT count(*), max(at) FROM presence_hooks").fetchone()
        rows = self._conn.execute("SELECT count(*), max(refreshed_at), sum(state = 'waiting') FROM presence").fetchone()
        return (*hooks, *rows)

    # --- presence_mcp: what the bridge heard ---

    def put_mcp(self, agent: str, repo: str, session: str, tool: str | None, files: str, at: float,
                client_version: str | None, client_pid: int | None) -> None:
        self._conn.execute(_PUT_MCP, (agent, repo, session, tool, files, at, client_version, client_pid))

    def mcp_files(self, agent: str, repo: str, session: str) -> str | None:
        """The files (JSON) the bridge holds for one client session in one repo, None when it holds none."""
        row = self._conn.execute("SELECT files FROM presence_mcp WHERE agent = ? AND repo = ? AND session = ?",
                                 (agent, repo, session)).fetchone()
        return None if row is None else row[0]

    def mcp_since(self, since: float) -> list[tuple]:
        """(agent, repo, session, client version, client pid, tool, at) heard at or after `since`, newest first."""
        return self._conn.execute("SELECT agent, repo, session, client_version, client_pid, tool, at FROM "
                                  "presence_mcp WHERE at >= ? ORDER BY at DESC", (since,)).fetchall()

    def mcp_agents_since(self, since: float) -> list[tuple]:
        """(agent, its newest at, a repo) per agent and per fleet-wide or not, heard at or after `since`."""
        return self._conn.execute("SELECT agent, max(at), repo FROM presence_mcp WHERE at >= ? "
                                  "GROUP BY agent, repo = ''", (since,)).fetchall()

    def mcp_last_fleet_tool(self, agent: str) -> str | None:
        """The tool of `agent`'s newest fleet-wide call."""
        return self._conn.execute("SELECT tool FROM presence_mcp WHERE agent = ? AND repo = '' ORDER BY at DESC"
                                  " LIMIT 1", (agent,)).fetchone()[0]

    def mcp_sweep(self, before: float) -> list[tuple]:
        """Drop what the bridge heard before `before`; (agent, repo, session, tool, files, at) of the rest."""
        with self.index.write() as conn:
            conn.execute("DELETE FROM presence_mcp WHERE at < ?", (before,))
            return conn.execute("SELECT agent, repo, session, tool, files, at FROM presence_mcp").fetchall()

    # --- presence_hooks: what the hooks said ---

    def hook(self, agent: str, repo: str, session: str) -> tuple | None:
        """(state, waiting kind, waiting since, left waiting at) of one hook session."""
        return self._conn.execute("SELECT state, waiting_kind, waiting_since, left_waiting_at FROM presence_hooks "
                                  "WHERE agent = ? AND repo = ? AND session = ?", (agent, repo, session)).fetchone()

    def hook_repo(self, agent: str, session: str) -> str | None:
        """The repository a hook session's newest record is in (for events that name no folder)."""
        row = self._conn.execute("SELECT repo FROM presence_hooks WHERE agent = ? AND session = ? "
                                 "ORDER BY at DESC LIMIT 1", (agent, session)).fetchone()
        return row[0] if row else None

    def put_hook(self, agent: str, repo: str, session: str, state: str, waiting_kind: str | None,
                 waiting_since: float | None, left_waiting_at: float | None, tool: str | None, at: float) -> None:
        self._conn.execute("INSERT OR REPLACE INTO presence_hooks (agent, repo, session, state, waiting_kind, "
                           "waiting_since, left_waiting_at, tool, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (agent, repo, session, state, waiting_kind, waiting_since, left_waiting_at, tool, at))

    def hooks_sweep(self, before: float, idle_before: float) -> list[tuple]:
        """Drop hook records older than `before` (and not waiting ones older than `idle_before`); (agent, repo,
        session, state, waiting kind, waiting since, tool, at) of the rest."""
        with self.index.write() as conn:
            conn.execute("DELETE FROM presence_hooks WHERE at < ? OR (state != 'waiting' AND at < ?)",
                         (before, idle_before))
            return conn.execute("SELECT agent, repo, session, state, waiting_kind, waiting_since, tool, at "
                                "FROM presence_hooks").fetchall()

