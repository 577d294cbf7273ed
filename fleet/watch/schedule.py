"""Which repos the watcher re-reads next: file events first (debounced per repo), sweeps with a worker to spare.

Pure bookkeeping, no I/O and no clock of its own (times are passed in), so the rules can be read and tested
in one place: a repo is re-read at most once at a time; an event-driven re-read waits for `quiet_s` without
new events but never more than `max_delay_s` after the first; sweeps never take the last free worker, so
an event is always served promptly even while a full sweep of a large fleet is running.
"""

from __future__ import annotations

from collections import deque


class RefreshQueue:
    def __init__(self, workers: int, quiet_s: float, max_delay_s: float) -> None:
        self.workers = workers
        self.quiet_s, self.max_delay_s = quiet_s, max_delay_s
        self._due: dict[str, list[float]] = {}  # repo -> [first event, last event] (monotonic seconds)
        self._sweep: deque[str] = deque()
        self._queued: set[str] = set()
        self._inflight: set[str] = set()
        self._sweeping = 0

    def touch(self, repo: str, now: float) -> None:
        """A file event for `repo`: re-read it once events have been quiet for a moment."""
        slot = self._due.get(repo)
        if slot is None:
            self._due[repo] = [now, now]
        else:
            slot[1] = now

    def add(self, repo: str, now: float) -> None:
        """Re-read `repo` as soon as a worker is free (a repo just found), unless it is due already."""
        self._due.setdefault(repo, [now, now])

    def sweep(self, repos: list[str]) -> None:
        """Re-read `repos` when workers are spare, in this order; a repo already queued keeps its place."""
        for repo in repos:
            if repo not in self._queued:
                self._queued.add(repo)
                self._sweep.append(repo)

    def take(self, now: float) -> tuple[list[tuple[str, bool]], float | None]:
        """The re-reads to start now as (repo, is_sweep), marked in flight, and when the next one is due."""
        starts: list[tuple[str, bool]] = []
        next_at: float | None = None
        for repo, (first, last) in list(self._due.items()):
            at = min(first + self.max_delay_s, last + self.quiet_s)
            if repo in self._inflight:
                continue
            if at <= now and len(self._inflight) < self.workers:
                del self._due[repo]
                self._begin(repo, False)
                starts.append((repo, False))
            elif at > now:
                next_at = at if next_at is None else min(next_at, at)
        while self._sweep and self._sweeping < self.workers - 1 and len(self._inflight) < self.workers - 1:
            repo = self._sweep.popleft()
            self._queued.discard(repo)
            if repo not in self._inflight and repo not in self._due:
                self._begin(repo, True)
                starts.append((repo, True))
        return starts, next_at

    def _begin(self, repo: str, sweep: bool) -> None:
        self._inflight.add(repo)
        self._sweeping += sweep

    def finish(self, repo: str, sweep: bool) -> None:
        """A re-read started by `take` ended (done or failed)."""
        self._inflight.discard(repo)
        self._sweeping -= sweep

    def backlog(self) -> int:
        """Re-reads waiting or running."""
        return len(self._due) + len(self._sweep) + len(self._inflight)
