"""The one error type every fleetdeck surface (CLI, dashboard, MCP) turns into a structured answer, the table
of the codes it carries, and the one envelope every surface answers a failure with.

`code` is a stable string clients may branch on, always a `Code` (tests/test_error_codes.py checks every code
raised in fleet/, web/ and mcp_bridge/ against the table); `message` is for people; `details` is what a
failure carries for the code that handles it (git's output, what a failed run did before it failed), never
part of the envelope.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Code(StrEnum):
    """Every error code, with the HTTP status the dashboard answers it with (MCP answers each as an `isError`
    result, the CLI as exit status 1)."""

    status: int

    def __new__(cls, value: str, status: int = 400) -> Code:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        return member

    # reading the fleet and its repositories
    REPO_NOT_IN_FLEET = "REPO_NOT_IN_FLEET"
    BAD_REF = "BAD_REF"
    BAD_PATH = "BAD_PATH"
    BAD_ARGUMENT = "BAD_ARGUMENT"
    NOT_FOUND = "NOT_FOUND", 404
    LIMIT = "LIMIT"
    TIMEOUT = "TIMEOUT"
    CONFLICT = "CONFLICT"
    NO_INDEX = "NO_INDEX"
    # running git (fleet/git: GitError)
    GIT_FAILED = "GIT_FAILED"
    NO_GIT = "NO_GIT"
    # the write side (fleet/ops)
    POLICY_DENIED = "POLICY_DENIED"
    POLICY_INVALID = "POLICY_INVALID"
    NOT_PENDING = "NOT_PENDING", 409
    STALE = "STALE", 409
    CONFIRM_REQUIRED = "CONFIRM_REQUIRED"  # a high-risk approval without its explicit confirmation (ops/confirm)
    # the audit log: it cannot record a decision or an execution (refused), or cannot be used at all
    AUDIT_UNAVAILABLE = "AUDIT_UNAVAILABLE", 503
    AUDIT_UNUSABLE = "AUDIT_UNUSABLE"
    AUDIT_KEY = "AUDIT_KEY"
    # who decides (web/guards.py decision_actor, the CLI's terminal confirmation) and the dashboard's links
    BEARER_CANNOT_DECIDE = "BEARER_CANNOT_DECIDE", 403
    DECISION_KEY_REQUIRED = "DECISION_KEY_REQUIRED", 403
    LANDING_REFUSED = "LANDING_REFUSED", 401
    NO_TERMINAL = "NO_TERMINAL"
    # agent credentials (fleet/agents) and the HTTP surface's own refusals (web/guards.py)
    AGENT_EXISTS = "AGENT_EXISTS"
    UNAUTHORIZED = "UNAUTHORIZED", 401
    HOST_REFUSED = "HOST_REFUSED", 421
    ORIGIN_REFUSED = "ORIGIN_REFUSED", 403
    CSRF_REFUSED = "CSRF_REFUSED", 403
    HTTP_ERROR = "HTTP_ERROR"  # another refusal of Starlette's routing, answered with its own status
    UNAVAILABLE = "UNAVAILABLE", 503  # the MCP bridge of `serve` could not start
    # passkey confirmation of decisions (fleet/ops/passkeys.py)
    PASSKEY_REQUIRED = "PASSKEY_REQUIRED", 403
    PASSKEY_REFUSED = "PASSKEY_REFUSED", 403
    PASSKEY_NEEDS_LOCALHOST = "PASSKEY_NEEDS_LOCALHOST", 403
    # a desktop notification the system's notification service did not take (fleet/notify/desktop.py)
    NOTIFY_FAILED = "NOTIFY_FAILED"
    # team mode (fleet/team): the hub cannot be reached, or refused a statement (UNAVAILABLE: no psycopg)
    HUB_UNREACHABLE = "HUB_UNREACHABLE", 503
    HUB_REFUSED = "HUB_REFUSED", 502
    NO_APPROVER = "NO_APPROVER", 403   # a hub dashboard started without an approver key (`serve --team --key --as`)
    # the MCP bridge's own (mcp_bridge/envelope.py, mcp_bridge/server.py)
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INDEX_BUSY = "INDEX_BUSY", 503
    INTERNAL = "INTERNAL", 500


def envelope(code: str, message: str) -> dict[str, dict[str, str]]:
    """`{"error": {"code", "message"}}`: how every surface answers a failure (HTTP body, MCP result)."""
    return {"error": {"code": code, "message": message}}


class FleetError(Exception):
    """A request fleetdeck refuses or cannot answer, with a stable code (a `Code`)."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details if details is not None else {}

    @property
    def status(self) -> int:
        """The HTTP status the dashboard answers this error with."""
        return Code(self.code).status

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}

    @classmethod
    def from_git(cls, exc: FleetError) -> FleetError:
        """A git failure (fleet.git's GitError) as a plain FleetError of its code and message: out of the git
        layer, so an `except GitError` further up does not take it for one of its own git calls."""
        return cls(exc.code, exc.message)
