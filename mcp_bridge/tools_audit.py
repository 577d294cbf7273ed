"""The audit log in the bridge: one entry per tool call (the Toolkit wraps every tool with `audited`), and
`audit.tail`, so an agent can show a person what it (or any agent) asked fleetdeck for.

Opening the log happens when the server is built: a configured signing key that cannot be used stops
`fleetdeck mcp` and `fleetdeck serve` there (fail closed). Appending is best-effort: it never costs an answer.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from typing import TYPE_CHECKING, Annotated, Any, Awaitable, Callable, Mapping

from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ToolAnnotations
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR
from pydantic import Field, ValidationError

from fleet import audit
from fleet.audit.read import newest
from fleet.ops.catalog import risk_of
from fleet.agents.identity import declared_name, unknown
from mcp_bridge.bridge import Who, identity, touched
from mcp_bridge.envelope import DEGRADED_KEY, Out

if TYPE_CHECKING:
    from mcp_bridge.toolkit import Toolkit

PREVIEW = "operation.preview."
log = logging.getLogger("fleetdeck.mcp")
TAIL_MAX = 200
# One per `tools/call` the server receives (set by CallAudit): the tool wrapper marks it when it writes the
# call's entry, so a call refused before any tool runs is recorded once, by CallAudit, and no call twice.
call_mark: contextvars.ContextVar[dict | None] = contextvars.ContextVar("fleetdeck_audit_call", default=None)
# The ASGI scope key under which the HTTP refusal recorder (mcp_bridge/http.py) learns that the JSON-RPC
# layer saw the request (then that layer's entry is the one).
HTTP_MARK = "fleetdeck.audit.dispatched"
JSONRPC_CODES = {PARSE_ERROR: "PARSE_ERROR", INVALID_REQUEST: "INVALID_REQUEST", METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
                 INVALID_PARAMS: "INVALID_PARAMS", INTERNAL_ERROR: "INTERNAL"}


class AuditTail(Out):
    entries: list[dict]
    audit: dict
    truncated: bool
    omitted_count: int | None


def audited(kit: "Toolkit", name: str, annotations: ToolAnnotations | None,
            call: Callable[..., CallToolResult]) -> Callable[..., CallToolResult]:
    """`call`, plus one audit entry after it: tool, caller's identity and declared name, repo, argument
    fingerprint, result."""
    risk = "read" if annotations is not None and annotations.read_only_hint else "write"
    op = name.removeprefix(PREVIEW) if name.startswith(PREVIEW) else None

    def with_audit(**kwargs: object) -> CallToolResult:
        started = time.perf_counter()
        result = call(**kwargs)
        try:
            target = getattr(kit, "audit", None)
            if target is not None:
                mark = call_mark.get()
                if mark is not None:
                    mark["recorded"] = True
                paths = touched.get() or []
                code = "ok"
                if result.is_error:
                    code = str(((result.structured_content or {}).get("error") or {}).get("code") or "error")
                who = identity.get()
                entry = target.record("tool_call", tool=name, op=op, agent=who.agent if who else None,
                                      agent_declared=who.declared if who else None,
                                      repo_path=paths[0] if paths else None, args=kwargs,
                                      risk=_op_risk(op, kwargs) if op else risk, result=code,
                                      duration_ms=(time.perf_counter() - started) * 1000,
                                      summary=f"{name} {code}" + (f" ({len(paths)} repos)" if len(paths) > 1
                                                                  else ""))
                if entry is None and target.enabled:
                    _degraded(result, target.status())
        except Exception:  # bookkeeping never costs an answer
            log.exception("audit entry for %s not written", name)
        return result

    return with_audit


class CallAudit:
    """Server middleware (the SDK's public `MCPServer.middleware`, which wraps every inbound request before
    its params are validated): a `tools/call` that never reaches a tool's wrapper — an unknown tool, arguments
    over the input cap, unknown or invalid arguments, params the SDK itself rejects, a request before the
    handshake — still appends one entry, with the error code as its result and the arguments as sent
    fingerprinted (none when they are not an object)."""

    def __init__(self, kit: "Toolkit") -> None:
        self.kit = kit

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        scope = getattr(getattr(ctx, "request", None), "scope", None)
        if isinstance(scope, dict) and isinstance(scope.get(HTTP_MARK), dict):
            scope[HTTP_MARK]["dispatched"] = True
        return await self.around(ctx.params, _declared_name(ctx), functools.partial(call_next, ctx))

    async def around(self, params: object, declared: str | None, call: Callable[[], Awaitable[Any]]) -> Any:
        """`call()` (the rest of a `tools/call`'s handling, answering its wire result), with the refused
        call's entry when no tool wrapper wrote one; stdio's fast path (mcp_bridge/fastcall.py) uses it too."""
        mark = {"recorded": False}
        token = call_mark.set(mark)
        started = time.perf_counter()
        code = "INTERNAL"
        try:
            result = await call()
            code = _wire_code(result)
            return result
        except MCPError as exc:
            code = JSONRPC_CODES.get(exc.error.code, f"JSONRPC_{exc.error.code}")
            raise
        except ValidationError:
            code = "INVALID_PARAMS"
            raise
        finally:
            call_mark.reset(token)
            if not mark["recorded"]:
                params = params if isinstance(params, Mapping) else {}
                refused(self.kit, params.get("name"), params.get("arguments"), code,
                        unknown(declared) if declared is not None else None, (time.perf_counter() - started)
                        * 1000, agent_declared=declared_name(declared) if declared is not None else None)


def refused(kit: "Toolkit", name: object, arguments: object, code: str, agent: str | None = None,
            duration_ms: float | None = None, how: str = "refused", unauthenticated: bool = False,
            agent_declared: str | None = None) -> None:
    """The entry of a tool call refused before its tool ran (never raises: bookkeeping beside an answer).
    An `unauthenticated` one (no credential passed the guards) is folded: one entry, then one counted entry
    per window (fleet/audit/fold.py), so that anything on the machine cannot flood the log. Nothing
    authenticated such a call as an agent's: its `agent` is `unknown:<declared>`."""
    target = getattr(kit, "audit", None)
    if target is None:
        return
    try:
        tool = name if isinstance(name, str) else None
        op = tool.removeprefix(PREVIEW) if tool and tool.startswith(PREVIEW) else None
        append = functools.partial(target.fold, "unauthenticated") if unauthenticated else target.record
        append("tool_call", tool=tool, op=op, agent=agent, agent_declared=agent_declared,
               risk=kit.risks.get(tool or ""),
                      args=dict(arguments) if isinstance(arguments, Mapping) else None, result=code,
                      duration_ms=duration_ms, summary=f"{tool or 'a tool call'} {how}: {code}")
    except Exception:
        log.exception("audit entry for a refused call not written")


def _wire_code(result: object) -> str:
    """`ok`, or the error code of a tools/call result as the SDK put it on the wire."""
    if not isinstance(result, Mapping) or not result.get("isError"):
        return "ok"
    error = (result.get("structuredContent") or {}).get("error") or {}
    return str(error.get("code") or "error") if isinstance(error, Mapping) else "error"


def _declared_name(ctx: Any) -> str | None:
    """The client's self-declared name, when the session knows it (not before the handshake)."""
    try:
        name = ctx.session.client_params.client_info.name
    except (AttributeError, LookupError, ValueError):
        return None
    return name if isinstance(name, str) else None


def _op_risk(op: str, args: dict) -> str:
    """A write tool's entry carries the risk level the person sees for that proposal (the catalog's)."""
    try:
        return risk_of(op, args)
    except Exception:  # an unknown op or odd arguments: the call itself already answered with the error
        return "write"


def _degraded(result: CallToolResult, status: dict) -> None:
    """Say in the answer's `_meta` that this call is missing from the audit log (the answer itself stands)."""
    error = (status.get("degraded") or {}).get("error") or "see the server log"
    problem = {"code": "AUDIT_DEGRADED", "message": f"the audit log could not record this call ({error})"}
    meta = dict(result.meta or {})
    meta[DEGRADED_KEY] = [*(meta.get(DEGRADED_KEY) or []), problem]
    result.meta = meta


def register(kit: "Toolkit") -> None:
    kit.audit = audit.setup(kit.bridge.db_path)  # type: ignore[attr-defined]  # raises on a bad key: fail closed
    bridge = kit.bridge

    @kit.tool("audit.tail", AuditTail, "Recent audit entries")
    def audit_tail(
        limit: Annotated[int, Field(ge=1, le=TAIL_MAX, description="most entries to return (1..200)")] = 50,
        mine: Annotated[bool, Field(description="only calls made under your own identity (your agent "
                                                "credential's name, or unknown:<your declared name>)")] = False,
        event: Annotated[str | None, Field(max_length=64, description="tool_call, gap, torn_line_set_aside, ...")]
        = None,
        tool: Annotated[str | None, Field(max_length=200, description="only calls of this tool")] = None,
        repo: Annotated[str | None, Field(min_length=1, max_length=4096,
                                          description="only entries about this repository")] = None,
        result: Annotated[str | None, Field(max_length=200, description="ok, or an error code")] = None,
    ) -> dict:
        """The audit log's newest entries, newest first: who (the agent's identity and the name its client
        declared) called which tool, on which repo (a keyed fingerprint, not the path), with what result and
        when. Arguments are fingerprinted, never stored. The log is hash-chained; `fleetdeck audit verify` checks it."""
        target = kit.audit  # type: ignore[attr-defined]
        info = target.status()
        if not target.enabled:
            return {"entries": [], "audit": info, "truncated": False, "omitted_count": 0}
        fingerprint = target.fingerprint("repo", bridge.resolve(repo).path) if repo is not None else None
        found, omitted = newest(target.dir, limit, event=event, tool=tool, repo=fingerprint, result=result,
                                agent=(identity.get() or Who(unknown(None), None, None)).agent if mine else None)
        entries = [{k: v for k, v in e.items() if k != "sig"} for e in found]
        return {"entries": entries, "audit": info, "truncated": omitted > 0, "omitted_count": omitted}
