"""`fleetdeck serve`: bind the socket, print the dashboard link (a single-use landing code) and the MCP bearer
token, run uvicorn over the dashboard app, with the fleet watcher in the same process (started and stopped by
the app's lifespan) and the MCP bridge over streamable HTTP at `/mcp`, behind the same token, Host and CSRF
checks as every page.

The socket is bound here (not by uvicorn) so the printed link carries the real port, even with `--port 0`.
SIGINT and SIGTERM are a normal way to stop a server: uvicorn shuts down gracefully (the lifespan stops the
watcher, which records that it stopped) and the process exits 0.

A warm start answers at once from the index: nothing heavy runs before uvicorn answers. The watcher claims
the index first (so the first page already says a re-check is due and how old its figures are) and starts
reading the fleet once the server answers; the audit chain check starts behind it too. The MCP bridge (~1 s
of imports and tool schemas, on the same cores the re-check needs) is built once the re-check is over, or
at the first `/mcp` request if one comes earlier (that request waits for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
import webbrowser
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, AsyncIterator, Callable

import uvicorn
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet import audit
from fleet.errors import FleetError
from fleet.index.freshness import freshness
from fleet.index.store import open_index
from fleet.index.wake import Bell
from fleet.notify.dispatch import notifying
from fleet.ops import landing
from fleet.ops.service import announce_dashboard, resume_orphans, sweep
from fleet.watch.coldstart import ColdStart
from fleet.watch.service import watching
from web.app import redeem_landing, create_app
from web.conn import ACCEPT_BURST, guarded
from web.errors import json_error
from web.security import allowed_hosts_for, is_loopback, new_token
from web.state import Tabs, behind

if TYPE_CHECKING:  # psycopg and the team code load only for `serve --team`
    from fleet.team.decisions import Approver

log = logging.getLogger("fleetdeck.serve")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise FleetError("BAD_ARGUMENT", f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def base_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}"


class Stopped(Exception):
    """SIGINT or SIGTERM asked the server to stop."""


def _checking(db_path: str | Path):
    from fleet.audit.monitor import checking  # the verifier and its cryptography: behind the first page

    return checking(db_path)


def mcp_endpoint(db_path: str | Path, host: str, port: int):
    """The MCP bridge at `/mcp`; the dashboard's guards authenticate, the SDK re-checks Host/Origin."""
    from mcp_bridge.http import http_endpoint  # the mcp SDK costs ~0.7 s to import: only when serving
    from mcp_bridge.server import build_server

    hosts = sorted(allowed_hosts_for(host))
    names = [f"[{h}]" if ":" in h else h for h in hosts]
    return http_endpoint(build_server(str(db_path)),
                         allowed_hosts=[form for n in names for form in (n, f"{n}:{port}")],
                         allowed_origins=[f"http://{n}:{port}" for n in names])


