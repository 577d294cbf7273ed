"""LISTEN on the hub's channel: one NOTIFY per push (`fleetdeck.pushed()`, fleet/team/push.py), counted in a
thread of its own so the hub dashboard's live stream only compares a number until a push lands.

A hub that goes away is reconnected to with backoff (1 s doubling to a minute); while it is away the stream's
periodic status still says how old each machine's last push is.
"""

from __future__ import annotations

import logging
import threading

from fleet.errors import FleetError
from fleet.team import pg

CHANNEL = "fleetdeck"
log = logging.getLogger("fleetdeck.team")


class Listener:
    """`count` grows by one for every notification heard on the hub's channel."""

    def __init__(self, dsn: str, password: str | None = None) -> None:
        self.dsn, self.password = dsn, password
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleetdeck-hub-listen", daemon=True)

    def start(self) -> "Listener":
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                conn = pg.connect(self.dsn, self.password, autocommit=True, read_only=True)
            except FleetError as exc:
                log.warning("hub listen: %s", exc.message)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                backoff = 1.0
                self.count += 1      # (re)connected: what moved while away is looked at once
                while not self._stop.is_set():
                    for _note in conn.notifies(timeout=1.0, stop_after=1):
                        self.count += 1
            except pg.psycopg().Error as exc:
                log.warning("hub listen: %s", pg.unreachable(self.dsn, exc, self.password).message)
            finally:
                conn.close()
