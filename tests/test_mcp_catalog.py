"""The tools' definitions come from a cache file (mcp_bridge/catalog.py) and tools are registered as calls
need them: `tools/list` must be byte for byte what the SDK itself publishes for the tools registered the
old way (every tool added with its output model), whether generated or read back from the cache; a stale,
broken or unwritable cache is regenerated or done without; and a lazily registered server refuses and
answers exactly like an eagerly registered one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.types import CallToolResult, ListToolsResult

from mcp_bridge import catalog
from mcp_bridge.catalog import Catalog, cache_path, source_key
from mcp_bridge.envelope import Out
from mcp_bridge.server import TOOL_MODULES, build_server
from mcp_bridge.toolkit import shallow_lists
from tests.fleets.dashboard_fleet import indexed_fleet
from tests.fleets.mcp_fleet import error_of, ok


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("catalog")
    index, _repos = indexed_fleet(base)
    index.close()
    return str(base / "fleet.db")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return cache_path()


def wire(tools) -> str:
    """`tools/list` as the SDK sends it."""
    return ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)


async def sdk_published(server) -> str:
    """What the SDK publishes for every tool of `server` added the pre-cache way: with its output model as
    the return annotation, so the SDK derives both schemas itself (plus our additionalProperties: false, and
    lists of records published as lists of objects: mcp_bridge.toolkit.shallow_lists)."""
    plain = MCPServer("plain")
    kit = server.kit
    for name, spec in kit.specs.items():
        def fn() -> None: ...
        fn.__name__ = spec.call.__name__
        fn.__signature__ = spec.signature.replace(return_annotation=Annotated[CallToolResult, kit.output_model(spec)])
        plain.add_tool(fn, name=name, title=spec.title, description=spec.description, annotations=spec.annotations)
    tools = await MCPServer.list_tools(plain)
    for tool in tools:
        tool.input_schema["additionalProperties"] = False
        if tool.output_schema is not None:
            tool.output_schema = shallow_lists(tool.output_schema)
    return wire(tools)


async def test_tools_list_is_what_the_sdk_publishes_generated_and_cached(db, cache):
    cold = build_server(db, lazy_tools=True)
    generated = await cold.list_tools()
    assert cache.exists() and len(generated) >= 50
    assert wire(generated) == await sdk_published(cold)
    warm = build_server(db, lazy_tools=True)
    cached = await warm.list_tools()
    assert wire(cached) == wire(generated)
    assert warm.kit is None and not warm._registered  # read from the file: no tool module imported
    # The same through the protocol, on both eras.
    for mode in ("auto", "legacy"):
        async with Client(build_server(db, lazy_tools=True), mode=mode) as client:
            listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == [t.name for t in generated]
        assert [t.output_schema for t in listed] == [t.output_schema for t in generated]


@pytest.mark.slow
async def test_a_stale_broken_or_unwritable_cache_is_regenerated_or_done_without(db, cache, tmp_path):
    expected = wire(await build_server(db, lazy_tools=True).list_tools())
    data = json.loads(cache.read_text())
    data["key"] = "0" * 64   # another version of the code
    data["tools"][0]["definition"]["description"] = "stale"
    cache.write_text(json.dumps(data))
    server = build_server(db, lazy_tools=True)
    assert wire(await server.list_tools()) == expected
    assert set(server.kit.specs) > {"audit.tail"}  # regenerated from the registered tools
    assert json.loads(cache.read_text())["key"] == source_key()
    for broken in ("{not json", json.dumps({"key": source_key(), "tools": [{"definition": {"name": 1}}]}), "[]"):
        cache.write_text(broken)
        assert wire(await build_server(db, lazy_tools=True).list_tools()) == expected
        assert Catalog.load(source_key()) is not None  # rewritten
    cache.unlink()
    cache.parent.rmdir()
    cache.parent.parent.rmdir()
    cache.parent.parent.write_text("a file where the cache folder should be")
    assert wire(await build_server(db, lazy_tools=True).list_tools()) == expected


def test_the_key_follows_every_source_file(tmp_path):
    roots = []
    for root in catalog.SOURCES:
        roots.append(tmp_path / root.name)
        shutil.copytree(root, roots[-1], ignore=shutil.ignore_patterns("__pycache__"))
    before = source_key(tuple(roots))
    assert before == source_key(tuple(roots)) and before != source_key(catalog.SOURCES[:1])
    deep = next(roots[0].glob("*/*.py"))
    deep.write_text(deep.read_text() + "\n# changed\n")
    assert source_key(tuple(roots)) != before


async def test_a_call_registers_only_its_own_module_and_builds_only_its_own_tool(db, cache):
    await build_server(db, lazy_tools=True).list_tools()   # writes the cache
    server = build_server(db, lazy_tools=True)
    server.toolkit()
    ok(await server.call_tool("fleet.repos", {"limit": 1}))
    assert server._registered == {"tools_audit", "tools_fleet"}
    assert server.kit.installed == {"fleet.repos"}
    assert error_of(await server.call_tool("no.such.tool", {}))[0] == "UNKNOWN_TOOL"
    assert server._registered == {"tools_audit", "tools_fleet"}   # an unknown name imports nothing
    # Without a cache every module is registered (and the cache written) before an unknown name is refused.
    cache.unlink()
    cold = build_server(db, lazy_tools=True)
    cold.toolkit()
    assert error_of(await cold.call_tool("no.such.tool", {}))[0] == "UNKNOWN_TOOL"
    assert cold._registered == set(TOOL_MODULES) and cache.exists()


REFUSALS = [("no.such.tool", {}), ("fleet.repos", {"limit": "many"}), ("fleet.repos", {"limit": 0}),
            ("fleet.repos", {"colour": "red"}), ("repo.brief", {}), ("repo.brief", {"repo": ""}),
            ("commit.details", {"repo": "x", "rev": "HEAD", "max_bytes": 1.5}),
            ("audit.tail", {"limit": 10_000})]


@pytest.mark.parametrize("warm", [False, True])
async def test_lazy_and_eager_servers_refuse_alike(db, cache, warm):
    if warm:
        await build_server(db, lazy_tools=True).list_tools()
    eager, lazy = build_server(db), build_server(db, lazy_tools=True)
    for name, args in REFUSALS:
        async with Client(lazy) as client:
            answer = await client.call_tool(name, args)
        assert error_of(answer) == error_of(await eager.call_tool(name, args)), (name, args)
        assert error_of(answer)[0] in ("UNKNOWN_TOOL", "BAD_ARGUMENT")


def test_answers_are_checked_against_the_output_model_when_asked(db, monkeypatch):
    """The suite runs with FLEETDECK_CHECK_OUTPUTS=1 (tests/conftest.py): an answer that does not fit its
    model fails the call as an unexpected error, as the SDK's own output validation did; without it the
    answer goes out as it is."""
    import anyio

    class Strict(Out):
        count: int

    for check, expected in (("1", "INTERNAL"), ("0", None)):
        monkeypatch.setenv("FLEETDECK_CHECK_OUTPUTS", check)
        server = build_server(db, lazy_tools=True)
        kit = server.toolkit()

        @kit.tool("test.wrong", Strict, "Answers a string where an int is due")
        def wrong() -> dict:
            """Wrong on purpose."""
            return {"count": "many"}

        answer = anyio.run(server.call_tool, "test.wrong", {})
        if expected:
            assert error_of(answer)[0] == expected
        else:
            assert ok(answer) == {"count": "many"}
