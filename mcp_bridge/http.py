"""The same MCP server over streamable HTTP, for `fleetdeck serve` to mount at `/mcp`.

`http_endpoint()` gives the ASGI app (it answers `/mcp` only, with the SDK's Host/Origin checks against DNS
rebinding) and the session manager's `run()` the host app must enter in its own lifespan (mounted apps'
lifespans never run); a body over the frame cap gets the same JSON-RPC `LIMIT` error as on stdio. The token
is checked by the host app: the dashboard's guards (web/guards.py), the one token check of the HTTP surface;
they also take an agent's own credential (fleet/agents) on `/mcp`, and the server reads who it was from the
request's scope (mcp_bridge/server.py).
`standalone_app()` serves `/mcp` alone behind those same guards. `RefusalAudit`, outside the guards, gives a
tool call refused before the JSON-RPC layer saw it (no or a wrong token, a foreign Host or Origin, a body over
the cap, the SDK's own HTTP-level checks) its audit entry; one that no credential authenticated (the guards'
authentication left no `auth` in the scope) is folded into counted entries instead.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet.agents.credentials import Lookup
from mcp_bridge.envelope import MAX_FRAME, frame_limit_error
from mcp_bridge.server import FleetServer
from mcp_bridge.toolkit import Toolkit
from mcp_bridge.tools_audit import HTTP_MARK, JSONRPC_CODES, refused
from web.guards import ResponseRewriter, guards
from web.security import Guard, allowed_hosts_for

LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class FrameLimitAnswer(ResponseRewriter):
    """The SDK refuses a body over MAX_FRAME with a plain-text 413; agents get the same JSON-RPC error
    (`data.code: LIMIT`) as on stdio instead."""

    def rewrite(self, scope: Scope, send: Send) -> Send:
        replaced = False

        async def answer(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                replaced = True
                response = Response(frame_limit_error(None).model_dump_json(by_alias=True), status_code=413,
                                    media_type="application/json")
                await response(scope, _no_body, send)
            elif not replaced:  # the SDK's own 413 body is dropped
                await send(message)

        return answer


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


class RefusalAudit:
    """ASGI middleware for the host app, outermost (before the guards): a `tools/call` POSTed to `/mcp` that
    is answered with an HTTP error before the JSON-RPC layer dispatched it gets one audit entry (the tool's
    name, the arguments' fingerprint, the refusal's code). The body is read here (at most MAX_FRAME bytes,
    as the SDK would) and handed on unchanged; a body over the cap is named only by the `Mcp-Method` and
    `Mcp-Name` headers of a 2026-era client."""

    def __init__(self, app: ASGIApp, kit: Toolkit, path: str = "/mcp") -> None:
        self.app = app
        self.kit = kit
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        read: list[Message] = []
        size = 0
        while size <= MAX_FRAME:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(m.get("body", b"") for m in read if m["type"] == "http.request")
        mark = scope[HTTP_MARK] = {"dispatched": False}
        answer = {"status": 0, "body": b""}

        async def replay() -> Message:
            return read.pop(0) if read else await receive()

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
            elif message["type"] == "http.response.body" and len(answer["body"]) < 65536:
                answer["body"] += message.get("body", b"")
            await send(message)

        await self.app(scope, replay, watch)
        if mark["dispatched"] or answer["status"] < 400:
            return
        call = _tool_call(body if size <= MAX_FRAME else None, Headers(scope=scope))
        if call is not None:
            refused(self.kit, call[0], call[1], _refusal_code(answer["status"], answer["body"]),
                    duration_ms=(time.perf_counter() - started) * 1000, how="refused over HTTP",
                    unauthenticated=not getattr(scope.get("auth"), "scopes", None))


def _tool_call(body: bytes | None, headers: Headers) -> tuple[object, object] | None:
    """(name, arguments) of a request that is a `tools/call`, or None for any other request."""
    try:
        request = json.loads(body) if body is not None else None
    except (ValueError, RecursionError):
        request = None
    if isinstance(request, dict):
        params = request.get("params") if isinstance(request.get("params"), dict) else {}
        return (params.get("name"), params.get("arguments")) if request.get("method") == "tools/call" else None
    if headers.get("mcp-method") == "tools/call":  # an unreadable or oversized body: only the headers say
        return headers.get("mcp-name"), None
    return None


def _refusal_code(status: int, body: bytes) -> str:
    """The code the refusal carried (the guards' `error.code`, a JSON-RPC error's `data.code` or code), or
    `HTTP_<status>`."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError, RecursionError):
        error = None
    if isinstance(error, dict):
        data = error.get("data")
        if isinstance(data, dict) and isinstance(data.get("code"), str):
            return data["code"]
        if isinstance(error.get("code"), str):
            return error["code"]
        if isinstance(error.get("code"), int):
            return JSONRPC_CODES.get(error["code"], f"JSONRPC_{error['code']}")
    return f"HTTP_{status}"


@dataclass
class MCPEndpoint:
    app: ASGIApp                                                      # route it as Route("/mcp", app), last
    run: Callable[[], contextlib.AbstractAsyncContextManager[None]]   # enter once in the host's lifespan
    refusals: Middleware  # the host app's outermost: `app.user_middleware.insert(0, refusals)` before it starts


def http_endpoint(server: FleetServer, *, allowed_hosts: list[str] | None = None,
                  allowed_origins: list[str] | None = None) -> MCPEndpoint:
    """The `/mcp` endpoint of `server`, for a host app that authenticates (see `standalone_app`)."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=allowed_hosts or LOCAL_HOSTS,
                                         allowed_origins=allowed_origins or LOCAL_ORIGINS)
    app: ASGIApp = FrameLimitAnswer(server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, max_request_body_size=MAX_FRAME))
    return MCPEndpoint(app=app, run=server.session_manager.run, refusals=Middleware(RefusalAudit, kit=server.kit))


def standalone_app(server: FleetServer, token: str) -> Starlette:
    """A complete ASGI app serving only `/mcp` on loopback, behind the dashboard's guards (bearer token
    required), for uvicorn or tests."""
    endpoint = http_endpoint(server)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with endpoint.run():
            yield

    return Starlette(routes=[Mount("/", app=endpoint.app)], lifespan=lifespan,
                     middleware=[endpoint.refusals, *guards(Guard(token, allowed_hosts_for("127.0.0.1"),
                                                                  agent_of=Lookup(server.bridge.db_path)))])
