"""Registering a fleetdeck tool: a plain function returning a dict becomes an MCP tool with the house contract.

`Toolkit.tool(name, Output, title)` wraps the function so its dict is the structured result (validated
against `Output`, whose JSON schema is the published outputSchema) mirrored as compact JSON text, with
every time as an ISO 8601 UTC string (`iso_times`), and any failure becomes an `isError` result with a
stable code. Tool modules expose `register(kit)`; the server
registers every module listed in `mcp_bridge.server.TOOL_MODULES` (the write side adds its own module).
"""

from __future__ import annotations

import inspect
from typing import Annotated, Callable

from mcp.server import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel

from fleet.views.records import iso_times
from mcp_bridge.bridge import Bridge
from mcp_bridge.envelope import failure_from, success

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

    def tool(self, name: str, output: type[BaseModel], title: str,
             annotations: ToolAnnotations = READ_ONLY) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
        def register(fn: Callable[..., dict]) -> Callable[..., dict]:
            signature = inspect.signature(fn, eval_str=True)

            def call(**kwargs: object) -> CallToolResult:
                try:
                    data = fn(**kwargs)
                except Exception as exc:  # every failure becomes a structured error result
                    return failure_from(exc, name)
                return success(iso_times(data))

            call.__name__ = fn.__name__
            call.__doc__ = fn.__doc__
            call.__signature__ = signature.replace(return_annotation=Annotated[CallToolResult, output])
            self.server.add_tool(call, name=name, title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                                 annotations=annotations)
            self.params[name] = frozenset(signature.parameters)
            return fn
        return register
