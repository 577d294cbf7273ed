"""What every tool call shares: the index (one connection per worker thread) and the repos it touched.

Sync tools run in AnyIO worker threads; SQLite connections are not shared between them. The repos a call
resolves are collected in a context variable the server reads after the call (agent presence), next to the
client's self-declared name.
"""

from __future__ import annotations

import contextvars
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from fleet.agents.credentials import ENV_VAR, authenticate
from fleet.git.layout import Found
from fleet.errors import FleetError
from fleet.index.pool import IndexPool
from fleet.index.store import Index, default_db_path
from fleet.index.target import resolve_target

touched: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("fleetdeck_touched", default=None)
caller: contextvars.ContextVar[str | None] = contextvars.ContextVar("fleetdeck_caller", default=None)
# The calling MCP session: {session (a key unique to this connection), version, pids (on stdio: the
# processes above fleetdeck, the client among them)}; agents.presence marks "you" by it, not by name.
caller_session: contextvars.ContextVar[dict | None] = contextvars.ContextVar("fleetdeck_session", default=None)


@dataclass(frozen=True)
class Who:
    """The caller of one tool call: its identity (a credential's name, or `unknown:<declared>`), the name its
    client declared, and its MCP session (None when the transport has none to tell clients apart)."""

    agent: str
    declared: str | None
    session: str | None


identity: contextvars.ContextVar[Who | None] = contextvars.ContextVar("fleetdeck_identity", default=None)
# The repositories a tool body resolved, in order (the toolkit names the first in the answer's `repo`).
resolved: contextvars.ContextVar[list[Found] | None] = contextvars.ContextVar("fleetdeck_resolved", default=None)


class Bridge:
    """The bridge's view of the fleet: an index path and per-thread handles on it.

    `create=False` (`fleetdeck mcp`): a missing index is not created; every call that needs it answers
    NO_INDEX until `fleetdeck scan ROOT` has made it, then the bridge opens it (no restart needed).
    """

    def __init__(self, db_path: str | None = None, *, create: bool = True) -> None:
        self.db_path = db_path
        self._path = Path(db_path) if db_path else default_db_path()
        self._lock = threading.Lock()
        self._pool: IndexPool | None = None
        if create or self._path.exists():
            self._pool = IndexPool(self._path)  # creates and migrates once, up front, not inside a tool call

    def has_index(self) -> bool:
        return self._pool is not None or self._path.exists()

    def index(self) -> Index:
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    if not self._path.exists():
                        raise FleetError("NO_INDEX", f"no index yet: run `fleetdeck scan ROOT` (looked for "
                                                     f"{self._path})")
                    self._pool = IndexPool(self._path)
                pool = self._pool
        return pool.get()

    def resolve(self, repo: str) -> Found:
        """The repository `repo` names (scoped to the fleet); remembered for the call's presence record."""
        found = resolve_target(self.index(), repo)
        seen = touched.get()
        if seen is not None and found.path not in seen:
            seen.append(found.path)
        answered = resolved.get()
        if answered is not None:
            answered.append(found)
        return found


def stdio_start(db_path: str | None) -> tuple[Bridge, str | None]:
    """What `fleetdeck mcp` opens and checks before it imports the SDK (about a second of CPU), so that a
    refusal stops it at once and before it answers anything (fail closed): the index (an unusable one is the
    error; a missing one stays missing: NO_INDEX per call) and its policy, FLEETDECK_AGENT_TOKEN a live
    credential (then the bridge's identity), and the audit log. Returns the bridge and that credential."""
    from fleet import audit

    bridge = Bridge(db_path, create=False)
    if bridge.has_index():
        from fleet.ops.policy import adopt_index_policy

        adopt_index_policy(bridge.index())  # over the demo's index, the demo's policy
    token = os.environ.pop(ENV_VAR, None)  # not passed on to git, hooks or anything else this process runs
    if token and authenticate(bridge.index(), token) is None:
        raise FleetError("UNAUTHORIZED", f"{ENV_VAR} is not a live agent credential (revoked, mistyped, or "
                                         "issued for another index); issue one with `fleetdeck agents add "
                                         "NAME`, or remove the variable to connect unauthenticated")
    audit.setup(db_path)
    return bridge, token or None
