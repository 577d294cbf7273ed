"""The one provider of index handles for a long-running process: the dashboard, the MCP bridge, the watcher.

Each thread gets an `Index` of its own, opened on first use and kept for the thread's life (an sqlite3
connection serialises every statement on it, so sharing one between worker threads would make readers
queue behind each other and behind the writer; WAL lets separate connections read while one writes).
`close()` closes every handle the pool opened, from whichever thread.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from fleet.index.store import Index, open_index


class IndexPool:
    """Per-thread `Index` handles on one database file."""

    def __init__(self, db_path: str | os.PathLike[str] | None = None) -> None:
        first = open_index(db_path)  # create, migrate and check the file once, up front
        self.path: Path = first.path
        self._local = threading.local()
        self._local.index = first
        self._all: list[Index] = [first]
        self._lock = threading.Lock()

    def get(self) -> Index:
        """This thread's handle."""
        index = getattr(self._local, "index", None)
        if index is None:
            index = Index(self.path)
            self._local.index = index
            with self._lock:
                self._all.append(index)
        return index

    def close(self) -> None:
        with self._lock:
            handles, self._all = self._all, []
        for index in handles:
            index.close()
        self._local = threading.local()

    def __enter__(self) -> "IndexPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
