"""`tools/call` on stdio without the SDK's per-request machinery, answered byte for byte as the SDK answers it.

Over stdio the SDK moves each request through its reader task, two memory streams, its JSON-RPC dispatcher (a
task, a cancel scope and an in-flight entry per request), on the 2026 era a runner and a connection per request,
the middleware chain (an OpenTelemetry span, the request-state boundary, ours) and its writer task: about as much
CPU as a small tool's own work (docs/performance.md). `FastCalls.take` sees each frame before the SDK does and
keeps a `tools/call` only when the SDK would run it as a plain call: the connection's era decided (by its first
request, as the SDK decides it), the envelope accepted (2026 era) or the handshake done (2025 era), the params
valid by the SDK's own validators, no `requestState`. Everything else (the handshake, tools/list, pings,
notifications, any request the SDK would refuse) goes to the SDK unchanged. A kept call is its own task, so
parallel calls stay parallel, and takes the SDK's steps: the refused-call audit (`CallAudit.around`),
`FleetServer.answer` (the tool in a worker thread), the SDK's result shaping (`ServerRunner._serialize`) and its
response model's JSON. A `notifications/cancelled` naming a kept call cancels it and leaves it unanswered, as the
dispatcher does, and still goes on to the SDK. Off with FLEETDECK_MCP_FASTPATH=0, and while an OpenTelemetry
tracer provider is installed (spans come from the SDK's middleware). tests/test_mcp_fastcall.py holds the two
paths' answers equal.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from importlib.metadata import version as installed_version
from typing import Any

import anyio
import anyio.abc
from opentelemetry.trace import ProxyTracerProvider, get_tracer_provider
from pydantic import ValidationError

try:  # the SDK's own steps, some of them private: present as used here in the releases VERIFIED names
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp.server.connection import Connection
    from mcp.server.request_state import RequestStateBoundary
    from mcp.server.runner import ServerRunner, _has_modern_envelope
    from mcp.shared.dispatcher import coerce_request_id
    from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
    from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params, handler_exception_to_error_data
    from mcp_types import ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
    from mcp_types import methods as sdk_methods
    from mcp_types.jsonrpc import jsonrpc_message_adapter
except ImportError:  # another release moved them: every request goes through the SDK (fast_calls)
    SDK_STEPS = False
else:
    SDK_STEPS = True

from fleet.repo.jsonbudget import Measured
from mcp_bridge.envelope import compact
from mcp_bridge.server import FleetServer, client_identity

log = logging.getLogger("fleetdeck.mcp")
SWITCH = "FLEETDECK_MCP_FASTPATH"  # "0": every request through the SDK
# The SDK releases whose answers tests/test_mcp_fastcall.py has held byte for byte equal on both paths. The path
# copies the SDK's steps, private ones among them, so a release not named here is served by the SDK alone
# until that test has been run against it and the release added.
VERIFIED = ("2.3.",)
METHOD = "tools/call"


@dataclass
class _Call:
    scope: anyio.CancelScope
    cancelled: bool = False


class FastCalls:
    """The `tools/call` requests of one stdio connection that fleetdeck answers itself; writes go to `wire`."""

    def __init__(self, server: FleetServer, lowlevel: Any, wire: Any, tasks: anyio.abc.TaskGroup) -> None:
        self.server, self.wire, self.tasks = server, wire, tasks
        self.runner = ServerRunner(lowlevel, None, None)  # its result shaping only, which reads the server alone
        self.params_type = lowlevel.get_request_handler(METHOD).params_type
        self.era: str | None = None  # "modern" (2026 envelope per request) or "legacy" (the handshake)
        self.handshake: Any = None  # legacy: the SDK's session of `initialize` (its client_params once accepted)
        self.running: dict[Any, _Call] = {}
        server.middleware.append(self._watch)

    async def _watch(self, ctx: Any, call_next: Any) -> Any:
        """SDK middleware: remembers the handshake's session (the client it declared, the version agreed)."""
        if ctx.method == "initialize":
            self.handshake = ctx.session
        return await call_next(ctx)

    def take(self, line: str) -> bool:
        """Whether this frame is answered here (else the SDK reads it)."""
        if self.era is None:
            message = _parsed(line)
            if isinstance(message, JSONRPCRequest):  # the SDK's rule for the connection's era
                modern = message.method != "initialize" and _has_modern_envelope(message.params)
                self.era = "modern" if modern else "legacy"
            return False
        if '"notifications/cancelled"' in line:
            self._cancel(_parsed(line))
            return False
        if (f'"{METHOD}"' not in line or not isinstance(get_tracer_provider(), ProxyTracerProvider)
                or not self._steps_known()):
            return False
        message = _parsed(line)
        if not isinstance(message, JSONRPCRequest) or message.method != METHOD:
            return False
        admitted = self._admit(message.params or {})
        if admitted is None:
            return False
        call = self.running[coerce_request_id(message.id)] = _Call(anyio.CancelScope())  # before the next frame
        self.tasks.start_soon(self._answer, message.id, call, *admitted)
        return True

    def _steps_known(self) -> bool:
        """Whether every server middleware is one whose step this path takes or stands in for: the SDK's span
        (none while no tracer provider is installed) and request-state boundary (no `requestState` admitted),
        the lazy toolkit, the audit of refused calls, its own watch. One added later (a limit, a policy) would
        be skipped here, so then the SDK answers every call."""
        kit = self.server.kit
        ours = (self._watch, self.server._kit_first, kit.call_audit if kit is not None else None)
        return all(isinstance(middleware, (OpenTelemetryMiddleware, RequestStateBoundary)) or middleware in ours
                   for middleware in self.server.middleware)

    def _admit(self, params: dict) -> tuple | None:
        """(protocol version, client params, typed params, params) when the SDK would run this call as is."""
        if params.get("requestState") is not None:
            return None
        if self.era == "modern":
            route = classify_inbound_request({"method": METHOD, "params": params})
            if isinstance(route, InboundLadderRejection):
                return None
            version = route.protocol_version
            client = Connection.from_envelope(version, route.client_info, route.client_capabilities).client_params
        else:
            session = self.handshake
            if _has_modern_envelope(params) or session is None or session.client_params is None:
                return None
            version, client = session.protocol_version, session.client_params
        try:
            sdk_methods.validate_client_request(METHOD, version, params)
            typed = self.params_type.model_validate(params, by_name=False)
        except (KeyError, ValidationError):
            return None
        return version, client, typed, params

    def _cancel(self, message: object) -> None:
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = cancelled_request_id_from_params(message.params)
            call = self.running.get(coerce_request_id(request_id)) if request_id is not None else None
            if call is not None:
                call.cancelled = True
                call.scope.cancel()

    async def _answer(self, request_id: Any, call: _Call, version: str, client: Any, typed: Any,
                      params: dict) -> None:
        who = client_identity(client)

        spliced: list[str] = []  # the structured content's JSON, when the slot stands in for it

        async def handle() -> dict:
            result = await self.server.answer(typed.name, typed.arguments or {}, who)
            data = result.structured_content
            if type(data) is dict and any(type(v) is Measured for v in data.values()):
                spliced.append(compact(data))
                result = result.model_copy(update={"structured_content": _SLOT})
            return self.runner._serialize(METHOD, version, result)

        try:
            with call.scope:
                try:
                    result = await self.server.toolkit().call_audit.around(params, who[0], handle)
                    message: JSONRPCResponse | JSONRPCError = JSONRPCResponse(jsonrpc="2.0", id=request_id,
                                                                              result=dict(result))
                except Exception as exc:  # what the dispatcher answers for a handler's exception
                    error = handler_exception_to_error_data(exc)
                    if error is None:
                        log.exception("handler for %r raised", METHOD)
                        error = ErrorData(code=0, message=str(exc))
                    message = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        finally:
            key = coerce_request_id(request_id)
            if self.running.get(key) is call:
                del self.running[key]
        if not call.cancelled:
            frame = message.model_dump_json(by_alias=True, exclude_unset=True)
            if spliced and isinstance(message, JSONRPCResponse):
                frame = frame.replace(_SLOT_JSON, spliced[0], 1)
            await self.wire.write(frame + "\n")


