"""How every tool answers: structured content mirrored as compact JSON text, failures as `isError` results.

A failure is `{"error": {"code", "message"}}` with a stable code (fleet.errors.CODES plus the bridge's own
`UNKNOWN_TOOL`, `INDEX_BUSY` and `INTERNAL`), built here rather than by the SDK so clients can branch on the code.
"""

from __future__ import annotations

import logging

from mcp.types import CallToolResult, TextContent
from mcp_types import ErrorData, JSONRPCError
from pydantic import BaseModel, ConfigDict

from fleet.errors import FleetError
from fleet.index.store import is_busy
from fleet.git.run import GitError
from fleet.repo.shape import encode_answer as compact  # the text of every answer

log = logging.getLogger("fleetdeck.mcp")
# The largest JSON-RPC frame read, on stdio (mcp_bridge/stdio.py) and over HTTP (mcp_bridge/http.py).
MAX_FRAME = 8 * 1024 * 1024
INVALID_REQUEST = -32600
# `_meta` key of a successful result whose bookkeeping (agent presence) failed: [{code, message}].
DEGRADED_KEY = "io.fleetdeck/degraded"


class Out(BaseModel):
    """Base of every tool's output model: the listed fields are the contract, fleet/ may add more."""

    model_config = ConfigDict(extra="allow", defer_build=True)


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorResult(BaseModel):
    error: ErrorBody


def success(data: dict) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=compact(data))], structured_content=data)


def failure(code: str, message: str) -> CallToolResult:
    body = {"error": {"code": code, "message": message}}
    return CallToolResult(content=[TextContent(type="text", text=compact(body))], structured_content=body,
                          is_error=True)


def frame_limit_error(request_id: int | str | None) -> JSONRPCError:
    """The JSON-RPC error for a frame over MAX_FRAME (nothing of it was parsed; `data.code` is LIMIT)."""
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=INVALID_REQUEST, message=f"JSON-RPC frame larger than {MAX_FRAME} bytes; it was not read",
        data={"code": "LIMIT", "max_bytes": MAX_FRAME}))


def failure_from(exc: BaseException, tool: str) -> CallToolResult:
    """The error result for an exception raised by a tool body; unexpected ones are logged, not echoed."""
    if isinstance(exc, FleetError):
        return failure(exc.code, exc.message)
    if isinstance(exc, GitError):
        return failure(exc.code, exc.message)
    if isinstance(exc, ValueError):
        return failure("BAD_ARGUMENT", str(exc))
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return failure("NOT_FOUND", f"{tool}: {exc.strerror or exc}")
    if is_busy(exc):
        return failure("INDEX_BUSY", f"{tool}: the index is write-locked by another process; retry shortly")
    log.exception("tool %s failed unexpectedly", tool)
    return failure("INTERNAL", f"{tool} failed unexpectedly ({exc.__class__.__name__}); see the server log")
