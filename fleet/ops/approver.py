"""The approver token: the credential a person's own scripts use to approve or reject over HTTP.

It is not the dashboard's token, which MCP clients hold for `/mcp`: an agent configured with that token can
read the dashboard's API but never decide a proposal. The token lives beside the index (`<db>.approver`,
mode 0600, created on first use) and `fleetdeck proposals approver-token` prints it. It keeps out agents
that talk to fleetdeck over MCP only; an agent with a shell as the same user can read it, as it could run
`fleetdeck proposals approve` itself (docs/security.md).
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path


def token_path(db_path: str | os.PathLike[str]) -> Path:
    return Path(str(db_path) + ".approver")


def approver_token(db_path: str | os.PathLike[str]) -> str:
    """The approver token for this index, made (0600, never world-readable) when there is none yet."""
    path = token_path(db_path)
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_text(encoding="ascii").strip()
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(value + "\n")
    return value


def is_approver(db_path: str | os.PathLike[str], presented: str | None) -> bool:
    """Whether `presented` is this index's approver token (constant-time; no token file means no)."""
    if not presented:
        return False
    try:
        expected = token_path(db_path).read_text(encoding="ascii").strip()
    except OSError:
        return False
    return bool(expected) and hmac.compare_digest(expected.encode(), presented.strip().encode())
