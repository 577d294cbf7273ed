"""The tools' published definitions (what `tools/list` answers), kept in a cache file between runs.

Generating them means importing every tool module and having the SDK build each tool's argument model and
both JSON schemas: about half a second, most of a `fleetdeck mcp` connect after the SDK's own import. The
definitions depend only on the code, so they are generated once (by the SDK, from the registered tools:
`mcp_bridge.toolkit.Toolkit.definitions`) and written to `$XDG_CACHE_HOME/fleetdeck/mcp-tools.json` under a
key: a hash of every source file of `fleet` and `mcp_bridge`, of the SDK's files that generate the
definitions, and of pydantic's and Python's versions. A file with another key, or one that cannot be read
or parsed, is ignored and rewritten. Each entry also names the module that registers the tool, so a call
imports that module only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import mcp_types
import pydantic
import pydantic_core
from mcp.server.mcpserver.tools import base as sdk_tools
from mcp.server.mcpserver.utilities import func_metadata as sdk_metadata
from mcp.types import Tool

import fleet
import mcp_bridge
from fleet.xdg import cache_home

log = logging.getLogger("fleetdeck.mcp")
FORMAT = 1


def cache_path() -> Path:
    """`$XDG_CACHE_HOME/fleetdeck/mcp-tools.json` (`~/.cache/...` without it)."""
    return cache_home() / "fleetdeck" / "mcp-tools.json"


SOURCES = (Path(fleet.__file__).parent, Path(mcp_bridge.__file__).parent)
SDK_FILES = (sdk_tools.__file__, sdk_metadata.__file__, mcp_types.__file__, mcp_types._types.__file__)


def source_key(roots: tuple[Path, ...] = SOURCES) -> str:
    """What the definitions are a function of: every source file under `roots` (the tools' signatures and
    models use constants and records from all over `fleet`) and what generates them (the SDK's files that
    build tools and schemas, pydantic, Python). Hashing is a few ms; asking package metadata for the SDK's
    version would cost as much again."""
    digest = hashlib.sha256()
    for part in (str(FORMAT), fleet.__version__, pydantic.VERSION, pydantic_core.__version__, sys.version):
        digest.update(part.encode() + b"\0")
    for name in SDK_FILES:
        with open(name, "rb") as fh:
            digest.update(fh.read() + b"\0")
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path, "rb") as fh:
                        digest.update(os.path.relpath(path, root.parent).encode() + b"\0" + fh.read() + b"\0")
    return digest.hexdigest()


class Catalog:
    """The definitions (as the SDK's `Tool` models, in registration order) and each tool's module."""

    def __init__(self, tools: list[Tool], modules: dict[str, str]) -> None:
        self.tools = tools
        self.modules = modules

    @classmethod
    def load(cls, key: str, path: Path | None = None) -> "Catalog | None":
        """The cached catalog when the file holds one for `key`; None otherwise (missing, stale, broken)."""
        path = path or cache_path()
        try:
            with open(path, "rb") as fh:
                data = json.load(fh)
            if not isinstance(data, dict) or data.get("key") != key:
                return None
            entries = data["tools"]
            return cls([Tool.model_validate(e["definition"]) for e in entries],
                       {e["definition"]["name"]: str(e["module"]) for e in entries})
        except FileNotFoundError:
            return None
        except Exception as exc:  # a broken cache is regenerated, never an error
            log.warning("ignoring the tool cache %s: %s", path, exc)
            return None

    def save(self, key: str, path: Path | None = None) -> None:
        """Write the catalog for `key` (atomically: readers see the old file or the new one); best-effort."""
        path = path or cache_path()
        entries = [{"module": self.modules[t.name], "definition": wire(t)} for t in self.tools]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".mcp-tools-", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump({"key": key, "tools": entries}, fh, ensure_ascii=False, separators=(",", ":"))
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("tool cache not written to %s: %s", path, exc)


def wire(tool: Tool) -> dict[str, Any]:
    """A definition as `tools/list` sends it (the SDK dumps results by alias, without null fields)."""
    return tool.model_dump(by_alias=True, mode="json", exclude_none=True)
