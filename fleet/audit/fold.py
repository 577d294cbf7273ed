"""Counted entries: calls that nobody authenticated are folded, one counted entry per window, so that a flood of
them (anything on the machine can send them) cannot fill the log or, through pruning, push real entries out.

The first such call of a window is recorded as usual (its own entry, with its tool, code and arguments'
fingerprint); the others of the window are only counted, and one `calls_folded` entry carries the count,
the codes seen and the window's first and last time. It is written when the window is over: by the
next append of any kind, by the log's background thread within a second or so, or when the log closes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from fleet.timespec import iso

WINDOW_S = 60.0
EVENT = "calls_folded"


@dataclass
class _Window:
    key: str
    started: float                  # on the monotonic clock
    since: str = ""                 # ISO times of the first and last call counted (not the one recorded)
    until: str = ""
    count: int = 0
    results: Counter = field(default_factory=Counter)

    def fields(self) -> dict:
        """The counted entry's fields (event, summary and the rest, as `_fields` takes them)."""
        codes = ", ".join(f"{code} x{n}" for code, n in self.results.most_common())
        return {"event": EVENT, "summary": f"{self.count} more calls refused before authentication ({codes}) "
                                           f"between {self.since} and {self.until}, counted: one entry per "
                                           f"{WINDOW_S:.0f} s", "result": self.results.most_common(1)[0][0],
                "actor": "fleetdeck", "count": self.count, "since": self.since, "until": self.until,
                "folded": self.key}


class Folds:
    """The open windows, per key (thread-safe)."""

    def __init__(self, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic,
                 now_iso: Callable[[], str] | None = None) -> None:
        self.window_s = window_s
        self.clock = clock
        self.now_iso = now_iso or (lambda: iso(time.time()))
        self._open: dict[str, _Window] = {}
        self._ended: list[_Window] = []
        self._lock = threading.Lock()

    def admit(self, key: str, result: str) -> bool:
        """True: record this call's own entry (it opens a window); False: it was counted."""
        now = self.clock()
        with self._lock:
            window = self._open.get(key)
            if window is not None and now - window.started < self.window_s:
                window.count += 1
                window.since = window.since or self.now_iso()
                window.until = self.now_iso()
                window.results[result] += 1
                return False
            if window is not None and window.count:
                self._ended.append(window)
            self._open[key] = _Window(key, now)
            return True

    def has_due(self) -> bool:
        now = self.clock()
        with self._lock:
            return bool(self._ended) or any(w.count and now - w.started >= self.window_s for w in self._open.values())

    def due(self, final: bool = False) -> list[dict]:
        """The counted entries to write now (windows over, or every one when `final`), taken out."""
        now = self.clock()
        with self._lock:
            over = [k for k, w in self._open.items() if final or now - w.started >= self.window_s]
            ended = self._ended + [self._open.pop(k) for k in over]
            self._ended = []
        return [w.fields() for w in ended if w.count]
