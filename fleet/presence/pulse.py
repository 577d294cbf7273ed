"""Presence refreshed within a second of a live session's file changing, for a few `stat`s while none does.

The full refresh (every detector, the process table: fleet/presence/refresh.py) runs every FULL_EVERY_S. The
watcher calls its presence hook, a `Pulse`, every TICK_S; between two full refreshes a tick only stats the
session files behind the live presence rows (waiting, working, open) and the folders they are in (a new
session file of the same project shows there), and refreshes at once when one of them changed — an agent
wrote a finished turn, or a tool call that may wait on the person — or when an unanswered call one of them
holds becomes a wait (PENDING_S after it was written: fleet/presence/model.py). So a wait read from a session
file reaches the index, and the dashboard's event stream, within a tick and a refresh of the moment it is
true, not at the next full refresh.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Iterable

from fleet.presence.merge import LIVE_STATES
from fleet.presence.model import Sighting
from fleet.presence.refresh import refresh_presence

FULL_EVERY_S = 5.0
TICK_S = 0.25

Stamp = tuple[int, int] | None      # (st_mtime_ns, st_size), None: the path is gone


def _stamp(path: str) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class Pulse:
    """The watcher's presence hook: `pulse(index)` on every tick (never two at once: fleet/watch/periodic.py)."""

    def __init__(self, refresh: Callable[..., list[dict]] = refresh_presence, full_every_s: float = FULL_EVERY_S,
                 clock: Callable[[], float] = time.time) -> None:
        self._refresh, self._full_every_s, self._clock = refresh, full_every_s, clock
        self._stamps: dict[str, Stamp] = {}
        self._due: float | None = None
        self._last: float | None = None
        self._lock = threading.Lock()

    def __call__(self, index) -> None:
        now = self._clock()
        with self._lock:
            stale = self._last is None or now - self._last >= self._full_every_s
            due = self._due is not None and now >= self._due
            if not (stale or due or self._moved()):
                return
            self._last = now
        self._refresh(index, observe=self.observe)

    def _moved(self) -> bool:
        return any(_stamp(path) != stamp for path, stamp in self._stamps.items())

    def observe(self, found: Iterable[Sighting], rows: list[dict], now: float) -> None:
        """After a refresh: the session files (and folders) of the live rows' sessions to stat from now on,
        and the soonest time an unanswered call among them becomes a wait."""
        live = {(r["agent"], r["repo"]) for r in rows if r["state"] in LIVE_STATES}
        files = [s for s in found if s.source == "session" and s.file and (s.agent, s.repo) in live]
        stamps = {path: _stamp(path) for path in {s.file for s in files} | {os.path.dirname(s.file) for s in files}}
        due = min((s.matures_at for s in files if s.matures_at is not None and s.matures_at > now), default=None)
        for s in files:             # written again since the refresh listed it: what it read may be older
            stamp = stamps[s.file]
            if stamp is None or (s.last_activity is not None and s.last_activity < now
                                 and stamp[0] / 1e9 > s.last_activity + 1e-3):
                due = now
        with self._lock:
            self._stamps = stamps
            self._due = due

    def watched(self) -> list[str]:
        """The paths a tick stats (what the tests and `status` may look at)."""
        with self._lock:
            return sorted(self._stamps)
