"""Read another program's SQLite database without ever writing to it or creating files beside it.

Agents' stores are live WAL databases. Opening one carelessly creates `-wal`/`-shm` files or takes locks an
agent then trips over. So: only recently modified databases, `mode=ro` (plus `immutable=1` when a WAL-mode
file has no `-wal`, since SQLite would otherwise need to create the `-shm`), skip when a `-wal` exists
without its `-shm`, `query_only`, a 250 ms busy timeout, and columns checked before any query.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import quote

log = logging.getLogger(__name__)
BUSY_TIMEOUT = 0.25
MAX_ROWS = 256


def _wal_mode(path: Path) -> bool:
    """True when the file header says WAL (bytes 18/19 == 2)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18] == 2


def store_mtime(path: Path) -> float | None:
    """Newest mtime of the database and its `-wal`."""
    times = []
    for candidate in (str(path), str(path) + "-wal"):
        try:
            times.append(os.stat(candidate).st_mtime)
        except OSError:
            continue
    return max(times) if times else None


@contextmanager
def open_readonly(path: Path, cutoff: float) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection, or None when the store is missing, stale, unsafe to open or unreadable."""
    changed = store_mtime(path)
    if changed is None or changed < cutoff or not path.is_file():
        yield None
        return
    wal, shm = Path(str(path) + "-wal"), Path(str(path) + "-shm")
    params = "mode=ro"
    if wal.exists():
        if not shm.exists():
            yield None
            return
    elif _wal_mode(path):
        params += "&immutable=1"
    conn = None
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?{params}", uri=True, timeout=BUSY_TIMEOUT,
                               check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
    except sqlite3.Error as exc:
        log.debug("presence: cannot open %s: %s", path, exc)
        if conn is not None:
            conn.close()
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    try:
        return {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}
    except sqlite3.Error:
        return set()


def query(conn: sqlite3.Connection, table: str, needed: Sequence[str], sql: str,
          params: Sequence[Any] = ()) -> list[tuple]:
    """Rows of `sql` when `table` has every column in `needed` (else []); errors are logged, not raised."""
    if not set(needed) <= columns(conn, table):
        return []
    try:
        return conn.execute(sql, tuple(params)).fetchmany(MAX_ROWS)
    except sqlite3.Error as exc:
        log.debug("presence: query on %s failed: %s", table, exc)
        return []
