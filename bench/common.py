"""Small helpers the benchmark scripts share."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

PROJECT = Path(__file__).resolve().parent.parent


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


def byte_compile() -> None:
    """Byte-compile fleetdeck's packages as `pip install` leaves them: run from a checkout with
    PYTHONDONTWRITEBYTECODE (as on this machine), every `fleetdeck` process would compile each module it
    imports from source, which a person's installed copy never does (`serve`'s start-up: over a second of CPU)."""
    packages = [str(PROJECT / name) for name in ("fleet", "web", "mcp_bridge")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
