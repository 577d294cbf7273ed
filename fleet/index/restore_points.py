"""The `restore_points` table's store: what a proposal's executor saved before it ran (refs, index tree,
stash snapshot, saved files) and the state it left. `fleet.ops.restore` owns what they mean and git's side."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.index.sqlrows import first_row

if TYPE_CHECKING:
    from fleet.index.store import Index


class RestorePointRows:
    """Named queries on `restore_points` (rows as stored: JSON fields as text)."""

    def __init__(self, index: "Index") -> None:
        self.index = index

    def put(self, row: dict) -> None:
        """Store a restore point, replacing one of the same id."""
        with self.index.write() as conn:
            conn.execute(f"INSERT OR REPLACE INTO restore_points ({', '.join(row)}) VALUES "
                         f"({', '.join('?' * len(row))})", tuple(row.values()))

    def get(self, point_id: str) -> dict | None:
        return first_row(self.index.conn.execute("SELECT * FROM restore_points WHERE id = ?", (point_id,)))

    def set(self, point_id: str, fields: dict) -> None:
        with self.index.write() as conn:
            conn.execute(f"UPDATE restore_points SET {', '.join(f'{k} = ?' for k in fields)} WHERE id = ?",
                         (*fields.values(), point_id))

    def kept_of(self, repo: str) -> list[str]:
        """Ids of `repo`'s restore points not pruned, newest first."""
        return [r[0] for r in self.index.conn.execute(
            "SELECT id FROM restore_points WHERE repo = ? AND pruned = 0 ORDER BY created_at DESC", (repo,))]
