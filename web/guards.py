"""The dashboard's front door: small middlewares, one check each, that wrap every route (pages, JSON API,
SSE and the MCP bridge at `/mcp`), outermost first:

- `SecurityHeaders`: CSP and friends on every response, refusals included;
- `HostCheck`: a Host that is not ours is refused before anything else (DNS rebinding);
- `Landing`: a link's `?code=` gives a small page whose script trades the single-use code (`POST /session`)
  for a session: the cookie, and the tab's decision key in the response body;
- Starlette's `AuthenticationMiddleware` with `TokenAuth`: the bearer token, our session cookie or the
  approver token, or 401;
- `OriginCsrfCheck`: a state-changing request carries our Origin and, when the cookie authenticated it, the
  session's CSRF token (`X-CSRF-Token` header or `csrf_token` form field).

`guards(guard)` is the stack in that order. Deciding a proposal needs more than any of these: the decision
key of the session (`decision_actor`), which no page's HTML carries. docs/security.md is the model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
import json
from html import escape
from urllib.parse import quote, urlencode

from starlette.authentication import (AuthCredentials, AuthenticationBackend, AuthenticationError,
                                      SimpleUser)
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders, QueryParams
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import NoMatchFound
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet.errors import Code, FleetError
from web.errors import json_error
from web.security import Guard, Session, cookie_name, host_name

CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
DECISION_HEADER = "x-fleetdeck-decision"
APPROVER_HEADER = "x-fleetdeck-approver"
SESSION_PATH = "/session"  # where the landing page trades its code for a session
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
UNAUTHORIZED = ("this browser has no dashboard session: open the link `fleetdeck serve` printed, or get a fresh "
                "one with `fleetdeck dashboard link` (a link works once, within 10 minutes); scripts send "
                "Authorization: Bearer")
LANDING_REFUSED = ("that dashboard link was already used or has expired: get a fresh one with "
                   "`fleetdeck dashboard link`")


def server_port(scope: Scope) -> int | None:
    """The port this request reached (the ASGI server's own socket, not the Host header)."""
    server = scope.get("server")
    return server[1] if server else None


def refusal(scope: Scope, code: str, message: str) -> Response:
    """A refusal as JSON for API clients, as a small readable page for a person in a browser (the status is
    the code's, fleet.errors.Code)."""
    status = Code(code).status
    headers = {"www-authenticate": 'Bearer realm="fleetdeck"'} if status == 401 else None
    path = scope.get("path", "")
    if path.startswith(API_PREFIXES) or "text/html" not in Headers(scope=scope).get("accept", ""):
        return json_error(code, message, headers=headers)
    page = _page(scope, status, str(status), f"<h1>{status}</h1><p>{escape(message)}.</p>")
    page.headers.update(headers or {})
    return page


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
            response = refusal(scope, "HOST_REFUSED", "this Host is not the address fleetdeck is bound to")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def landing_target(path: str, query: list[tuple[str, str]]) -> str:
    """The same page without the code, as a path on this server built from scratch: slashes and
    backslashes at the start are dropped and everything else is percent-encoded, so no `//host`,
    `/\\host`, tab or CR/LF trick can make a browser leave the server or split the header."""
    target = "/" + quote(path.lstrip("/\\"), safe="/")
    if query:
        target += "?" + urlencode(query)
    return target


def _next_target(value: str | None) -> str:
    """The landing's `next`, as sent back by its page, rebuilt by `landing_target` (never trusted as is)."""
    path, _, query = (value or "/").partition("#")[0].partition("?")
    return landing_target(path, QueryParams(query).multi_items())


def _page(scope: Scope, status: int, title: str, body: str, head: str = "", script: bool = False) -> HTMLResponse:
    """A small standalone page (no session needed): the refusals and the landing page."""
    try:
        static = scope["app"].url_path_for
        head += f'<link rel=stylesheet href="{static("static", path="app.css")}">'
        if script:
            head += f'<script src="{static("static", path="app.js")}" defer></script>'
    except (NoMatchFound, KeyError):  # an app without the dashboard's static files (the bare MCP app)
        pass
    return HTMLResponse(f"<!doctype html><html lang=en><meta charset=utf-8><title>fleetdeck: {escape(title)}</title>"
                        f"{head}<main class=refusal>{body}</main>", status_code=status)


class Landing:
    """The person's way in. `GET …?code=<code>` answers a page (nothing is spent on a GET, which link
    previewers send too) whose script POSTs the code to `/session`; a live code there makes a session: the
    port-named cookie (HttpOnly, SameSite=Strict) carries its random id, and the JSON body carries the tab's
    decision key, which the script keeps in this origin's storage. Without the script the page's form posts
    the same code and gets the cookie and a 303 to the page (a session that reads but cannot decide)."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "POST" and scope["path"] == SESSION_PATH:
            await (await self.exchange(scope, receive))(scope, receive, send)
            return
        params = QueryParams(scope.get("query_string", b""))
        if scope.get("method") != "GET" or "code" not in params:
            await self.app(scope, receive, send)
            return
        rest = [(k, v) for k, v in params.multi_items() if k != "code"]
        await landing_page(scope, params["code"], landing_target(scope["path"], rest))(scope, receive, send)

    async def exchange(self, scope: Scope, receive: Receive) -> Response:
        headers = Headers(scope=scope)
        if headers.get("origin") != own_origin(scope):
            return refusal(scope, "ORIGIN_REFUSED", "a dashboard link is opened from this origin only")
        fields = await _read_fields(receive, headers)
        if fields is None or not await run_in_threadpool(self.guard.redeem, fields.get("code")):
            return refusal(scope, "LANDING_REFUSED", LANDING_REFUSED)
        session = self.guard.sessions.create()
        target = _next_target(fields.get("next"))
        response: Response
        if "application/json" in headers.get("accept", ""):
            response = JSONResponse({"decision_key": session.decision_key, "next": target})
        else:
            response = RedirectResponse(target, status_code=303)
        response.set_cookie(cookie_name(server_port(scope)), session.id, path="/", httponly=True,
                            samesite="Strict")
        return response


def landing_page(scope: Scope, code: str, target: str) -> HTMLResponse:
    """The page a dashboard link opens: app.js trades the code at once; the button does it without script.
    `same-origin` referrers so the form's post carries our Origin (the site-wide `no-referrer` would send
    `Origin: null`); the code goes nowhere else."""
    body = ('<h1>Opening the dashboard</h1>'
            '<p id=landing-status role=status>One moment: this link is being exchanged for a session.</p>'
            f'<form id=landing method=post action="{SESSION_PATH}">'
            f'<input type=hidden name=code value="{escape(code)}">'
            f'<input type=hidden name=next value="{escape(target)}">'
            '<button type=submit>Open the dashboard</button></form>'
            '<p class=muted>Deciding proposals needs this page\'s script: it keeps the tab\'s decision key.</p>')
    return _page(scope, 200, "opening the dashboard", body, "<meta name=referrer content=same-origin>", script=True)


class SessionUser(SimpleUser):
    """The person's browser: the user behind a valid session cookie."""

    def __init__(self, session: Session) -> None:
        super().__init__("session")
        self.session = session


