"""The same MCP server over streamable HTTP, for `fleetdeck serve` to mount at `/mcp`.

`http_endpoint()` gives the ASGI app (it answers `/mcp` only, with the SDK's Host/Origin checks against DNS
rebinding) and the session manager's `run()` the host app must enter in its own lifespan (mounted apps'
lifespans never run); a body over the frame cap gets the same JSON-RPC `LIMIT` error as on stdio. The token
is checked by the host app: the dashboard's guards (web/guards.py), the one token check of the HTTP surface.
`standalone_app()` serves `/mcp` alone behind those same guards.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Scope, Send

from mcp_bridge.envelope import MAX_FRAME, frame_limit_error
from mcp_bridge.server import FleetServer
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


@dataclass
class MCPEndpoint:
    app: ASGIApp                                                      # route it as Route("/mcp", app), last
    run: Callable[[], contextlib.AbstractAsyncContextManager[None]]   # enter once in the host's lifespan


def http_endpoint(server: FleetServer, *, allowed_hosts: list[str] | None = None,
                  allowed_origins: list[str] | None = None) -> MCPEndpoint:
    """The `/mcp` endpoint of `server`, for a host app that authenticates (see `standalone_app`)."""
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=allowed_hosts or LOCAL_HOSTS,
                                         allowed_origins=allowed_origins or LOCAL_ORIGINS)
    app: ASGIApp = FrameLimitAnswer(server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, max_request_body_size=MAX_FRAME))
    return MCPEndpoint(app=app, run=server.session_manager.run)


def standalone_app(server: FleetServer, token: str) -> Starlette:
    """A complete ASGI app serving only `/mcp` on loopback, behind the dashboard's guards (bearer token
    required), for uvicorn or tests."""
    endpoint = http_endpoint(server)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with endpoint.run():
            yield

    return Starlette(routes=[Mount("/", app=endpoint.app)], lifespan=lifespan,
                     middleware=guards(Guard(token, allowed_hosts_for("127.0.0.1"))))
