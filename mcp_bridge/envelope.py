"""How every tool answers: structured content mirrored as compact JSON text, failures as `isError` results.

A failure is fleet.errors.envelope, `{"error": {"code", "message"}}`, with a stable code (a fleet.errors.Code, the
bridge's own `UNKNOWN_TOOL`, `INDEX_BUSY` and `INTERNAL` among them), built here rather than by the SDK so
clients can branch on the code.

A client whose published source hands its model the structured content alone whenever a successful result
has one (STRUCTURED_READERS) gets a large answer once: its text block says where the answer is instead of
mirroring it (`for_client`). Every other client, and every failure, keeps the full mirror.
"""

from __future__ import annotations

import logging

from mcp.types import CallToolResult, TextContent
from mcp_types import ErrorData, JSONRPCError
from pydantic import BaseModel, ConfigDict

from fleet.errors import FleetError, envelope
from fleet.index.store import is_busy
from fleet.repo.jsonbudget import encode_answer as compact  # the text of every answer

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


# Clients (declared name -> first version) that read `structuredContent` alone when a result carries it:
# Claude Code forwards JSON.stringify(structuredContent) to the model and drops the text (since 2.0.21:
# anthropics/claude-code#9962, #79944 on 2.1.280); Codex serialises `structured_content` when it is not null
# and never reads `content` then (openai/codex, codex-rs/protocol/src/models.rs,
# `From<&CallToolResult> for FunctionCallOutputPayload`; its MCP client declares `codex-mcp-client`).
# Gemini CLI reads `content` only and the official Python client hands both to its caller: they get both.
STRUCTURED_READERS = {"claude-code": (2, 0, 21), "codex-mcp-client": (0,)}
# Answers below this size are mirrored for every client (the copy costs nothing that matters).
MIRROR_MIN_BYTES = 16 * 1024


def _version(text: str | None) -> tuple[int, ...]:
    """`2.1.280` as (2, 1, 280); the numeric prefix of each part, () when there is none."""
    parts = []
    for part in (text or "").split("."):
        digits = part[:len(part) - len(part.lstrip("0123456789"))]
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def reads_structured_only(client: str | None, version: str | None) -> bool:
    """Whether the declared client hands its model `structuredContent` and never the text beside it."""
    first = STRUCTURED_READERS.get((client or "").strip().lower())
    return first is not None and _version(version) >= first


def for_client(result: CallToolResult, client: str | None, version: str | None) -> CallToolResult:
    """The result as this client should get it: a large successful answer's text mirror replaced by a line
    saying the answer is the structured content, for a client that reads nothing else; otherwise unchanged."""
    if result.is_error or result.structured_content is None or not reads_structured_only(client, version):
        return result
    size = sum(len(c.text) for c in result.content if isinstance(c, TextContent))
    if size < MIRROR_MIN_BYTES:
        return result
    note = compact({"answer": "structuredContent", "text_mirror": "omitted for this client", "bytes": size})
    return result.model_copy(update={"content": [TextContent(type="text", text=note)]})


def success(data: dict) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=compact(data))], structured_content=data)


def failure(code: str, message: str) -> CallToolResult:
    body = envelope(code, message)
    return CallToolResult(content=[TextContent(type="text", text=compact(body))], structured_content=body,
                          is_error=True)


def frame_limit_error(request_id: int | str | None) -> JSONRPCError:
    """The JSON-RPC error for a frame over MAX_FRAME (nothing of it was parsed; `data.code` is LIMIT)."""
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=INVALID_REQUEST, message=f"JSON-RPC frame larger than {MAX_FRAME} bytes; it was not read",
        data={"code": "LIMIT", "max_bytes": MAX_FRAME}))


def failure_from(exc: BaseException, tool: str) -> CallToolResult:
    """The error result for an exception raised by a tool body; unexpected ones are logged, not echoed."""
    if isinstance(exc, FleetError):  # fleet.git's GitError included
        return failure(exc.code, exc.message)
    if isinstance(exc, ValueError):
        return failure("BAD_ARGUMENT", str(exc))
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return failure("NOT_FOUND", f"{tool}: {exc.strerror or exc}")
    if is_busy(exc):
        return failure("INDEX_BUSY", f"{tool}: the index is write-locked by another process; retry shortly")
    log.exception("tool %s failed unexpectedly", tool)
    return failure("INTERNAL", f"{tool} failed unexpectedly ({exc.__class__.__name__}); see the server log")
