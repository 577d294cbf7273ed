"""`fleet.timespec.iso`: whole seconds take a faster path (strftime) that must give the very text of the general
one (datetime's isoformat), at the range's ends, around leap days and year ends, and on random seconds."""

from __future__ import annotations

import random
from datetime import datetime, timezone

from fleet.timespec import LATEST, iso


def _general(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def test_whole_seconds_read_as_the_general_form():
    edges = [0, 1, 59, 60, 86399, 86400, 951782399, 951782400, 951868800, 1796219385, int(LATEST) - 1, int(LATEST)]
    years = [int(datetime(y, 1, 1, tzinfo=timezone.utc).timestamp()) + d for y in (1971, 2000, 2038, 2100, 9999)
             for d in (-1, 0, 1)]
    rng = random.Random(27)
    for ts in edges + years + [rng.randint(0, int(LATEST)) for _ in range(20000)]:
        assert iso(ts) == _general(ts), ts


def test_other_times_keep_the_general_form():
    for ts in (1.9999999, 1796219385.5, -1, -86400.25, True):
        assert iso(ts) == _general(ts), ts
    assert iso(None) is None
    assert iso(1796219385) == "2026-12-02T13:49:45Z"
