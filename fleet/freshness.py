"""How fresh the index is, said honestly: when it was last written, and whether a watcher keeps it current.

The watcher (in `serve` or `fleetdeck watch`, possibly another process) records its state under the `meta`
key `watcher` as JSON; a heartbeat older than `STALE_AFTER` means it stopped without saying so.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

STALE_AFTER = 90.0


def _seconds(stamp: object) -> float | None:
    if isinstance(stamp, (int, float)):
        return float(stamp)
    if isinstance(stamp, str) and stamp:
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def watcher_state(index, now: float | None = None) -> dict:
    """`{state, mode, detail, heartbeat_age_s}`; state is `running`, `polling`, `stopped`, `stale` or `absent`."""
    now = now or time.time()
    row = index.db.conn.execute("select value from meta where key = 'watcher'").fetchone()
    if row is None:
        return {"state": "absent", "mode": None, "detail": "no watcher has run on this index",
                "heartbeat_age_s": None}
    try:
        value = json.loads(row[0])
    except (TypeError, ValueError):
        value = {"state": str(row[0])}
    if not isinstance(value, dict):
        value = {"state": str(value)}
    beat = _seconds(value.get("heartbeat") or value.get("updated_at"))
    age = None if beat is None else max(0.0, now - beat)
    state = str(value.get("state") or "running")
    mode = value.get("mode")
    if state in ("running", "polling") and age is not None and age > STALE_AFTER:
        state = "stale"
    elif state == "running" and mode == "polling":
        state = "polling"
    return {"state": state, "mode": mode, "detail": value.get("detail") or value.get("reason"),
            "heartbeat_age_s": None if age is None else round(age, 1)}


def freshness(index, now: float | None = None) -> dict:
    """When the index last changed (newest `scanned_at`), its change counter, and the watcher's state."""
    now = now or time.time()
    newest = index.db.conn.execute("select max(scanned_at) from repos where gone = 0").fetchone()[0]
    when = _seconds(newest)
    return {
        "indexed_at": newest,
        "age_s": None if when is None else round(max(0.0, now - when), 1),
        "generation": index.generation(),
        "watcher": watcher_state(index, now),
    }
