"""Waits read from session files keep their first `waiting_since` across a flap, as hooks' do.

A hook's wait is remembered in the index (fleet/presence/hooks.py). A session file's wait is read again at
every refresh, and a session that went on and came back to waiting for the same thing within FLAP_S would
show a new time — a second inbox item, a second notification. This memory, kept by the process that
refreshes (serve's watcher), gives such a session back its first time; a wait left for longer is forgotten.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Iterable

from fleet.presence.hooks import FLAP_S
from fleet.presence.model import Sighting

Key = tuple[str, str, str, str]     # agent, repo, session, waiting kind


class WaitMemory:
    def __init__(self) -> None:
        self._since: dict[Key, float] = {}
        self._left: dict[Key, float] = {}
        self._lock = threading.Lock()

    def apply(self, sightings: Iterable[Sighting], now: float) -> list[Sighting]:
        """`sightings` with each session file's wait given the time this memory holds for it."""
        out = []
        with self._lock:
            for s in sightings:
                if s.source == "session" and s.waiting_kind and s.waiting_since is not None:
                    key = (s.agent, s.repo, s.session, s.waiting_kind)
                    left = self._left.get(key)
                    if key in self._since and (left is None or now - left <= FLAP_S):
                        s = dataclasses.replace(s, waiting_since=self._since[key])
                    else:
                        self._since[key] = s.waiting_since
                out.append(s)
        return out

    def settle(self, rows: Iterable[dict], now: float) -> None:
        """After a merge: the waits that no row shows any more were left now; those left long ago go."""
        shown = {(r["agent"], r["repo"], r["session"], r["waiting_kind"]) for r in rows if r["state"] == "waiting"}
        with self._lock:
            for key in list(self._since):
                if key in shown:
                    self._left.pop(key, None)
                elif now - self._left.setdefault(key, now) > FLAP_S:
                    del self._since[key], self._left[key]


WAITS = WaitMemory()
