"""The chain's state for the dashboard: "verified up to seq N at time T", re-verified in the background.

Each check is a full `verify_log` (so an edit anywhere is found, not only in new entries). Checks repeat no
sooner than `min_interval_s`, and never take more than `busy_share` of the time: a log that takes 3 s to
verify is checked at most once a minute at the default share.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from fleet.audit.verify import verify_log
from fleet import audit
from fleet.audit.keys import trusted_keys
from fleet.errors import FleetError

log = logging.getLogger("fleetdeck.audit")


class ChainMonitor:
    def __init__(self, folder: Path, keys: dict, *, min_interval_s: float = 60.0, busy_share: float = 0.05,
                 clock: Callable[[], float] = time.time) -> None:
        self.folder = folder
        self.keys = keys
        self.min_interval_s = min_interval_s
        self.busy_share = busy_share
        self.clock = clock
        self._status: dict[str, Any] = {"state": "unchecked"}
        self._took = 0.0

    def status(self) -> dict[str, Any]:
        return dict(self._status)

    def check(self) -> dict[str, Any]:
        """Verify the whole log now; the status it leaves (`intact` or `broken`, with the first bad seq)."""
        started = time.monotonic()
        report = verify_log(self.folder, self.keys, workers=1)  # a background check keeps to one core
        self._took = time.monotonic() - started
        status = {"state": "intact" if report.ok else "broken", "verified_through": report.verified_through,
                  "at": self.clock(), "entries": report.entries, "signed": report.signed,
                  "unsigned": report.unsigned, "signatures_checked": report.signatures_checked,
                  "first_bad_seq": report.first_bad_seq, "reason": report.reason, "detail": report.detail,
                  "took_s": round(self._took, 3)}
        if not report.ok and self._status.get("state") != "broken":
            log.error("audit log not intact at seq %s (%s): %s", report.first_bad_seq, report.reason, report.detail)
        self._status = status
        return status

    def run(self, stop: threading.Event) -> None:
        """Check, wait, check again, until `stop` is set; a failing check is logged and retried later."""
        while not stop.is_set():
            try:
                self.check()
            except Exception:
                log.exception("audit chain check failed")
            stop.wait(max(self.min_interval_s, self._took / self.busy_share))


_running: ChainMonitor | None = None


def chain_status() -> dict[str, Any]:
    """The chain's state as this process's monitor last saw it (`unchecked` when none runs here)."""
    return _running.status() if _running is not None else {"state": "unchecked"}


@contextlib.asynccontextmanager
async def checking(db_path: str | os.PathLike[str]) -> AsyncIterator[ChainMonitor | None]:
    """Re-verify the audit chain in a background thread for the duration of the block (`serve`)."""
    global _running
    log_ = audit.setup(db_path)
    if not log_.enabled:
        yield None
        return
    try:
        keys = trusted_keys(log_.config)
    except FleetError as exc:  # a kept public key that cannot be read: check the chain, not the signatures
        log.error("audit chain checks run without signature keys: %s", exc.message)
        keys = {}
    monitor = _running = ChainMonitor(log_.dir, keys)
    stop = threading.Event()
    thread = threading.Thread(target=monitor.run, args=(stop,), name="fleetdeck-audit-check", daemon=True)
    thread.start()
    try:
        yield monitor
    finally:
        stop.set()
        _running = None
