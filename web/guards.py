"""The dashboard's front door: small middlewares, one check each, that wrap every route (pages, JSON API,
SSE and the MCP bridge at `/mcp`), outermost first:

- `SecurityHeaders`: CSP and friends on every response, refusals included;
- `HostCheck`: a Host that is not ours is refused before anything else (DNS rebinding);
- `TokenLanding`: the `?token=` link sets the cookie and redirects to the same page without the token;
- Starlette's `AuthenticationMiddleware` with `TokenAuth`: the bearer token or our cookie, or 401;
- `OriginCsrfCheck`: a state-changing request carries our Origin and, when the cookie authenticated it, the
  CSRF token (`X-CSRF-Token` header or `csrf_token` form field).

`guards(guard)` is the stack in that order; docs/security.md is the model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from html import escape
from urllib.parse import quote, urlencode

from starlette.authentication import (AuthCredentials, AuthenticationBackend, AuthenticationError,
                                      SimpleUser)
from starlette.datastructures import Headers, MutableHeaders, QueryParams
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import NoMatchFound
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from web.security import Guard, cookie_name, cookie_value_for, host_name

CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_FORM_BYTES = 64 * 1024
PUBLIC_PREFIXES = ("/static/",)  # CSS, JS and the icon: no data, and the refusal page needs its style
BEARER_ONLY_PREFIXES = ("/mcp",)  # agents send the bearer token; a browser's cookie opens only the dashboard
API_PREFIXES = ("/api/", "/mcp")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "cache-control": "no-store",
}
UNAUTHORIZED = ("open the link printed by `fleetdeck serve` (it carries the access token), "
                "or send Authorization: Bearer")


def server_port(scope: Scope) -> int | None:
    """The port this request reached (the ASGI server's own socket, not the Host header)."""
    server = scope.get("server")
    return server[1] if server else None


def refusal(scope: Scope, status: int, code: str, message: str) -> Response:
    """A refusal as JSON for API clients, as a small readable page for a person in a browser."""
    headers = {"www-authenticate": 'Bearer realm="fleetdeck"'} if status == 401 else None
    path = scope.get("path", "")
    if path.startswith(API_PREFIXES) or "text/html" not in Headers(scope=scope).get("accept", ""):
        return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)
    try:
        style = f'<link rel=stylesheet href="{scope["app"].url_path_for("static", path="app.css")}">'
    except (NoMatchFound, KeyError):  # an app without the dashboard's static files (the bare MCP app)
        style = ""
    return HTMLResponse(f"<!doctype html><html lang=en><meta charset=utf-8><title>fleetdeck: {status}</title>"
                        f"{style}<main class=refusal><h1>{status}</h1><p>{escape(message)}.</p></main>",
                        status_code=status, headers=headers)


class ResponseRewriter(ABC):
    """Base of the pure ASGI wrappers that only change what goes out: `rewrite(scope, send)` returns the
    `send` the app gets for one HTTP request; other scopes (lifespan, websockets) pass through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    @abstractmethod
    def rewrite(self, scope: Scope, send: Send) -> Send:
        """The `send` that carries this request's response messages out, changed as the subclass says."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        else:
            await self.app(scope, receive, self.rewrite(scope, send))


class SecurityHeaders(ResponseRewriter):
    """Adds the security headers to every response that does not set its own."""

    def rewrite(self, scope: Scope, send: Send) -> Send:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        return with_headers