class LateMCP:
    """`/mcp`, built in a worker thread when it is first wanted (`want()`: the first `/mcp` request, or the
    host once its start-up work is done) rather than before the dashboard: a request waits for it; one whose
    bridge could not be built gets a structured 503. `run` is the service that builds and runs it."""

    def __init__(self, build: Callable[[], object]) -> None:
        self._build = build
        self._wanted = asyncio.Event()
        self._ready = asyncio.Event()
        self._endpoint = None

    def want(self) -> None:
        """Build the bridge now (from the event loop's thread)."""
        self._wanted.set()

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        stop = asyncio.Event()
        task = asyncio.ensure_future(self._serve(stop))
        try:
            yield
        finally:
            stop.set()
            if not self._wanted.is_set():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _serve(self, stop: asyncio.Event) -> None:
        await self._wanted.wait()
        try:
            endpoint = await asyncio.to_thread(self._build)
        except Exception:
            log.exception("the MCP bridge could not be built; /mcp answers 503")
            self._ready.set()
            return
        async with endpoint.run():
            self._endpoint = endpoint
            self._ready.set()
            await stop.wait()

    def refusals(self, app: ASGIApp) -> ASGIApp:
        """The bridge's refusal audit around `app` (the host's outermost middleware): a POST to `/mcp` waits
        for the bridge, then goes through its `RefusalAudit`; everything else passes straight on."""
        audited: list[ASGIApp] = []

        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope.get("method") == "POST" and scope.get("path") == "/mcp":
                self.want()
                await self._ready.wait()
                if self._endpoint is not None:
                    if not audited:
                        cls, args, kwargs = self._endpoint.refusals
                        audited.append(cls(app, *args, **kwargs))
                    await audited[0](scope, receive, send)
                    return
            await app(scope, receive, send)

        return middleware

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app at `/mcp` (an instance, so Starlette's Route hands it the raw ASGI call)."""
        self.want()
        await self._ready.wait()
        if self._endpoint is None:
            await json_error("UNAVAILABLE", "the MCP bridge could not start; see the server's log")(scope, receive,
                                                                                                    send)
            return
        await self._endpoint.app(scope, receive, send)


class Answering:
    """Resolves once the dashboard has answered its first page: the work `serve` starts behind the dashboard
    (the watcher's re-check, the audit check) waits for it, so the person who opens the link
    gets the last known queue before that work competes for the interpreter. When no page is asked for within
    FIRST_PAGE_GRACE_S of uvicorn answering, the work starts anyway."""

    FIRST_PAGE_GRACE_S = 2.0

    def __init__(self) -> None:
        self.server: uvicorn.Server | None = None
        self._page = asyncio.Event()

    async def wait(self) -> None:
        while self.server is None or not self.server.started:
            await asyncio.sleep(0.01)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._page.wait(), self.FIRST_PAGE_GRACE_S)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """Outermost ASGI wrapper: notes the first successful response (the link's landing page counts: the
        person is there)."""
        async def noting(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or self._page.is_set():
                await app(scope, receive, send)
                return

            async def watch(message: Message) -> None:
                await send(message)
                if message["type"] == "http.response.start" and message["status"] < 300:
                    self._page.set()

            await app(scope, receive, watch)

        return noting


def _stop(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def _remote_check(host: str, allow_remote: bool) -> None:
    """A non-loopback host needs `allow_remote`, and says what it exposes."""
    if not is_loopback(host):
        if not allow_remote:
            raise FleetError("BAD_ARGUMENT", f"{host} is not a loopback address: pass --allow-remote to expose "
                             "the dashboard (and your repositories' state) to the network")
        print(f"fleetdeck: warning: listening on {host}: anyone who can reach this machine and has the token "
              "can read your fleet's state. Traffic is plain HTTP.", file=sys.stderr)


def serve(db_path: str | Path, host: str = "127.0.0.1", port: int = 8765, *, allow_remote: bool = False,
          open_browser: bool = False, watch: bool = True, cold: ColdStart | None = None) -> None:
    """Serve the dashboard with the watcher over the saved roots until SIGINT or SIGTERM. Without `watch`,
    the watcher re-checks the fleet once behind the first page and stops: the pages say it is not kept fresh.
    `cold`: a cold start the caller began before importing this module (`fleet.watch.coldstart.begin`); the
    watcher takes it over and starts at once.

    A non-loopback host needs `allow_remote` (and says so).
    """
    _remote_check(host, allow_remote)
    audit.setup(db_path)  # a configured key that cannot be used stops serve before it answers (fail closed)
    sock = bind(host, port)
    token = new_token()  # the MCP clients' bearer token; the person's browser signs in with a landing code
    base = base_url(host, sock.getsockname()[1])
    answering = Answering()
    mcp = LateMCP(partial(mcp_endpoint, db_path, host, sock.getsockname()[1]))
    tabs = Tabs()   # the open dashboard tabs: desktop notifications go out while there are none
    bell = Bell(db_path).open()   # rung by the agents' hooks: the strip and the notifications look at once
    services = [partial(watching, db_path, after=answering.wait, once=not watch, on_rechecked=mcp.want, cold=cold),
                behind(answering.wait, mcp.run), behind(answering.wait, partial(_checking, db_path)),
                behind(answering.wait, partial(notifying, db_path, tabs_open=tabs.any, bell=bell))]
    app = create_app(db_path, token, bind_host=host, services=services, tabs=tabs, bell=bell,
                     mounts=[Route("/mcp", mcp)])  # only /mcp: other paths get the site's 404 page
    app.user_middleware.insert(0, Middleware(mcp.refusals))  # outside the guards: a refused tool call is audited too
    app.user_middleware.insert(0, Middleware(answering.middleware))
    with open_index(db_path) as idx:  # agents' proposals link to this dashboard; approved ones left behind run
        announce_dashboard(idx, base)
        resume_orphans(idx)
        sweep(idx)                 # and proposals past their retention leave the index (then hourly)
        known, indexed_at = idx.count(), freshness(idx)["indexed_at"]
        url = landing.link(base, landing.issue(idx))
    print(f"fleetdeck dashboard: {url}", flush=True)
    print(f"fleetdeck: the link works once, within {landing.LANDING_TTL_S // 60} minutes; "
          "`fleetdeck dashboard link` prints a fresh one", flush=True)
    print(f"fleetdeck MCP over HTTP: {base}/mcp with Authorization: Bearer {token}", flush=True)
    if cold is not None:
        print("fleetdeck: reading the fleet for the first time: every repository's state first, its history"
              " behind it; progress on the dashboard", flush=True)
    elif known:
        print(f"fleetdeck: serving the last known state of {known:,} repositories (indexed {indexed_at})"
              + "; re-checking them in the background, progress on the dashboard"
              + ("" if watch else " (--no-watch: once, then not kept fresh)"), flush=True)
    if open_browser:
        webbrowser.open(url)
    gc.freeze()  # start-up is over (`fleet.cli.serve` paused the collector for it): its objects live as long
    gc.enable()  # as the process, later collections skip them
    try:
        run(app, sock, answering)
    finally:
        bell.close()
        with open_index(db_path) as idx:
            announce_dashboard(idx, None)


def run(app: ASGIApp, sock: socket.socket, answering: Answering | None = None) -> None:
    """uvicorn over `app` on the bound `sock` until SIGINT or SIGTERM (a normal return), then close it."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", http=guarded(),
                            backlog=ACCEPT_BURST)
    server = uvicorn.Server(config)
    if answering is not None:
        answering.server = server
    # uvicorn traps both signals while it runs, shuts down gracefully, then re-raises the signal it caught
    # with the handler that was there before: ours turns that into a normal return instead of a kill.
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    except Stopped as stopped:
        log.info("stopped by %s", stopped)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


def serve_hub(db_path: str | Path, dsn: str, host: str = "127.0.0.1", port: int = 8765, *,
              allow_remote: bool = False, open_browser: bool = False, approver: Approver | None = None) -> None:
    """`fleetdeck serve --team DSN`: the hub's dashboard (web/hub.py) with the local dashboard's guards; the
    landing code (and the passkeys its decisions may ask for) are this machine's own index's at `db_path`.
    Read-only without `approver`; with one, its proposal pages decide, signed with the approver's key.
    Nothing printed names the DSN's user or password: the hub is `host:port/dbname`."""
    from fleet.team.hubread import Hub
    from fleet.team.listen import Listener
    from web.hub import create_hub_app

    _remote_check(host, allow_remote)
    hub = Hub(dsn)
    try:
        hub.check()
    except FleetError:
        hub.close()
        raise
    sock = bind(host, port)
    base = base_url(host, sock.getsockname()[1])
    token = new_token()   # scripts' bearer token for the same JSON (`/api/radar`, `/api/digest`, …)
    app = create_hub_app(hub, Listener(dsn), token, bind_host=host, redeem=partial(redeem_landing, db_path),
                         approver=approver, own=Path(db_path))
    with open_index(db_path) as idx:
        url = landing.link(base, landing.issue(idx))
    mode = f"decisions signed as {approver.name}, key {approver.key_id}" if approver else "read-only"
    print(f"fleetdeck hub dashboard ({hub.label}, {mode}): {url}", flush=True)
    print(f"fleetdeck: the link works once, within {landing.LANDING_TTL_S // 60} minutes", flush=True)
    print(f"fleetdeck hub API: {base}/api/radar (and the rest of /api/) with Authorization: Bearer {token}",
          flush=True)
    if open_browser:
        webbrowser.open(url)
    run(app, sock)
