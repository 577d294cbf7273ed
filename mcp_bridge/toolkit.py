"""Registering a fleetdeck tool: a plain function returning a dict becomes an MCP tool with the house contract.

`Toolkit.tool(name, Output, title)` wraps the function so its dict is the structured result (validated
against `Output`, whose JSON schema is the published outputSchema) mirrored as compact JSON text, with
every time as an ISO 8601 UTC string (`iso_times`), and any failure becomes an `isError` result with a
stable code. A tool with a `repo` argument names the repository it resolved in the answer's `repo`
(fleet.repo.identity), here once for every per-repo tool; a tool whose answer already has a `repo` key
(a fleet-wide tool given an optional repo) keeps its own. Tool modules expose `register(kit)`; the server
registers every module listed in `mcp_bridge.server.TOOL_MODULES` (the write side adds its own module).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Callable

from mcp.server import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel

from fleet.repo.identity import repo_identity
from fleet.views.records import iso_times
from mcp_bridge.bridge import Bridge, resolved
from mcp_bridge.envelope import failure_from, success
from mcp_bridge.models import MaybeNamed, Named
from mcp_bridge.tools_audit import CallAudit, audited

# The most a tool's arguments may weigh, as compact JSON (a frame is capped at 8 MiB: mcp_bridge/stdio.py).
MAX_TOOL_INPUT = 6 * 1024 * 1024

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)


class Toolkit:
    """Adds tools to one server and remembers each tool's argument names (unknown arguments are refused)."""

    def __init__(self, server: MCPServer, bridge: Bridge) -> None:
        self.server = server
        self.bridge = bridge
        self.params: dict[str, frozenset[str]] = {}
        self.risks: dict[str, str] = {}  # the audit's `risk` of each tool: read or write
        server.middleware.append(CallAudit(self))  # calls refused before any tool runs are audited too

    def tool(self, name: str, output: type[BaseModel], title: str,
             annotations: ToolAnnotations = READ_ONLY) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
        def register(fn: Callable[..., dict]) -> Callable[..., dict]:
            signature = inspect.signature(fn, eval_str=True)
            per_repo = "repo" in signature.parameters
            model = output
            if per_repo and "repo" not in output.model_fields:
                optional = signature.parameters["repo"].default is not inspect.Parameter.empty
                model = type(output.__name__, (output, MaybeNamed if optional else Named),
                             {"__doc__": output.__doc__})

            def call(**kwargs: object) -> CallToolResult:
                token = resolved.set([])
                try:
                    data = fn(**kwargs)
                    answered = resolved.get()
                except Exception as exc:  # every failure becomes a structured error result
                    return failure_from(exc, name)
                finally:
                    resolved.reset(token)
                if per_repo and answered and "repo" not in data:
                    data = {"repo": repo_identity(answered[0]), **data}
                return success(iso_times(data))

            call = audited(self, name, annotations, call)  # one audit entry per call, best-effort
            call.__name__ = fn.__name__
            call.__doc__ = fn.__doc__
            call.__signature__ = signature.replace(return_annotation=Annotated[CallToolResult, model])
            self.server.add_tool(call, name=name, title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                                 annotations=annotations)
            self.params[name] = frozenset(signature.parameters)
            self.risks[name] = "read" if annotations.read_only_hint else "write"
            return fn
        return register
