"""The same MCP server over streamable HTTP, for `fleetdeck serve` to mount at `/mcp`.

`http_endpoint()` gives the ASGI app (it answers `/mcp` only, behind a bearer token and the SDK's
Host/Origin checks against DNS rebinding) and the session manager's `run()` the host app must enter in its
own lifespan (mounted apps' lifespans never run). `standalone_app()` wraps both into one Starlette app.
"""

from __future__ import annotations

import contextlib
import hmac
import json
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_bridge.envelope import MAX_FRAME, frame_limit_error
from mcp_bridge.server import FleetServer

LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class BearerAuth:
    """ASGI wrapper: HTTP requests must carry `Authorization: Bearer <token>` (compared in constant time)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the MCP endpoint needs a non-empty token")
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps({"error": {"code": "UNAUTHORIZED",
                                             "message": "missing or wrong bearer token"}}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="fleetdeck"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class FrameLimitAnswer:
    """ASGI wrapper: the SDK refuses a body over MAX_FRAME with a plain-text 413; agents get the same
    JSON-RPC error (`data.code: LIMIT`) as on stdio instead."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replaced = False

        async def answer(message: dict) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                replaced = True
                body = frame_limit_error(None).model_dump_json(by_alias=True).encode()
                await send({"type": "http.response.start", "status": 413,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
            elif not replaced:  # the SDK's own 413 body is dropped
                await send(message)

        await self.app(scope, receive, answer)


@dataclass
class MCPEndpoint:
    app: ASGIApp                                                      # mount with Mount("/", app), last
    run: Callable[[], contextlib.AbstractAsyncContextManager[None]]   # enter once in the host's lifespan


def http_endpoint(server: FleetServer, token: str | None, *, allowed_hosts: list[str] | None = None,
                  allowed_origins: list[str] | None = None) -> MCPEndpoint:
    """The `/mcp` endpoint of `server`; `token=None` leaves authentication to the host app."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=allowed_hosts or LOCAL_HOSTS,
                                         allowed_origins=allowed_origins or LOCAL_ORIGINS)
    app: ASGIApp = FrameLimitAnswer(server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, max_request_body_size=MAX_FRAME))
    if token is not None:
        app = BearerAuth(app, token)
    return MCPEndpoint(app=app, run=server.session_manager.run)


def standalone_app(server: FleetServer, token: str) -> Starlette:
    """A complete ASGI app serving only `/mcp` (token required), for uvicorn or tests."""
    endpoint = http_endpoint(server, token)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with endpoint.run():
            yield

    return Starlette(routes=[Mount("/", app=endpoint.app)], lifespan=lifespan)
