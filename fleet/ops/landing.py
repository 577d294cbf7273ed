"""Landing codes: the single-use, short-lived secret a dashboard link carries (`/?code=…`).

A code opens one browser session on the running dashboard and nothing else; it is not the MCP bearer token
and nothing is derived from either. Codes live in the index (so `fleetdeck dashboard link` in another process
can hand the person a fresh link while `serve` runs), as SHA-256 digests with their expiry: the index holds
no usable code. Redeeming deletes the row in the same statement that finds it, so a code opens at most one
session even when two requests race.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.procinfo import worker_alive

LANDING_TTL_S = 600
PREFIX = "landing:"
SERVE_URL, SERVE_WORKER = "serve_url", "serve_worker"  # where the running `serve` says it is, and which one


def _key(code: str) -> str:
    return PREFIX + hashlib.sha256(code.encode("utf-8", "replace")).hexdigest()


def issue(index: Index, ttl_s: float = LANDING_TTL_S) -> str:
    """A fresh code, valid for `ttl_s` seconds and one use; expired ones are swept as it is stored."""
    code = secrets.token_urlsafe(24)
    now = time.time()
    index.add_meta_expiring(PREFIX, _key(code), now + ttl_s, now)
    return code


def redeem(index: Index, code: str | None) -> bool:
    """Whether `code` was a live code; it is gone afterwards either way (used up, or expired)."""
    if not code:
        return False
    until = index.take_meta(_key(code))
    return until is not None and float(until) >= time.time()


def running_dashboard(index: Index) -> str | None:
    """The base URL of the `serve` that is running over this index, or None."""
    url, worker = index.meta_text(SERVE_URL), index.meta_text(SERVE_WORKER)
    if not url or not worker or not worker_alive(worker):
        return None
    return url.rstrip("/")


def link(base_url: str, code: str) -> str:
    return f"{base_url.rstrip('/')}/?code={code}"


def fresh_link(index: Index) -> str:
    """A new landing link on the running dashboard (`fleetdeck dashboard link`)."""
    base = running_dashboard(index)
    if base is None:
        raise FleetError("NOT_FOUND", "no dashboard is running over this index: start `fleetdeck serve`")
    return link(base, issue(index))
