"""Another process holding an index's write lock, for tests of what fleetdeck does while it cannot write."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Iterator

LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE IF NOT EXISTS lock_probe (x)")
print("locked", flush=True)
sys.stdin.read()  # hold the write lock until the test closes our stdin
conn.execute("ROLLBACK")
"""


@contextlib.contextmanager
def write_locked(db: Path) -> Iterator[subprocess.Popen]:
    """A child process holds `db`'s write lock (BEGIN IMMEDIATE) for the block; it is released and the
    child must exit 0 afterwards."""
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        yield locker
    finally:
        locker.stdin.close()
        code = locker.wait(timeout=30)
    assert code == 0
