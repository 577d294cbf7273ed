"""The facts the dashboard's guards check against: the run's token and what derives from it, the cookie's
name and value, the Host names we answer to. The checks themselves are the middlewares in web/guards.py;
docs/security.md is the model.

The one token check of the whole HTTP surface (pages, JSON API, SSE and the MCP bridge at `/mcp`) is
`Guard.valid`; `mcp_bridge/http.py` uses the same guards.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import socket
from dataclasses import dataclass, field

COOKIE_PREFIX = "fleetdeck_"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HOST_HEADER = re.compile(r"(?:\[([0-9a-f:.]+)\]|([a-z0-9._-]+))(?::[0-9]{1,5})?")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _derive(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def csrf_for(token: str) -> str:
    """The CSRF token is derived from the access token, so it needs no server-side session store."""
    return _derive(token, "fleetdeck-csrf-v1")


def cookie_name(port: int | None) -> str:
    """`fleetdeck_8765`: browsers keep one cookie jar per host name whatever the port, so two servers on one
    machine (two fleetdecks, or fleetdeck and anything else) must not share a cookie name."""
    return f"{COOKIE_PREFIX}{port or 0}"


def cookie_value_for(token: str, port: int | None) -> str:
    """What the cookie carries: a value derived from the token for this port, never the token itself, so a
    server on another port that receives the cookie learns neither the bearer token nor a cookie that
    another fleetdeck would take."""
    return _derive(token, f"fleetdeck-cookie-v1:{port or 0}")


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
class Guard:
    """The run's secrets and the Host names it answers to; every comparison is constant-time."""

    token: str
    allowed_hosts: frozenset[str]
    csrf: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("fleetdeck's HTTP surface needs a non-empty token")
        object.__setattr__(self, "csrf", csrf_for(self.token))

    def valid(self, candidate: str | None) -> bool:
        return _same(candidate, self.token)

    def valid_cookie(self, candidate: str | None, port: int | None) -> bool:
        return _same(candidate, cookie_value_for(self.token, port))

    def valid_csrf(self, candidate: str | None) -> bool:
        return _same(candidate, self.csrf)


def _same(candidate: str | None, expected: str) -> bool:
    return bool(candidate) and secrets.compare_digest(candidate.encode(), expected.encode())
