"""The one error type every fleetdeck surface (CLI, dashboard, MCP) turns into a structured answer.

`code` is a stable string clients may branch on; `message` is for people.
"""

from __future__ import annotations

from fleet.git.spawn import GitError

CODES = frozenset({
    "REPO_NOT_IN_FLEET", "BAD_REF", "BAD_PATH", "BAD_ARGUMENT", "GIT_FAILED", "NOT_FOUND",
    "LIMIT", "TIMEOUT", "CONFLICT", "NO_GIT", "NO_INDEX",
    # the write side (fleet/ops)
    "POLICY_DENIED", "POLICY_INVALID", "NOT_PENDING", "STALE",
    # the audit log cannot record a decision or an execution: it is refused (fleet/audit, docs/audit.md)
    "AUDIT_UNAVAILABLE",
    # who decides (web/guards.py decision_actor, the CLI's terminal confirmation) and the dashboard's links
    "BEARER_CANNOT_DECIDE", "DECISION_KEY_REQUIRED", "LANDING_REFUSED", "NO_TERMINAL",
    # agent credentials (fleet/agents)
    "AGENT_EXISTS", "UNAUTHORIZED",
    # passkey confirmation of decisions (fleet/ops/passkeys.py)
    "PASSKEY_REQUIRED", "PASSKEY_REFUSED", "PASSKEY_NEEDS_LOCALHOST",
    # a desktop notification the system's notification service did not take (fleet/notify/desktop.py)
    "NOTIFY_FAILED",
})


class FleetError(Exception):
    """A request fleetdeck refuses or cannot answer, with a stable code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}

    @classmethod
    def from_git(cls, exc: GitError) -> "FleetError":
        return cls(exc.code, exc.message)
