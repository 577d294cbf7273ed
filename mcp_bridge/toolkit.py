"""Registering a fleetdeck tool: a plain function returning a dict becomes an MCP tool with the house contract.

`Toolkit.tool(name, Output, title)` wraps the function so its dict is the structured result mirrored as
compact JSON text, with every time as an ISO 8601 UTC string (`iso_times`), and any failure becomes an
`isError` result with a stable code. `Output`'s JSON schema is the published outputSchema. The SDK does not
re-validate every answer against it (a large answer would pay for that on every call); with
`FLEETDECK_CHECK_OUTPUTS=1` (set by the test suite) each answer is validated as the SDK did, and one that
does not fit fails the call as an unexpected error.
A tool with a `repo` argument names the repository it resolved in the answer's `repo`
(fleet.repo.identity), here once for every per-repo tool; a tool whose answer already has a `repo` key
(a fleet-wide tool given an optional repo) keeps its own. Tool modules expose `register(kit)`; the server
registers every module listed in `mcp_bridge.server.TOOL_MODULES` (the write side adds its own module).

Registering is cheap: a tool is added to the SDK (which builds its argument model) by `install`, when it is
first called, and its published definition is built only by `definitions` (mcp_bridge/catalog.py caches it).
In that definition, a list of records is published as a list of objects, each record's shape in `$defs`
(`shallow_lists`), so that clients do not check every item of a large answer field by field.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Annotated, Callable

from mcp.server import MCPServer
from mcp.server.mcpserver.tools.base import Tool as SdkTool
from mcp.types import CallToolResult, Tool, ToolAnnotations
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from fleet.repo.identity import repo_identity
from fleet.views.records import iso_times
from mcp_bridge.bridge import Bridge, resolved
from mcp_bridge.envelope import failure_from, success
from mcp_bridge.tools_audit import CallAudit, audited

# The most a tool's arguments may weigh, as compact JSON (a frame is capped at 8 MiB: mcp_bridge/stdio.py).
MAX_TOOL_INPUT = 6 * 1024 * 1024

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)


@dataclass
class Spec:
    """One registered tool: its wrapped function (what the SDK calls) and what its definition is made of."""

    name: str
    call: Callable[..., CallToolResult]
    signature: inspect.Signature
    output: type[BaseModel]
    title: str
    description: str
    annotations: ToolAnnotations
    module: str


def _wire_name(param: inspect.Parameter) -> str:
    """An argument's name on the wire: its Field alias (`from`, a Python keyword) or its own name."""
    for meta in getattr(param.annotation, "__metadata__", ()):
        if isinstance(meta, FieldInfo) and meta.alias:
            return meta.alias
    return param.name


