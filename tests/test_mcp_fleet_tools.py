"""MCP fleet tools in-process (both protocol eras): contracts, filters, paging, the same answers as the CLI."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from mcp import Client

from fleet.index.store import open_index
from fleet.views.queue import radar_view
from fleet.views.radar import radar
from fleet.views.repos import public_record
from mcp_bridge.server import build_server
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import git
from tests.fleets.mcp_fleet import call, error_of, ok

MODES = ["auto", "legacy"]


@pytest.fixture(scope="module")
def server(mcp_fleet):
    return build_server(str(mcp_fleet["_db"]))


@pytest.mark.parametrize("mode", MODES)
async def test_tool_list_contract(server, mode):
    async with Client(server, mode=mode) as client:
        tools = (await client.list_tools()).tools
    names = {t.name for t in tools}
    assert {"fleet.repos", "fleet.radar", "fleet.search", "repo.brief", "worktree.list", "submodule.status",
            "stash.list"} <= names
    for tool in tools:
        assert re.fullmatch(r"[a-z]+(\.[a-z_]+)+", tool.name), tool.name
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        assert tool.input_schema["additionalProperties"] is False
        for arg in tool.input_schema.get("properties", {}):
            assert re.fullmatch(r"[a-z][a-z0-9_]*", arg), (tool.name, arg)
        if tool.name.startswith(("fleet.", "repo.", "worktree.", "submodule.", "stash.", "diff.", "commit.",
                                 "conflict.", "agents.")):
            a = tool.annotations
            assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == \
                (True, False, True, False), tool.name
        assert tool.description and tool.title


@pytest.mark.parametrize("mode", MODES)
async def test_repos_lists_the_index_records(server, mcp_fleet, mode):
    data = ok(await call(server, "fleet.repos", {}, mode))
    with open_index(mcp_fleet["_db"]) as index:
        expected = [public_record(r) for r in index.repos()]
    assert data["repos"] == json.loads(json.dumps(expected))
    assert data["total"] == len(expected) and data["truncated"] is False and data["omitted_count"] == 0
    by_name = {r["name"]: r for r in data["repos"]}
    for name in ("alpha", "beta", "dirty", "super"):
        assert by_name[name]["head"] == git(mcp_fleet[name], "rev-parse", "HEAD").strip()
    assert by_name["detached"]["branch"] is None and by_name["detached"]["detached"] is True
    assert by_name["empty"]["head"] is None
    assert [w["path"] for w in by_name["alpha"]["worktrees"]] == [str(mcp_fleet["_root"] / "alpha-wt")]


async def test_repos_filters(server, mcp_fleet):
    async def page(args):
        return ok(await call(server, "fleet.repos", args))

    assert [r["name"] for r in (await page({"state": "diverged"}))["repos"]] == ["beta"]
    assert [r["name"] for r in (await page({"state": "conflicted"}))["repos"]] == ["conflicted", "rebasing"]
    assert [r["name"] for r in (await page({"state": "operation"}))["repos"]] == ["conflicted", "rebasing"]
    assert [r["name"] for r in (await page({"state": "detached"}))["repos"]] == ["detached", "rebasing"]
    dirty = [r["name"] for r in (await page({"state": "dirty"}))["repos"]]
    unmerged = ("UU", "AA", "DD", "AU", "UA", "DU", "UD")
    oracle = sorted(n for n, path in mcp_fleet.items() if not n.startswith("_")
                    and any(ln[:2] not in unmerged for ln in git(path, "status", "--porcelain").splitlines()))
    assert dirty == oracle and "dirty" in oracle
    assert [r["name"] for r in (await page({"name_contains": "ALP"}))["repos"]] == ["alpha"]
    assert (await page({"root": str(mcp_fleet["_root"]), "name_contains": "beta"}))["total"] == 3
    assert (await page({"root": "/nowhere"}))["total"] == 0


async def test_repos_paging_walks_every_record_once(server):
    full = ok(await call(server, "fleet.repos", {}))["repos"]
    seen, cursor = [], None
    while True:
        args = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        data = ok(await call(server, "fleet.repos", args))
        seen += data["repos"]
        assert data["omitted_count"] == len(full) - len(seen)
        assert data["truncated"] is (data["omitted_count"] > 0)
        cursor = data["next_cursor"]
        if cursor is None:
            break
    assert seen == full
    code, _ = error_of(await call(server, "fleet.repos", {"cursor": "x1"}))
    assert code == "BAD_ARGUMENT"
    code, message = error_of(await call(server, "fleet.repos", {"state": "sleepy"}))
    assert code == "BAD_ARGUMENT" and "state" in message


@pytest.mark.parametrize("mode", MODES)
async def test_radar_is_the_cli_radar(server, mcp_fleet, mode):
    data = ok(await call(server, "fleet.radar", {}, mode))
    assert data.pop("freshness")["watcher"]["state"] == "absent"
    with open_index(mcp_fleet["_db"]) as index:
        ranked = radar(index)
        assert data == json.loads(json.dumps(radar_view(index)))
    assert [e["path"] for e in data["entries"]] == [e["path"] for e in ranked]
    cli = subprocess.run(fleetdeck_argv("radar", "--json"), capture_output=True, check=True,
                         env=fleetdeck_env(FLEETDECK_DB=str(mcp_fleet["_db"])))
    assert data == json.loads(cli.stdout)
    assert data["entries"][0]["status"] == "conflict"
    capped = ok(await call(server, "fleet.radar", {"limit": 2}, mode))
    assert capped["entries"] == data["entries"][:2]
    assert capped["truncated"] is True and capped["omitted_count"] == data["total"] - 2


async def test_search_branches_commits_and_reflog(server, mcp_fleet):
    data = ok(await call(server, "fleet.search", {"query": "LOGIN"}))
    branches = [m for m in data["matches"] if m["kind"] == "branch"]
    assert [(m["repo"], m["name"]) for m in branches] == [("alpha", "feature/login")]
    assert branches[0]["sha"] == git(mcp_fleet["alpha"], "rev-parse", "feature/login").strip()

    data = ok(await call(server, "fleet.search", {"query": "feat: add app", "kinds": ["commit"]}))
    assert [(m["repo"], m["sha"], m["text"]) for m in data["matches"]] == [
        ("alpha", git(mcp_fleet["alpha"], "rev-parse", "main").strip(), "feat: add app")]

    data = ok(await call(server, "fleet.search", {"query": "checkout: moving from topic", "kinds": ["reflog"]}))
    assert {m["repo"] for m in data["matches"]} == {"conflicted", "rebasing"}

    short = ok(await call(server, "fleet.search", {"query": "iN", "kinds": ["commit"]}))  # below trigram size
    assert {m["text"] for m in short["matches"]} >= {"binary logo", "main change", "main edit"}
    assert all("in" in m["text"].lower() for m in short["matches"])

    capped = ok(await call(server, "fleet.search", {"query": "commit", "limit": 2}))
    assert len(capped["matches"]) == 2 and capped["truncated"] is True
    assert capped["omitted_count"] == capped["match_count"] - 2

    code, _ = error_of(await call(server, "fleet.search", {"query": "x", "repos": ["nope"]}))
    assert code == "REPO_NOT_IN_FLEET"


@pytest.mark.parametrize("mode", MODES)
async def test_errors_are_structured(server, mode):
    code, message = error_of(await call(server, "no.such_tool", {}, mode))
    assert code == "UNKNOWN_TOOL"
    code, message = error_of(await call(server, "fleet.radar", {"limit": "many"}, mode))
    assert code == "BAD_ARGUMENT" and "limit" in message
    code, message = error_of(await call(server, "fleet.radar", {"limti": 3}, mode))
    assert code == "BAD_ARGUMENT" and "limti" in message
    code, message = error_of(await call(server, "fleet.search", {"query": "x" * 100_000}, mode))
    assert code == "BAD_ARGUMENT" and len(message) < 300
    assert ok(await call(server, "fleet.radar", {"limit": 1}, mode))["entries"]


@pytest.mark.parametrize("mode", MODES)
async def test_digest_is_the_cli_digest(server, mcp_fleet, mode):
    from fleet.views.digest import digest

    data = ok(await call(server, "fleet.digest", {"since": 0}, mode))
    assert data.pop("freshness")["refreshed"] == []
    with open_index(mcp_fleet["_db"]) as index:
        expected = digest(index, 0)
    assert data == json.loads(json.dumps(expected))
    cli = subprocess.run(fleetdeck_argv("digest", "--since", "0", "--format", "json"), capture_output=True,
                         check=True, env=fleetdeck_env(FLEETDECK_DB=str(mcp_fleet["_db"])))
    assert data["events"] == json.loads(cli.stdout)["events"]
    heads = {e["new_sha"] for e in data["events"] if e["repo"] == "alpha" and e["kind"] == "commit"}
    assert git(mcp_fleet["alpha"], "rev-parse", "main").strip() in heads
    few = ok(await call(server, "fleet.digest", {"since": "3650d", "max_events": 2, "kinds": ["commit"]}, mode))
    assert len(few["events"]) == 2 and few["truncated"] is True
    assert few["omitted_count"] == few["event_count"] - 2 and {e["kind"] for e in few["events"]} == {"commit"}
    assert error_of(await call(server, "fleet.digest", {"since": "yesterday-ish"}, mode))[0] == "BAD_ARGUMENT"
    assert error_of(await call(server, "fleet.digest", {"since": "9" * 1000}, mode))[0] == "BAD_ARGUMENT"
    assert error_of(await call(server, "fleet.digest", {"repos": ["nope"]}, mode))[0] == "REPO_NOT_IN_FLEET"