class TokenAuth(AuthenticationBackend):
    """The bearer token, an agent's own credential (on `/mcp` only: scopes `bearer` and `agent`, the user is
    the agent's name), this port's session cookie (not on `/mcp`) or the approver token of the person's
    scripts (not on `/mcp`); anything else is refused with 401. The scopes (`bearer`, `cookie`, `approver`)
    tell `OriginCsrfCheck` whether CSRF applies and `decision_actor` who may decide."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        path, method = conn.scope["path"], conn.scope.get("method", "GET")
        if path.startswith(PUBLIC_PREFIXES) and method in SAFE_METHODS:
            return None
        scheme, _, credential = conn.headers.get("authorization", "").partition(" ")
        scopes = ["bearer"] if scheme.lower() == "bearer" and self.guard.valid(credential.strip()) else []
        user: SimpleUser = SimpleUser("bearer")
        if not scopes and scheme.lower() == "bearer" and path.startswith(BEARER_ONLY_PREFIXES):
            agent = await run_in_threadpool(self.guard.agent_of, credential.strip())
            if agent is not None:  # an agent's own credential: `/mcp` only, and the user is that agent
                scopes, user = ["bearer", "agent"], SimpleUser(agent)
        if not path.startswith(BEARER_ONLY_PREFIXES):
            session = self.guard.sessions.get(conn.cookies.get(cookie_name(server_port(conn.scope))))
            if session is not None:
                scopes.append("cookie")
                user = SessionUser(session)
            if APPROVER_HEADER in conn.headers and await run_in_threadpool(
                    self.guard.approver, conn.headers[APPROVER_HEADER]):
                scopes.append("approver")
        if not scopes:
            raise AuthenticationError(UNAUTHORIZED)
        return AuthCredentials(scopes), user

    @staticmethod
    def refuse(conn: HTTPConnection, exc: AuthenticationError) -> Response:
        return refusal(conn.scope, "UNAUTHORIZED", str(exc))


def decision_actor(conn: HTTPConnection) -> str:
    """Who decides a proposal (approve, reject, undo, restore, any inline action): `dashboard` for the
    person's tab (its session and that session's decision key, sent as `X-Fleetdeck-Decision`), `api` for
    the approver token. The MCP bearer token never decides, whatever else comes with it."""
    if "approver" in conn.auth.scopes:
        return "api"
    session = getattr(conn.user, "session", None)
    if session is not None and session.valid_decision(conn.headers.get(DECISION_HEADER)):
        return "dashboard"
    if "bearer" in conn.auth.scopes:
        raise FleetError("BEARER_CANNOT_DECIDE", "the MCP access token cannot decide proposals: a person "
                                                 "decides in the dashboard or with `fleetdeck proposals approve`")
    raise FleetError("DECISION_KEY_REQUIRED", "deciding needs this tab's decision key, which the dashboard's "
                                              "script keeps: open a fresh link (`fleetdeck dashboard link`) "
                                              "with JavaScript on, or use `fleetdeck proposals approve`")


def own_origin(scope: Scope) -> str:
    return f"{scope.get('scheme', 'http')}://{Headers(scope=scope).get('host', '')}"


class OriginCsrfCheck:
    """A state-changing request must come from our own Origin (a missing Origin is refused unless a token
    header authenticated it: browsers never add those on their own), and, when the cookie authenticated
    it, carry the session's CSRF token."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        auth = scope.get("auth")
        by_header = auth is not None and not {"bearer", "approver"}.isdisjoint(auth.scopes)
        origin = headers.get("origin")
        if (origin is not None and origin != own_origin(scope)) or (origin is None and not by_header):
            response = refusal(scope, "ORIGIN_REFUSED", "state-changing requests must come from this origin")
            await response(scope, receive, send)
            return
        session: Session | None = getattr(scope.get("user"), "session", None)
        if not by_header and not (session and session.valid_csrf(headers.get(CSRF_HEADER))):
            receive, form_csrf = await _read_form_csrf(receive, headers)
            if not (session and session.valid_csrf(form_csrf)):
                await refusal(scope, "CSRF_REFUSED", "missing or wrong CSRF token")(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole (small) request body, or None past MAX_FORM_BYTES."""
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > MAX_FORM_BYTES:
            return None
    return body


async def _read_form_csrf(receive: Receive, headers: Headers) -> tuple[Receive, str | None]:
    """For a plain HTML form post, read the (small) body to find `csrf_token`, then replay it to the app."""
    if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return receive, None
    body = await _read_body(receive)
    if body is None:
        return receive, None
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay, QueryParams(body.decode("latin-1")).get(CSRF_FIELD)


async def _read_fields(receive: Receive, headers: Headers) -> dict[str, str] | None:
    """The landing exchange's string fields, from JSON (its script) or a form (its button); None if unreadable."""
    body = await _read_body(receive)
    if body is None:
        return None
    if not headers.get("content-type", "").startswith("application/json"):
        return dict(QueryParams(body.decode("latin-1")))
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return None
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else None


def guards(guard: Guard) -> list[Middleware]:
    """The whole front door, outermost first: give it to `Starlette(middleware=…)`."""
    return [Middleware(SecurityHeaders), Middleware(HostCheck, guard=guard), Middleware(Landing, guard=guard),
            Middleware(AuthenticationMiddleware, backend=TokenAuth(guard), on_error=TokenAuth.refuse),
            Middleware(OriginCsrfCheck, guard=guard)]
