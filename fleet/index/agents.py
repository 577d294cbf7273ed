"""The `agents` table's store: agents' credentials (a name and the sha256 of its token, never the token).

Engine errors stay here: a name already taken is `add` returning False, a use that cannot be recorded
because another process holds the write lock is `touch` returning False.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleet.index.store import Index


class AgentRows:
    """Named queries on `agents`."""

    def __init__(self, index: "Index") -> None:
        self.index = index

    def add(self, name: str, token_hash: str, now: float) -> bool:
        """Store a credential; False when `name` already has one."""
        try:
            with self.index.write() as conn:
                conn.execute("INSERT INTO agents (name, token_hash, created_at) VALUES (?, ?, ?)",
                             (name, token_hash, now))
        except sqlite3.IntegrityError:
            return False
        return True

    def listed(self) -> list[tuple[str, float, float | None]]:
        """(name, created at, last used at) of every credential, by name."""
        return self.index.conn.execute("SELECT name, created_at, last_used_at FROM agents ORDER BY name").fetchall()

    def revoke(self, name: str) -> bool:
        """Delete `name`'s credential; whether there was one."""
        with self.index.write() as conn:
            return conn.execute("DELETE FROM agents WHERE name = ?", (name,)).rowcount > 0

    def by_hash(self, token_hash: str) -> tuple[str, float | None] | None:
        """(name, last used at) of the credential whose token hashes to `token_hash`."""
        return self.index.conn.execute("SELECT name, last_used_at FROM agents WHERE token_hash = ?",
                                       (token_hash,)).fetchone()

    def touch(self, name: str, now: float, wait_ms: int) -> bool:
        """Record a use, waiting at most `wait_ms` for the write lock; False when it was not free."""
        try:
            with self.index.busy_timeout(wait_ms), self.index.write() as conn:
                conn.execute("UPDATE agents SET last_used_at = ? WHERE name = ?", (now, name))
        except sqlite3.OperationalError:
            return False
        return True
