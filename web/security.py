"""The dashboard's front door: Host check, token, CSRF + Origin, and security headers, as one ASGI middleware.

The model (docs/security.md): the server binds loopback; every request must name an allowed Host (so a
DNS-rebinding page on evil.example cannot talk to us), carry the start-up token (cookie set from the
`?token=` link, or `Authorization: Bearer`), and a state-changing request authenticated by the cookie must
also come from our own Origin with the CSRF token (`X-CSRF-Token` header or `csrf_token` form field).
Bearer requests are exempt from CSRF: browsers never attach that header on their own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "fleetdeck_token"
CSRF_HEADER = b"x-csrf-token"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_FORM_BYTES = 64 * 1024
PUBLIC_PREFIXES = ("/static/",)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_for(token: str) -> str:
    """The CSRF token is derived from the access token, so it needs no server-side session store."""
    return hmac.new(token.encode(), b"fleetdeck-csrf-v1", hashlib.sha256).hexdigest()


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_NAMES or host.startswith("127.")


def allowed_hosts_for(bind_host: str) -> frozenset[str]:
    """Host names a request may use: loopback names, the bound address, and this machine's names when bound
    to every interface (which only happens with --allow-remote)."""
    names = set(LOOPBACK_NAMES) | {bind_host.strip("[]").lower()}
    if bind_host in ("0.0.0.0", "::"):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def host_name(host_header: str) -> str:
    """`example.com:8765` -> `example.com`, `[::1]:8765` -> `::1`."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass
class Guard:
    token: str
    allowed_hosts: frozenset[str]
    csrf: str = field(init=False)

    def __post_init__(self) -> None:
        self.csrf = csrf_for(self.token)

    def valid(self, candidate: str | None) -> bool:
        return bool(candidate) and secrets.compare_digest(candidate.encode(), self.token.encode())

    def valid_csrf(self, candidate: str | None) -> bool:
        return bool(candidate) and secrets.compare_digest(candidate.encode(), self.csrf.encode())


def _headers(scope: Scope) -> dict[bytes, str]:
    return {k.lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookie(headers: dict[bytes, str]) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(headers.get(b"cookie", ""))
    except Exception:  # a malformed Cookie header is simply no cookie
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel else None


class SecurityMiddleware:
    """Wraps the whole app (pages, API, SSE, /mcp); nothing reaches a route without passing here."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = self._with_headers(send)
        headers = _headers(scope)
        if host_name(headers.get(b"host", "")) not in self.guard.allowed_hosts:
            await _refuse(send, 421, "HOST_REFUSED", "this Host is not the address fleetdeck is bound to", scope)
            return
        path: str = scope["path"]
        if path.startswith(PUBLIC_PREFIXES) and scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        link_token = next((v for k, v in query if k == "token"), None)
        if link_token is not None and scope["method"] == "GET":
            if not self.guard.valid(link_token):
                await _refuse(send, 401, "UNAUTHORIZED", "that access link is not valid (restarted server?)", scope)
                return
            await self._redirect_with_cookie(send, path, [(k, v) for k, v in query if k != "token"])
            return
        auth = headers.get(b"authorization", "")
        bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        by_bearer = self.guard.valid(bearer)
        if not by_bearer and not self.guard.valid(_cookie(headers)):
            await _refuse(send, 401, "UNAUTHORIZED", "open the link printed by `fleetdeck serve` (it carries the "
                          "access token), or send Authorization: Bearer", scope)
            return
        if scope["method"] not in SAFE_METHODS:
            origin = headers.get(b"origin")
            own = f"{scope.get('scheme', 'http')}://{headers.get(b'host', '')}"
            if (origin is not None and origin != own) or (origin is None and not by_bearer):
                await _refuse(send, 403, "ORIGIN_REFUSED", "state-changing requests must come from this origin", scope)
                return
            if not by_bearer:
                receive, form_csrf = await _read_form_csrf(scope, receive, headers)
                if not self.guard.valid_csrf(headers.get(CSRF_HEADER) or form_csrf):
                    await _refuse(send, 403, "CSRF_REFUSED", "missing or wrong CSRF token", scope)
                    return
        await self.app(scope, receive, send)

    def _with_headers(self, send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                if b"cache-control" not in present:
                    extra.append((b"cache-control", b"no-store"))
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)
        return wrapped

    async def _redirect_with_cookie(self, send: Send, path: str, rest: list[tuple[str, str]]) -> None:
        target = "/" + path.lstrip("/")  # never `//host`: the redirect stays on this server
        if rest:
            target += "?" + urlencode(rest)
        cookie = f"{COOKIE}={self.guard.token}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", target.encode()), (b"set-cookie", cookie.encode()),
                                (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


async def _read_form_csrf(scope: Scope, receive: Receive, headers: dict[bytes, str]) -> tuple[Receive, str | None]:
    """For a plain HTML form post, read the (small) body to find `csrf_token`, then replay it to the app."""
    if not headers.get(b"content-type", "").startswith("application/x-www-form-urlencoded"):
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

    fields = dict(parse_qsl(body.decode("latin-1"), keep_blank_values=True))
    return replay, fields.get(CSRF_FIELD)


async def _refuse(send: Send, status: int, code: str, message: str, scope: Scope) -> None:
    """A refusal as JSON for API clients, as a small readable page for a person in a browser."""
    wants_html = not scope["path"].startswith(("/api/", "/mcp")) and b"text/html" in next(
        (v for k, v in scope.get("headers", []) if k.lower() == b"accept"), b"")
    if wants_html:
        body = (f"<!doctype html><html lang=en><meta charset=utf-8><title>fleetdeck: {status}</title>"
                f"<link rel=stylesheet href=/static/app.css><main class=refusal><h1>{status}</h1>"
                f"<p>{message}.</p></main>").encode()
        ctype = b"text/html; charset=utf-8"
    else:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        ctype = b"application/json"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
