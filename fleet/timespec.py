"""Points in time and durations as people and scripts write them: `90m`, `24h`, `7d`, ISO 8601, unix ms.

One parser for the CLI, the dashboard and MCP, so `--since 24h` means the same everywhere.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from fleet.errors import FleetError

def iso(ts: float | None) -> str | None:
    """Unix seconds as the one ISO 8601 form every surface shows: UTC, whole seconds, a `Z` suffix."""
    if ts is None:
        return None
    if type(ts) is int and 0 <= ts <= 253402300799:   # whole seconds (every stored time) in years 1970-9999:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))   # the same text, in half the time
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")


def parse_duration(text: str) -> int:
    """Seconds in `90m`, `24h`, `7d`, `2w`, `30s`; FleetError BAD_ARGUMENT otherwise."""
    match = _DURATION.match(str(text))
    if not match:
        raise FleetError("BAD_ARGUMENT", f"not a duration: {text!r} (use e.g. 90m, 24h, 7d, 2w)")
    return int(match.group(1)) * _UNITS[match.group(2)]


# A `since` outside this range is a typo (or an attack on the integer columns), not a point in time.
EARLIEST = 0.0
LATEST = 253402300799.0  # 9999-12-31T23:59:59Z


def parse_since(value: str | int | float, now: float | None = None) -> float:
    """A point in time as unix seconds, from a relative duration (`24h` ago), ISO 8601 or unix milliseconds.

    An ISO timestamp without an offset is read in local time, as a person typing a date means it.
    """
    now = time.time() if now is None else now
    if isinstance(value, bool):
        raise FleetError("BAD_ARGUMENT", "since must be a duration, an ISO 8601 time or unix milliseconds")
    if isinstance(value, (int, float)):
        return _in_range(float(value) / 1000, value)
    text = str(value).strip()
    if text.isdigit():
        return _in_range(int(text) / 1000, value)
    if _DURATION.match(text):
        return _in_range(now - parse_duration(text), value)
    try:
        stamp = datetime.fromisoformat(text)
        if stamp.tzinfo is None:
            stamp = stamp.astimezone()
        seconds = stamp.timestamp()
    except (ValueError, OverflowError):
        raise FleetError("BAD_ARGUMENT",
                         f"not a time: {value!r} (use 90m, 24h, 7d, an ISO 8601 time or unix milliseconds)") from None
    return _in_range(seconds, value)


def _in_range(seconds: float, given: object) -> float:
    if not EARLIEST <= seconds <= LATEST:
        raise FleetError("BAD_ARGUMENT", f"since is out of range (1970 to 9999): {given!r}")
    return seconds

