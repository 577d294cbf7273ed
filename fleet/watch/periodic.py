"""Periodic work that runs wherever a watcher runs (agent presence, ...), passed to the `Watcher` by its host.

Each hook runs `fn(index)` every `every_s` seconds in a worker thread with an index handle of that thread;
a run still going is never overlapped by the next one; an exception is logged and the hook keeps its
schedule. A hook that holds something beyond its runs (a thread, a file watch) gives `close`, called once
when the watcher stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from fleet.index.store import Index


@dataclass(frozen=True)
class Periodic:
    fn: Callable[[Index], object]
    every_s: float
    name: str = field(default="")
    close: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        if self.every_s <= 0:
            raise ValueError("every_s must be positive")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.fn, "__qualname__", repr(self.fn)))


class PeriodicSchedule:
    """When each hook runs next, and which ones are running (so a slow run is never overlapped)."""

    def __init__(self, hooks: list[Periodic]) -> None:
        self.hooks = list(hooks)
        self._next_at = [0.0] * len(self.hooks)
        self._running = [False] * len(self.hooks)

    def due(self, now: float) -> list[int]:
        """The hooks (by position) to start now; each is marked running until `done()`."""
        starts = []
        for i, hook in enumerate(self.hooks):
            if not self._running[i] and now >= self._next_at[i]:
                self._running[i] = True
                self._next_at[i] = now + hook.every_s
                starts.append(i)
        return starts

    def done(self, i: int) -> None:
        self._running[i] = False

    def close(self) -> None:
        """Release what the hooks hold (each `close` once)."""
        for hook in self.hooks:
            if hook.close is not None:
                hook.close()
