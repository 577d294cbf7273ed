"""uvicorn's h11 protocol with two guards that keep `serve` answering its person when something on the machine
opens connections and never finishes a request (a half-open flood: a partial request line or headers, then
nothing). Without them each such socket holds a descriptor for ever (uvicorn arms no timer until a first
response), and at the process's RLIMIT_NOFILE the server stops accepting: the dashboard and `/mcp` hang.

- a header timeout: a connection that has not sent a complete request line and headers within the settings'
  `[serve] header_timeout_s` of opening (or of its previous response) is closed, however slowly bytes trickle in;
- a connection cap (`connection_cap()`: MAX_CONNECTIONS, lowered so that RESERVED_FDS descriptors stay free
  for the index, the audit log, git and the thread pool): a connection over it closes the oldest connection
  that is not in the middle of a request (half-open or idle), so a new request gets in at once; only when
  every connection is busy with a request is the new one closed instead.

Both need a small listen backlog (`ACCEPT_BURST`, uvicorn's `backlog`): asyncio accepts up to that many
sockets in one go before any of them reaches `connection_made`, so uvicorn's default of 2048 runs the process
into EMFILE (and a one-second accept pause) before the cap can close anything.

uvicorn's own `limit_concurrency` is not used: it answers 503 to the person's request once the flood holds
that many sockets, and closes none of them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
import time

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from fleet.errors import FleetError
from fleet.settings import SECTIONS, load_settings

MAX_CONNECTIONS = 512
ACCEPT_BURST = 64
RESERVED_FDS = 256
log = logging.getLogger("fleetdeck.serve")


@functools.lru_cache(maxsize=1)
def connection_cap() -> int:
    """How many connections this process keeps open at most, from its descriptor limit."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - RESERVED_FDS))


def header_timeout_s() -> float:
    """`[serve] header_timeout_s` of the settings; its default when the settings file cannot be read (serve
    answers then, as the audit log and presence do, and they say why)."""
    try:
        return float(load_settings()["serve"]["header_timeout_s"])
    except FleetError:
        return float(SECTIONS["serve"]["header_timeout_s"].default)


def guarded() -> type[GuardedH11]:
    """The protocol class for `uvicorn.Config(http=)`, its header timeout read from the settings now."""
    return type("GuardedH11", (GuardedH11,), {"header_timeout_s": header_timeout_s()})


class GuardedH11(H11Protocol):
    """H11Protocol plus the header timeout and the connection cap (`guarded()` gives it the settings' timeout)."""

    header_timeout_s = float(SECTIONS["serve"]["header_timeout_s"].default)
    _header_timer: asyncio.TimerHandle | None = None
    opened_at = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.opened_at = time.monotonic()
        self._arm()
        open_ = [c for c in self.connections if not c.transport.is_closing()]  # closing: its fd goes soon
        if len(open_) > connection_cap():
            victim = min((c for c in open_ if c is not self and _between_requests(c)),
                         key=lambda c: getattr(c, "opened_at", 0.0), default=self)
            _warn_once_a_minute(len(open_))
            victim.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:      # the request line and headers are in
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()                                 # the next request's headers get the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timeout)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


_warned_at = [float("-inf")]


def _warn_once_a_minute(count: int) -> None:
    now = time.monotonic()
    if now - _warned_at[0] >= 60:
        _warned_at[0] = now
        log.warning("%d connections open (cap %d): closing the oldest ones that are not in a request "
                    "(said once a minute)", count, connection_cap())


def _between_requests(protocol: object) -> bool:
    """Not in the middle of a request: no request seen yet on it, or its last response complete."""
    cycle = getattr(protocol, "cycle", None)
    return cycle is None or cycle.response_complete
