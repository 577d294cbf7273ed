"""The fleetdeck MCP server: one `MCPServer` over the fleet index, served on stdio or mounted over HTTP.

Tools live in small modules (`tools_*.py`), each with a `register(kit)` function listed in TOOL_MODULES.
On stdio nothing of them loads before `initialize` is answered, and then only what a request needs:
`tools/list` is answered from the cached definitions (mcp_bridge/catalog.py) without importing a tool
module, and a `tools/call` imports the module of that tool and builds that tool's argument model only. The
SDK's own import is most of a connect; the tools' modules and schemas were most of the rest
(tests/test_mcp_startup.py holds that line). Without a cache for this code, all modules are registered
and the definitions generated (and cached) by the first `tools/list`.
This module adds what the SDK leaves to us: unknown tools and invalid or unknown arguments answered with
the same `{error: {code, message}}` result as every other failure (anything unexpected is `INTERNAL`, so
every error an agent sees has a code), the caller's identity (`who`: an agent credential's name, from the
HTTP guards or stdio's FLEETDECK_AGENT_TOKEN, else `unknown:<declared name>`), and a presence record of the
repos each call touched under the authenticated agent's name, or else the client's self-declared name. That record is bookkeeping beside the answer, never a condition of it: it
waits at most BOOKKEEPING_WAIT_MS for the index's write lock, and when it cannot be written the failure is
logged to stderr and the answer goes out anyway, marked degraded in its `_meta`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from functools import partial
from typing import Any, Callable

import anyio

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from fleet import __version__
from fleet.errors import FleetError
from fleet.index.store import is_busy
from fleet.presence import record_bridge_activity
from fleet.presence.bridge import FLEET_WIDE
from fleet.presence.switches import presence_switches
from fleet.agents.credentials import authenticate
from fleet.agents.identity import declared_name, is_authenticated, unknown
from mcp_bridge.bridge import Bridge, Who, caller, caller_session, identity, touched
from mcp_bridge.envelope import DEGRADED_KEY, failure, for_client

log = logging.getLogger("fleetdeck.mcp")

HANDSHAKE = ("initialize", "notifications/initialized", "ping")  # answered before the tools are registered
RECORD_EVERY = 15.0
BOOKKEEPING_WAIT_MS = 100  # the longest a tool call waits on another process's write lock for bookkeeping
TOOL_MODULES = ("tools_audit", "tools_fleet", "tools_agents", "tools_repo", "tools_git", "tools_context",
                "tools_recovery", "tools_snapshot", "tools_patch", "tools_ops")  # modules of mcp_bridge, registered in this order

INSTRUCTIONS = """\
fleetdeck watches every git repository on this machine (the fleet) and the coding agents working in them.
Start with fleet.radar (what needs attention, fleet-wide) or repo.brief (one repository in one small call).
Every per-repo tool takes `repo`: a fleet name (from fleet.repos) or an absolute path inside a fleet root,
and names the repository that answered in its `repo`. Fleet answers say how fresh the index is (`freshness`;
`refresh` re-reads named repos first). repo.lost / fleet.lost list dropped commits you can still recover.
Reads change nothing (the patch.* tools write only a .patch file inside a fleet root, when asked to).
Changes are proposals (operation.preview.<op>, with a required reason) that a person approves on the
fleetdeck dashboard or CLI; never assume a proposal ran until operation.status says so. Lists are capped and
say `truncated` and `omitted_count`; times are ISO 8601 UTC strings; failures are isError results with
`error.code` (REPO_NOT_IN_FLEET, BAD_REF, BAD_PATH, BAD_ARGUMENT, GIT_FAILED, LIMIT, INTERNAL, ...).
"""


class FleetServer(MCPServer):
    """MCPServer with fleetdeck's error envelope around every call.

    With `lazy_tools` the toolkit is made by the first request that is not part of the handshake, and
    tools are registered as requests need them; without it every tool is registered and installed up front.
    """

    def __init__(self, bridge: Bridge, *, lazy_tools: bool = False) -> None:
        super().__init__("fleetdeck", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
        self.bridge = bridge
        self.kit = None
        self._recorded: dict[tuple, float] = {}
        self.client_pids: list[int] = []  # set on stdio: the processes above this one (the client among them)
        self.agent_token: str | None = None  # set on stdio from FLEETDECK_AGENT_TOKEN (checked at start)
        self._registering = threading.RLock()
        self._registered: set[str] = set()  # tool modules registered
        self._catalog = None  # mcp_bridge.catalog.Catalog, once read or generated
        if lazy_tools:
            self.middleware.append(self._kit_first)
        else:
            self.ensure_tools()
            for name in self.kit.specs:
                self.kit.install(name)

    async def _kit_first(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        """Server middleware (lazy tools only): any message but the handshake makes the toolkit first.

        The toolkit adds middleware of its own (the audit of refused calls); the SDK composed this message's
        chain before that, so the middleware it added wraps the rest of this chain here, exactly as it will
        for every later message.
        """
        if ctx.method in HANDSHAKE or self.kit is not None:
            return await call_next(ctx)
        before = len(self.middleware)
        self.toolkit()
        call = call_next
        for middleware in reversed(self.middleware[before:]):
            call = partial(middleware, call_next=call)
        return await call(ctx)

    def toolkit(self):
        """The toolkit, made once, with the audit's module registered (the audit of every call needs it)."""
        with self._registering:
            if self.kit is None:
                from mcp_bridge.toolkit import Toolkit

                self.kit = Toolkit(self, self.bridge)
                self._register("tools_audit")
            return self.kit

    def _register(self, module: str) -> None:
        """Import one tool module and register its tools, once."""
        with self._registering:
            if module in self._registered:
                return
            kit = self.kit
            kit.module = module  # __import__, not importlib.import_module: `-X importtime` sees it
            __import__(f"mcp_bridge.{module}", fromlist=["register"]).register(kit)
            self._registered.add(module)

    def ensure_tools(self) -> None:
        """Import every tool module and register its tools, once."""
        self.toolkit()
        for module in TOOL_MODULES:
            self._register(module)

    def catalog(self):
        """The tools' definitions: cached in memory, else read from the cache file, else generated (and
        written) from every registered tool."""
        from mcp_bridge.catalog import Catalog, source_key

        with self._registering:
            if self._catalog is None:
                key = source_key()
                catalog = Catalog.load(key)
                if catalog is None:
                    self.ensure_tools()
                    specs = self.kit.specs
                    catalog = Catalog(self.kit.definitions(), {name: s.module for name, s in specs.items()})
                    catalog.save(key)
                self._catalog = catalog
            return self._catalog

    def _tool(self, name: str) -> bool:
        """Register the module of tool `name` and install the tool; False when there is no such tool."""
        kit = self.toolkit()
        if name not in kit.specs:
            module = self.catalog().modules.get(name)
            if module is None:
                return False
            self._register(module)
            if name not in kit.specs:  # a stale cache that slipped through: look everywhere
                self.ensure_tools()
                if name not in kit.specs:
                    return False
        kit.install(name)
        return True

    async def list_tools(self):
        return list(self.catalog().tools)

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None) -> CallToolResult:
        return await self.answer(name, arguments, _client_info(context), _http_agent(context), context)

    async def answer(self, name: str, arguments: dict[str, Any], client_info: tuple[str | None, str | None, str],
                     http_agent: str | None = None, context=None) -> CallToolResult:
        """The call's result for the client `client_info` names (declared name, version, session key), as
        `call_tool` gives it; stdio's fast path (mcp_bridge/fastcall.py) calls this with no SDK context."""
        try:
            return await self._call_tool(name, arguments, client_info, http_agent, context)
        except Exception:  # the last line of defence: an agent always gets a coded error, never a bare text
            log.exception("tool %s failed unexpectedly", name[:100])
            return failure("INTERNAL", f"{name[:100]} failed unexpectedly; see the server log")

    async def _call_tool(self, name: str, arguments: dict[str, Any], client_info: tuple[str | None, str | None, str],
                         http_agent: str | None, context) -> CallToolResult:
        if not self._tool(name):
            return failure("UNKNOWN_TOOL", f"no tool named {name[:100]!r}; see tools/list")
        from mcp_bridge.toolkit import MAX_TOOL_INPUT

        size = len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str).encode())
        if size > MAX_TOOL_INPUT:
            return failure("LIMIT", f"{name}: the arguments weigh {size} bytes; a tool takes at most "
                                    f"{MAX_TOOL_INPUT} bytes of JSON")
        allowed = self.kit.params[name]
        unknown = sorted(set(arguments) - allowed)
        if unknown:
            return failure("BAD_ARGUMENT", f"{name} takes no argument {unknown[0][:100]!r}; "
                                           f"it takes {', '.join(sorted(allowed)) or 'no arguments'}")
        client, version, session_key = client_info
        if self.client_pids:  # stdio: this process serves exactly one client session
            session_key = f"stdio:{os.getpid()}"
        me = {"session": session_key, "version": version, "pids": self.client_pids}
        caller_is = (self.who(client, session_key, http_agent) if self.agent_token is None else  # no I/O
                     await anyio.to_thread.run_sync(self.who, client, session_key, http_agent))
        token, who, mine = touched.set([]), caller.set(client), caller_session.set(me)
        is_token = identity.set(caller_is)
        try:
            result = await super().call_tool(name, arguments, context)
            paths = touched.get() or []
        except UnexpectedToolError as exc:
            log.error("tool %s failed unexpectedly", name, exc_info=exc.__cause__ or exc)
            return failure("INTERNAL", f"{name} failed unexpectedly; see the server log")
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return failure("BAD_ARGUMENT", f"{name}: {_describe(exc.__cause__)}")
            return failure("BAD_ARGUMENT", f"{name}: {exc}")
        finally:
            touched.reset(token)
            caller.reset(who)
            caller_session.reset(mine)
            identity.reset(is_token)
        if not result.is_error:  # a call that named no repository is recorded as fleet-wide
            paths = paths or [FLEET_WIDE]
            files = [v for k, v in arguments.items() if k in ("file", "path_filter") and isinstance(v, str)]
            shown = caller_is.agent if is_authenticated(caller_is.agent) else client
            due = self._due(shown, paths, name, files)
            if due:
                me["authenticated"] = is_authenticated(caller_is.agent)
                problem = await anyio.to_thread.run_sync(self._record, shown, due, name, files, me)
                if problem is not None:
                    meta = result.meta or {}
                    result.meta = {**meta, DEGRADED_KEY: [*meta.get(DEGRADED_KEY, []), problem]}
        return for_client(result, client, version)

    def who(self, declared: str | None, session_key: str, http_agent: str | None = None) -> Who:
        """The caller's identity: the agent whose credential came with this request (HTTP, checked by the
        guards) or with this process (stdio's FLEETDECK_AGENT_TOKEN, looked up again on every call so a
        revoked one stops at once), else `unknown:<declared name>`. A stateless session key names no session."""
        agent = http_agent
        if agent is None and self.agent_token is not None:
            agent = authenticate(self.bridge.index(), self.agent_token)
        session = None if session_key.startswith(("stateless:", f"{os.getpid()}:none")) else session_key
        return Who(agent or unknown(declared), declared_name(declared) if declared is not None else None, session)

    def _due(self, client: str | None, paths: list[str], tool: str, files: list[str]) -> list[str]:
        """The repos whose presence record for this (client, tool, files) is older than RECORD_EVERY.

        Presence counts an agent as working for minutes; a write per call would cost more than the call.
        """
        now = time.monotonic()
        if len(self._recorded) > 4096:
            self._recorded.clear()
        due = []
        for path in paths:
            key = (client, path, tool, tuple(files))
            if key not in self._recorded or now - self._recorded[key] >= RECORD_EVERY:
                self._recorded[key] = now
                due.append(path)
        return due

    def _record(self, client: str | None, paths: list[str], tool: str, files: list[str],
                me: dict | None = None) -> dict | None:
        """Tell presence which repos (and files) this client session just worked on; never fails the call.
        `client` is an authenticated agent's name (`me["authenticated"]`), else the client's declared name.

        Nothing is written when the settings turn `presence.record_mcp_clients` off. Returns None, or
        `{code, message}` saying why presence could not be recorded (the answer is then degraded, not lost);
        those repos are retried on the next call instead of after RECORD_EVERY.
        """
        me = me or {}
        index = self.bridge.index()
        try:
            if not presence_switches()["record_mcp_clients"]:
                return None
        except FleetError as exc:  # a broken settings file: record nothing (these switches exist for privacy)
            log.warning("presence not recorded: %s", exc.message)
            return {"code": exc.code, "message": f"agent presence was not recorded: {exc.message}"}
        for n, path in enumerate(paths):
            try:
                with index.busy_timeout(BOOKKEEPING_WAIT_MS):
                    record_bridge_activity(index, client, path, tool, [f"{path}/{f}" for f in files],
                                           session=me.get("session") or "", client_version=me.get("version"),
                                           client_pid=(me.get("pids") or [None])[0],
                                           authenticated=bool(me.get("authenticated")))
            except FleetError as exc:  # e.g. a repo not indexed yet
                log.debug("presence not recorded for %s: %s", path, exc.message)
            except Exception as exc:  # bookkeeping never costs the answer, whatever went wrong
                busy = is_busy(exc)
                log.warning("presence not recorded for %s (%s): %s", path, tool, exc, exc_info=not busy)
                for rest in paths[n:]:
                    self._recorded.pop((client, rest, tool, tuple(files)), None)
                return {"code": "INDEX_BUSY" if busy else "INTERNAL",
                        "message": "agent presence was not recorded: "
                                   + ("the index is write-locked by another process" if busy
                                      else "unexpected error; see the server log")}
        return None