# A diff's answer (a Measured list of changes: commit.details, diff.refs) is a large tree the SDK would walk
# twice more (its result re-validation, the response's JSON) to write what its text mirror already holds:
# the SDK gets this slot as the structured content instead, and the frame gets the answer's compact JSON in
# its place. Inside a JSON string every quote is escaped, so the slot's bytes occur only where it was put.
# Byte for byte what the SDK writes for these answers (their values are str, int, bool, None, lists and
# dicts; tests/test_mcp_fastcall.py compares a large commit's frames).
_SLOT = {"io.fleetdeck/structured-content-slot": 0}
_SLOT_JSON = '{"io.fleetdeck/structured-content-slot":0}'


def _parsed(line: str) -> object:
    """The frame as the SDK's stdio reader parses it, or None where it would pass on the parse error."""
    try:
        return jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:
        return None


def verified(release: str) -> bool:
    """Whether the fast path's bytes are proven the SDK's on this `mcp` release."""
    return SDK_STEPS and release.startswith(VERIFIED)


def fast_calls(server: FleetServer, lowlevel: Any, wire: Any, tasks: anyio.abc.TaskGroup) -> FastCalls | None:
    """The connection's fast path, or None (the SDK answers everything) when FLEETDECK_MCP_FASTPATH=0 turns it
    off or the installed `mcp` is not a release the equality test has verified."""
    if os.environ.get(SWITCH) == "0" or not verified(installed_version("mcp")):
        return None
    return FastCalls(server, lowlevel, wire, tasks)
