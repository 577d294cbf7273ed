"""Per-agent credentials, kept in the index (`agents` table): one random secret per agent name, shown once
when issued and stored only as its SHA-256 (a 256-bit random secret needs no slow hash: nothing to guess).

The same secret is an HTTP bearer token for `/mcp` and `FLEETDECK_AGENT_TOKEN` for a stdio MCP config.
Revoking deletes the row, so every process's next lookup fails at once. `last_used_at` is refreshed at most
once a minute per agent (a write per tool call would cost more than the call).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time

from fleet.agents.identity import NAME_PATTERN, RESERVED
from fleet.errors import FleetError
from fleet.index.pool import IndexPool
from fleet.index.store import Index
from fleet.timespec import iso

TOKEN_PREFIX = "fdk_"
ENV_VAR = "FLEETDECK_AGENT_TOKEN"
TOUCH_EVERY = 60.0
TOUCH_WAIT_MS = 100  # the longest a lookup waits on another process's write lock to record a use


def _digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def check_name(name: object) -> str:
    """A credential's name: 1..64 of `a-z 0-9 . _ -`, starting with a letter or digit, not a reserved word."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise FleetError("BAD_ARGUMENT", f"agent name {str(name)[:80]!r} must be 1..64 characters of a-z 0-9 . _ - "
                                         "starting with a letter or digit (policy rules name agents by it)")
    if name in RESERVED:
        raise FleetError("BAD_ARGUMENT", f"{name!r} is reserved ({', '.join(sorted(RESERVED))} name the "
                                         "unauthenticated clients and the person); choose another name")
    return name


def add(index: Index, name: str) -> dict:
    """Issue a credential for `name`: `{name, token, created_at}`; the token is never stored or shown again."""
    name = check_name(name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = time.time()
    if not index.agents.add(name, _digest(token), now):
        raise FleetError("AGENT_EXISTS", f"agent {name!r} already has a credential; `fleetdeck agents revoke "
                                         f"{name}` first to issue a new one") from None
    return {"name": name, "token": token, "created_at": iso(now)}


def list_agents(index: Index) -> list[dict]:
    """Every agent with a credential: name, created_at, last_used_at (None: never used). Never the secret."""
    return [{"name": n, "created_at": iso(c), "last_used_at": iso(u) if u is not None else None}
            for n, c, u in index.agents.listed()]


def revoke(index: Index, name: str) -> dict:
    """Delete `name`'s credential: it stops working at the next lookup in every process."""
    if not index.agents.revoke(name):
        raise FleetError("NOT_FOUND", f"no agent {str(name)[:80]!r} has a credential (see `fleetdeck agents list`)")
    return {"name": name, "revoked": True}


def authenticate(index: Index, token: object, *, touch: bool = True) -> str | None:
    """The agent name a presented secret belongs to, or None. Records the use (best-effort, throttled)."""
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or len(token) > 256:
        return None
    found = index.agents.by_hash(_digest(token))
    if found is None:
        return None
    name, used = found
    now = time.time()
    if touch and (used is None or now - used >= TOUCH_EVERY):
        index.agents.touch(name, now, TOUCH_WAIT_MS)  # lock held elsewhere: the next use records it
    return name


class Lookup:
    """`Lookup(db_path)(token)`: the agent a bearer credential belongs to, for an HTTP guard (any thread;
    each gets its own index handle, opened on first use). None for anything that is not a live credential."""

    def __init__(self, db_path: str | os.PathLike[str] | None) -> None:
        self.db_path = db_path
        self._pool: IndexPool | None = None
        self._lock = threading.Lock()

    def __call__(self, token: object) -> str | None:
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        with self._lock:
            if self._pool is None:
                self._pool = IndexPool(self.db_path)
        return authenticate(self._pool.get(), token)