def _client_info(context) -> tuple[str | None, str | None, str]:
    """The calling client (client_identity) as the SDK's context for the call knows it."""
    try:
        rc = context.request_context
        session = rc.session
    except (AttributeError, LookupError, ValueError):
        return None, None, f"{os.getpid()}:none"
    return client_identity(getattr(session, "client_params", None), getattr(rc, "connection", None))


def client_identity(client_params, connection=None) -> tuple[str | None, str | None, str]:
    """The client's self-declared name and version (initialize's clientInfo, or the 2026 request envelope),
    and a key for its session: the transport's session id (streamable HTTP), else the connection the SDK
    keeps for a handshake-era client. A stateless 2026-era request has neither, so its key is the client's
    name and version (such clients cannot be told apart; on stdio the caller overrides the key)."""
    info = getattr(client_params, "client_info", None)
    name, version = getattr(info, "name", None), getattr(info, "version", None)
    session_id = getattr(connection, "session_id", None)
    if session_id:
        return name, version, f"http:{session_id}"
    if connection is not None and getattr(connection, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
        return name, version, f"conn:{os.getpid()}:{id(connection):x}"
    return name, version, f"stateless:{name}/{version}"


def _http_agent(context) -> str | None:
    """The agent an HTTP request's credential belongs to, as the guards (web/guards.py) found it: scope
    `agent`, the user being the agent's name. None on stdio, and for the transport's own bearer token."""
    try:
        scope = context.request_context.request.scope
    except (AttributeError, LookupError, ValueError):
        return None
    auth, user = scope.get("auth"), scope.get("user")
    return user.display_name if auth is not None and "agent" in auth.scopes and user is not None else None


def _describe(exc: ValidationError) -> str:
    """Which arguments are wrong and why, without echoing the (possibly huge) values back."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def build_server(db_path: str | None = None, *, lazy_tools: bool = False) -> FleetServer:
    """The server over the index at `db_path` (created when missing; `fleetdeck mcp`: bridge.stdio_start)."""
    return FleetServer(Bridge(db_path), lazy_tools=lazy_tools)


def run_stdio(bridge: Bridge, agent_token: str | None) -> None:
    """Serve MCP on stdin/stdout until the client closes the pipe (frames capped: mcp_bridge/stdio.py), over
    the bridge `mcp_bridge.bridge.stdio_start` opened and checked; the tools are registered by the first
    request that needs them."""
    from fleet.procinfo import ancestors
    from mcp_bridge.sdk import serving
    from mcp_bridge.stdio import serve_stdio

    server = FleetServer(bridge, lazy_tools=True)
    server.agent_token = agent_token
    server.client_pids = ancestors(os.getpid())
    serving()
    anyio.run(serve_stdio, server)
