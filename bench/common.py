"""Small helpers the benchmark scripts share."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Callable


def watcher_meta(db: Path) -> dict:
    """The running watcher's status row (`meta` key `watcher`), read without taking any lock."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
        row = conn.execute("select value from meta where key = 'watcher'").fetchone()
    return json.loads(row[0]) if row else {}


def wait(check: Callable[[], object], timeout: float, what: str, step: float = 0.1) -> object:
    """Poll `check` until it is truthy; a benchmark that cannot get there stops with a clear message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    raise SystemExit(f"bench: timed out waiting for {what}")
