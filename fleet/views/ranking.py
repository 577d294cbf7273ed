"""The ranked queue of every live repo, kept in memory per index and refreshed by the index's generation.

Every write to a repo row gives it a new fleet-wide generation (fleet/index/store.py: storing a record and
marking it gone both do; rows are never deleted), so after the first read a refresh re-reads only the rows
written since: a dashboard or MCP server over 10,000 repos decodes a changed repo's reasons once, not every
repo's on every request. The cached entries are never handed out: callers get copies.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Callable, NamedTuple


class Ranked(NamedTuple):
    """One live repo: its stored score, the reasons stored with it (no "clean"), its entry, its sort key."""

    stored_score: int
    own_reasons: list[dict]
    entry: dict
    key: tuple


EntryOf = Callable[[dict, list[dict]], dict]


class RankedRows:
    """The live rows of one index (by its path), ranked most urgent first; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = -1
        self._by_id: dict[int, Ranked] = {}
        self._ranked: list[Ranked] = []

    def ranked(self, index, entry_of: EntryOf, clean: Callable[[], dict]) -> list[Ranked]:
        """Every live repo, most urgent first (score, then newest activity, then name)."""
        with self._lock:
            generation = index.generation()  # read before the rows: a write in between is re-read next time
            if generation != self._generation:
                first = self._generation < 0
                rows = index.summaries() if first else index.changed_rows(self._generation)
                for row in rows:
                    if row.get("gone"):
                        self._by_id.pop(row["id"], None)
                    else:
                        self._by_id[row["id"]] = _ranked(row, entry_of, clean)
                self._ranked = sorted(self._by_id.values(), key=lambda r: r.key)
                self._generation = generation
            return self._ranked


def _ranked(row: dict, entry_of: EntryOf, clean: Callable[[], dict]) -> Ranked:
    own = [r for r in (row.get("reasons") or []) if r["code"] != "clean"]
    own.sort(key=lambda r: -r["score"])
    entry = entry_of(row, own or [clean()])
    return Ranked(row["score"] or 0, own, entry, sort_key(entry))


def sort_key(entry: dict) -> tuple:
    return (-entry["score"], _neg_time(entry["last_activity"]), entry["name"])


def _neg_time(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    try:
        return -datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


_TABLES: dict[str, tuple[object, RankedRows]] = {}
_TABLES_LOCK = threading.Lock()


def rows_of(index) -> RankedRows:
    """The one ranked table of this index file in this process (a new one when the file at that path is
    another index: each index file carries a random `instance` id in its meta table)."""
    key, instance = str(index.path), index.meta("instance")
    with _TABLES_LOCK:
        known = _TABLES.get(key)
        if known is None or known[0] != instance:
            known = _TABLES[key] = (instance, RankedRows())
        return known[1]