class Toolkit:
    """Adds tools to one server and remembers each tool's argument names (unknown arguments are refused)."""

    def __init__(self, server: MCPServer, bridge: Bridge) -> None:
        self.server = server
        self.bridge = bridge
        self.specs: dict[str, Spec] = {}
        self.installed: set[str] = set()
        self.params: dict[str, frozenset[str]] = {}
        self.risks: dict[str, str] = {}  # the audit's `risk` of each tool: read or write
        self.module = ""  # the tool module being registered (set by the server around `register(kit)`)
        self.check_outputs = os.environ.get("FLEETDECK_CHECK_OUTPUTS") == "1"
        self._checkers: dict[str, TypeAdapter] = {}
        self.call_audit = CallAudit(self)  # calls refused before any tool runs are audited too
        server.middleware.append(self.call_audit)

    def tool(self, name: str, output: type[BaseModel], title: str,
             annotations: ToolAnnotations = READ_ONLY) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
        def register(fn: Callable[..., dict]) -> Callable[..., dict]:
            signature = inspect.signature(fn, eval_str=True)
            per_repo = "repo" in signature.parameters

            renamed = {_wire_name(p): p.name for p in signature.parameters.values() if _wire_name(p) != p.name}

            def call(**kwargs: object) -> CallToolResult:
                token = resolved.set([])
                try:
                    data = fn(**{renamed.get(k, k): v for k, v in kwargs.items()})
                    answered = resolved.get()
                except Exception as exc:  # every failure becomes a structured error result
                    return failure_from(exc, name)
                finally:
                    resolved.reset(token)
                if per_repo and answered and "repo" not in data:
                    data = {"repo": repo_identity(answered[0]), **data}
                result = success(iso_times(data))
                if self.check_outputs:
                    self._check(name, result.structured_content)
                return result

            call = audited(self, name, annotations, call)  # one audit entry per call, best-effort
            call.__name__ = fn.__name__
            call.__doc__ = fn.__doc__
            call.__signature__ = signature.replace(return_annotation=CallToolResult)
            self.specs[name] = Spec(name, call, signature, output, title, inspect.cleandoc(fn.__doc__ or ""),
                                    annotations, self.module)
            self.params[name] = frozenset(_wire_name(p) for p in signature.parameters.values())
            self.risks[name] = "read" if annotations.read_only_hint else "write"
            return fn
        return register

    def install(self, name: str) -> None:
        """Add a registered tool to the SDK (its argument model is built here), once."""
        if name in self.installed:
            return
        spec = self.specs[name]
        # Unstructured for the SDK: the answer is already a finished CallToolResult (text and structured
        # content); the outputSchema is published from `definitions`.
        self.server.add_tool(spec.call, name=name, title=spec.title, description=spec.description,
                             annotations=spec.annotations, structured_output=False)
        self.installed.add(name)

    def definitions(self) -> list[Tool]:
        """Every registered tool's definition as `tools/list` publishes it, generated by the SDK as for a tool
        returning `Annotated[CallToolResult, Output]` (Output with the answer's `repo` for per-repo tools)."""
        return [self._definition(spec) for spec in self.specs.values()]

    def output_model(self, spec: Spec) -> type[BaseModel]:
        """The model of the tool's answers: its Output, with the answer's `repo` for a per-repo tool."""
        from mcp_bridge.models import MaybeNamed, Named

        model = spec.output
        if "repo" in spec.signature.parameters and "repo" not in model.model_fields:
            optional = spec.signature.parameters["repo"].default is not inspect.Parameter.empty
            model = type(model.__name__, (model, MaybeNamed if optional else Named), {"__doc__": model.__doc__})
        return model

    def _check(self, name: str, answer: object) -> None:
        """Validate an answer against its tool's output model (as the SDK would); raises when it does not fit."""
        checker = self._checkers.get(name)
        if checker is None:
            checker = self._checkers[name] = TypeAdapter(self.output_model(self.specs[name]))
        checker.validate_python(answer)

    def _definition(self, spec: Spec) -> Tool:
        model = self.output_model(spec)

        def published() -> None:
            """The tool's signature with its output model (only for the SDK to read)."""

        published.__name__ = spec.call.__name__
        published.__signature__ = spec.signature.replace(  # type: ignore[attr-defined]
            return_annotation=Annotated[CallToolResult, model])
        info = SdkTool.from_function(published, name=spec.name, title=spec.title, description=spec.description,
                                     annotations=spec.annotations)
        tool = Tool(name=info.name, title=info.title, description=info.description, input_schema=info.parameters,
                    output_schema=info.output_schema, annotations=info.annotations, icons=info.icons,
                    _meta=info.meta)
        tool.input_schema["additionalProperties"] = False
        if tool.output_schema is not None:
            tool.output_schema = shallow_lists(tool.output_schema)
        return tool


def shallow_lists(schema: dict) -> dict:
    """The output schema with each top-level list of records published as a list of objects, the record's
    fields left in `$defs` (documentation, not checked item by item).

    A client checks every answer against the tool's outputSchema (the official Python client with jsonschema,
    on every call): a 500-file commit.details took it 102 ms against the full record schema, 0.3 ms against
    this one. The answers are the same, and this server still checks them whole against the full models
    under FLEETDECK_CHECK_OUTPUTS (the test suite)."""
    for prop in (schema.get("properties") or {}).values():
        for alt in prop.get("anyOf", [prop]):
            ref = (alt.get("items") or {}).get("$ref", "") if alt.get("type") == "array" else ""
            if ref.startswith("#/$defs/"):
                name = ref.rsplit("/", 1)[1]
                alt["items"] = {"type": "object", "description": f"one {name}: its fields are {ref}"}
    return schema
