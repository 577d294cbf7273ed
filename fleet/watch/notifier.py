"""File-system notifications: one watchfiles watch (one inotify instance, or a poller) read by its own thread.

Only watchfiles' public `watch()` is used. It builds its notifier lazily, inside the generator, and then
blocks; to learn that the watch is up (or why it failed: out of inotify watches, a path gone) before the
caller moves on, the notifier passes a `stop_event` whose `is_set()` watchfiles calls on every step of its
loop: the first call means "watching". The caller waits for that, so a rebuilt watch set overlaps the old
one and nothing is missed in between.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Callable

import watchfiles

from fleet.errors import FleetError

log = logging.getLogger("fleetdeck.watcher")

STEP_MS = 20          # quiet period before watchfiles hands over a batch
DEBOUNCE_MS = 1600    # upper bound on one batch
POLL_DELAY_MS = 300   # polling fallback interval
START_TIMEOUT_S = 60.0  # building a watch over a few thousand dirs takes well under a second

Deliver = Callable[[set[tuple[watchfiles.Change, str]]], None]


class _Signals:
    """The `stop_event` handed to watchfiles: `is_set()` answers the stop flag and, by being called at all,
    tells that the watch is running (`ready` is also set when the watch ends, failed or not)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.watching = False

    def is_set(self) -> bool:
        if not self.watching:
            self.watching = True
            self.ready.set()
        return self.stop.is_set()


class Notifier:
    """A running watch over `paths` (recursive or not, inotify or polling) delivering batches of changes.

    The constructor returns once the watch is up; it raises what watchfiles raised when it could not start
    (an `OSError` when inotify is out of watches or instances, `FileNotFoundError` for a path gone).
    """

    def __init__(self, paths: list[str], recursive: bool, polling: bool, deliver: Deliver) -> None:
        self.paths = paths
        self.recursive = recursive
        self.polling = polling
        self._deliver = deliver
        self._signals = _Signals()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"fleetdeck-notify-{'tree' if recursive else 'top'}")
        self._thread.start()
        if not self._signals.ready.wait(START_TIMEOUT_S):
            log.warning("a watch over %d paths took over %.0f s to start", len(paths), START_TIMEOUT_S)
        if self._failed is not None:
            self._thread.join(timeout=5)
            raise self._failed

    def _loop(self) -> None:
        try:
            for changes in watchfiles.watch(
                    *self.paths, watch_filter=None, debounce=DEBOUNCE_MS, step=STEP_MS, stop_event=self._signals,
                    rust_timeout=0, debug=False, raise_interrupt=False, force_polling=self.polling,
                    poll_delay_ms=POLL_DELAY_MS, recursive=self.recursive, ignore_permission_denied=False):
                self._deliver(changes)
        except BaseException as exc:  # a notifier failing must not take the watcher down: the sweeps still run
            if self._signals.watching:
                log.exception("file notifications stopped")
            else:
                self._failed = exc
        finally:
            self._signals.ready.set()

    def stop(self) -> None:
        """Ask the watch to end (watchfiles sees it within a step); `close` waits for that."""
        self._signals.stop.set()

    def close(self) -> None:
        self.stop()
        self._thread.join(timeout=5)


def open_notifier(paths: list[str], recursive: bool, polling: bool, deliver: Deliver) -> Notifier:
    """A Notifier over the paths that exist and are readable; a path vanishing meanwhile is retried.

    `ignore_permission_denied` stays False: with True, watchfiles also swallows "OS file watch limit
    reached" and silently watches only part of the tree (observed with watchfiles 1.3).
    """
    for _attempt in range(5):
        live = [p for p in paths if os.access(p, os.R_OK | os.X_OK)]
        try:
            return Notifier(live, recursive, polling, deliver)
        except (FileNotFoundError, PermissionError):
            continue
    raise FleetError("BAD_PATH", "watched paths keep disappearing while the watch set is built")


def out_of_watches(exc: BaseException) -> bool:
    """inotify ran out of watches (ENOSPC, "OS file watch limit reached") or instances (EMFILE)."""
    text = str(exc)
    return isinstance(exc, OSError) and (
        "watch limit" in text or "Too many open files" in text or exc.errno in (errno.ENOSPC, errno.EMFILE))


def inotify_watch_count(pid: int | str = "self") -> int:
    """inotify watches held by a process: the `inotify wd:` lines of its inotify fds in /proc/PID/fdinfo."""
    total = 0
    base = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(base)
    except OSError:
        return 0
    for fd in fds:
        try:
            with open(f"{base}/{fd}", encoding="ascii", errors="replace") as fh:
                total += sum(1 for line in fh if line.startswith("inotify wd:"))
        except OSError:
            continue
    return total
