"""The facts the dashboard's guards check against: the MCP bearer token, the person's browser sessions, the
cookie's name, the Host names we answer to. The checks themselves are the middlewares in web/guards.py;
docs/security.md is the model.

The bearer token (held by MCP clients) and a session (held by the person's browser) are independent random
secrets: no cookie, CSRF token or decision key is derived from the token, so holding it opens no session.
A session comes only from redeeming a landing code (fleet/ops/landing.py). The one bearer check of the whole
HTTP surface (pages, JSON API, SSE and the MCP bridge at `/mcp`) is `Guard.valid`; `mcp_bridge/http.py` uses
the same guards.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

COOKIE_PREFIX = "fleetdeck_"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HOST_HEADER = re.compile(r"(?:\[([0-9a-f:.]+)\]|([a-z0-9._-]+))(?::[0-9]{1,5})?")
MAX_SESSIONS = 64  # the oldest session is dropped beyond this: links are single-use, so a few are plenty


def new_token() -> str:
    return secrets.token_urlsafe(32)


def cookie_name(port: int | None) -> str:
    """`fleetdeck_8765`: browsers keep one cookie jar per host name whatever the port, so two servers on one
    machine (two fleetdecks, or fleetdeck and anything else) must not share a cookie name."""
    return f"{COOKIE_PREFIX}{port or 0}"


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback IP address (127.0.0.0/8, ::1), parsed as an address: `127.evil.example`
    is a host name, not a loopback address."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts_for(bind_host: str) -> frozenset[str]:
    """Host names a request may use: loopback names, the bound address, and this machine's names when bound
    to every interface (which only happens with --allow-remote)."""
    names = set(LOOPBACK_NAMES) | {bind_host.strip("[]").lower()}
    if bind_host in ("0.0.0.0", "::"):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def host_name(host_header: str) -> str:
    """`example.com:8765` -> `example.com`, `[::1]:8765` -> `::1`; "" for anything that is not exactly
    `name[:port]` or `[v6 address][:port]` with a port of ASCII digits (`127.0.0.1:1@evil.example`, `::1`
    unbracketed, `localhost:80:80`, a path, spaces), which then matches no allowed name."""
    found = HOST_HEADER.fullmatch(host_header.lower())
    return (found.group(1) or found.group(2)) if found else ""


@dataclass(frozen=True)
class Session:
    """One person's browser session: the cookie's value (`id`), the CSRF token its pages embed for forms
    that change nothing in a repository, and the decision key only the tab's own script holds (handed over
    once, in the landing exchange's response body, never in a page)."""

    id: str = field(default_factory=new_token)
    csrf: str = field(default_factory=new_token)
    decision_key: str = field(default_factory=new_token)
    challenges: dict[str, bytes] = field(default_factory=dict, compare=False)  # passkey challenges, used once

    def valid_csrf(self, candidate: str | None) -> bool:
        return _same(candidate, self.csrf)

    def valid_decision(self, candidate: str | None) -> bool:
        return _same(candidate, self.decision_key)


class Sessions:
    """The run's sessions, in memory (a restart signs every browser out), found by a digest of the cookie
    value so a lookup's timing says nothing about the secret; at most MAX_SESSIONS, oldest dropped first."""

    def __init__(self) -> None:
        self._by_digest: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _digest(value: str) -> str:
        return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()

    def create(self) -> Session:
        session = Session()
        with self._lock:
            self._by_digest[self._digest(session.id)] = session
            while len(self._by_digest) > MAX_SESSIONS:
                self._by_digest.popitem(last=False)
        return session

    def get(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        with self._lock:
            return self._by_digest.get(self._digest(cookie))


def _never(_candidate: str | None) -> bool:
    return False


def _nobody(_candidate: str | None) -> str | None:
    return None


@dataclass(frozen=True)
class Guard:
    """The run's secrets and the Host names it answers to; every comparison is constant-time.

    `redeem` spends a landing code (True when it was live) and `approver` checks the approver token of the
    person's scripts (fleet/ops/approver.py); both default to refusing, for an app that serves `/mcp` only.
    `agent_of` names the agent whose credential (fleet/agents) a bearer is, or None (the default: none is)."""

    token: str
    allowed_hosts: frozenset[str]
    redeem: Callable[[str | None], bool] = _never
    approver: Callable[[str | None], bool] = _never
    sessions: Sessions = field(default_factory=Sessions)
    agent_of: Callable[[str | None], str | None] = _nobody  # the agent a credential names (fleet/agents), /mcp only

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("fleetdeck's HTTP surface needs a non-empty token")

    def valid(self, candidate: str | None) -> bool:
        return _same(candidate, self.token)


def _same(candidate: str | None, expected: str) -> bool:
    return bool(candidate) and secrets.compare_digest(candidate.encode(), expected.encode())