class HostCheck:
    """421 for a Host that is not the bound address or a loopback name: a DNS-rebinding page on
    evil.example can point its name at 127.0.0.1, but cannot change the Host header the browser sends."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.allowed = guard.allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and host_name(Headers(scope=scope).get("host", "")) not in self.allowed:
            response = refusal(scope, 421, "HOST_REFUSED", "this Host is not the address fleetdeck is bound to")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def landing_target(path: str, query: list[tuple[str, str]]) -> str:
    """The same page without the token, as a path on this server built from scratch: slashes and
    backslashes at the start are dropped and everything else is percent-encoded, so no `//host`,
    `/\\host`, tab or CR/LF trick can make a browser leave the server or split the header."""
    target = "/" + quote(path.lstrip("/\\"), safe="/")
    if query:
        target += "?" + urlencode(query)
    return target


class TokenLanding:
    """`GET …?token=<token>`: a valid token sets this port's cookie and redirects (303) to the same page
    without it, so the token leaves the address bar and the history; a wrong one is a 401."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = QueryParams(scope.get("query_string", b"")) if scope["type"] == "http" else QueryParams()
        if scope.get("method") != "GET" or "token" not in params:
            await self.app(scope, receive, send)
            return
        if not self.guard.valid(params["token"]):
            response = refusal(scope, 401, "UNAUTHORIZED", "that access link is not valid (restarted server?)")
        else:
            port = server_port(scope)
            rest = [(k, v) for k, v in params.multi_items() if k != "token"]
            response = RedirectResponse(landing_target(scope["path"], rest), status_code=303)
            response.set_cookie(cookie_name(port), cookie_value_for(self.guard.token, port), path="/",
                                httponly=True, samesite="Strict")
        await response(scope, receive, send)


class TokenAuth(AuthenticationBackend):
    """The bearer token, or this port's cookie (not on `/mcp`); anything else is refused with 401.
    The credential's scope, `bearer` or `cookie`, tells `OriginCsrfCheck` whether CSRF applies."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        path, method = conn.scope["path"], conn.scope.get("method", "GET")
        if path.startswith(PUBLIC_PREFIXES) and method in SAFE_METHODS:
            return None
        scheme, _, credential = conn.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.guard.valid(credential.strip()):
            return AuthCredentials(["bearer"]), SimpleUser("bearer")
        port = server_port(conn.scope)
        if not path.startswith(BEARER_ONLY_PREFIXES) and self.guard.valid_cookie(
                conn.cookies.get(cookie_name(port)), port):
            return AuthCredentials(["cookie"]), SimpleUser("cookie")
        raise AuthenticationError(UNAUTHORIZED)

    @staticmethod
    def refuse(conn: HTTPConnection, exc: AuthenticationError) -> Response:
        return refusal(conn.scope, 401, "UNAUTHORIZED", str(exc))


class OriginCsrfCheck:
    """A state-changing request must come from our own Origin (a missing Origin is refused unless the
    bearer token authenticated it: browsers never add that header on their own), and, when the cookie
    authenticated it, carry the CSRF token."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        auth = scope.get("auth")
        by_bearer = auth is not None and "bearer" in auth.scopes
        origin = headers.get("origin")
        own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"
        if (origin is not None and origin != own) or (origin is None and not by_bearer):
            response = refusal(scope, 403, "ORIGIN_REFUSED", "state-changing requests must come from this origin")
            await response(scope, receive, send)
            return
        if not by_bearer and not self.guard.valid_csrf(headers.get(CSRF_HEADER)):
            receive, form_csrf = await _read_form_csrf(receive, headers)
            if not self.guard.valid_csrf(form_csrf):
                await refusal(scope, 403, "CSRF_REFUSED", "missing or wrong CSRF token")(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _read_form_csrf(receive: Receive, headers: Headers) -> tuple[Receive, str | None]:
    """For a plain HTML form post, read the (small) body to find `csrf_token`, then replay it to the app."""
    if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return receive, None
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > MAX_FORM_BYTES:
            return receive, None
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay, QueryParams(body.decode("latin-1")).get(CSRF_FIELD)


def guards(guard: Guard) -> list[Middleware]:
    """The whole front door, outermost first: give it to `Starlette(middleware=…)`."""
    return [Middleware(SecurityHeaders), Middleware(HostCheck, guard=guard), Middleware(TokenLanding, guard=guard),
            Middleware(AuthenticationMiddleware, backend=TokenAuth(guard), on_error=TokenAuth.refuse),
            Middleware(OriginCsrfCheck, guard=guard)]
