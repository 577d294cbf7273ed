"""Security: scoping (paths outside, `..`, symlink escapes, prefix traps), flag injection on every ref
parameter (including refs that exist on disk with such names), hostile sizes and NUL/newline names.
Everything goes through one client session, and the session still answers a normal call at the end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client

from mcp_bridge.server import build_server
from tests.fleets.gitbuild import git, init_repo, write
from tests.fleets.mcp_fleet import build_fleet, error_of, ok

REPO_TOOLS = {
    "repo.brief": {}, "repo.status": {}, "repo.changes": {}, "repo.history": {}, "repo.reflog": {},
    "repo.refs": {}, "commit.details": {"rev": "HEAD"}, "diff.refs": {"base": "HEAD"}, "diff.text": {},
    "repo.blame": {"file": "README.md"}, "repo.conflict_preflight": {"target": "HEAD"}, "conflict.read": {},
    "worktree.list": {}, "submodule.status": {}, "stash.list": {},
}
REF_PARAMS = [
    ("repo.history", "ref", {}), ("repo.reflog", "ref", {}), ("commit.details", "rev", {}),
    ("diff.refs", "base", {}), ("diff.refs", "head", {"base": "HEAD~1"}),
    ("diff.text", "base", {}), ("diff.text", "head", {"base": "HEAD~1"}),
    ("repo.blame", "ref", {"file": "README.md"}),
    ("repo.conflict_preflight", "target", {}), ("repo.conflict_preflight", "source", {"target": "HEAD"}),
]
EVIL_REFS = ["--output=evil.txt", "--orphan=evil", "-p", "--help", "-", "HEAD..--output=evil.txt",
             "--output=evil.txt...HEAD", "HEAD...-p", "HEAD\n--output=evil.txt", "main\0--output=evil.txt"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("mcpsec")
    fleet = build_fleet(base)
    root = fleet["_root"]
    outside = init_repo(base / "outside" / "repo", commits=1)
    prefix_twin = init_repo(Path(str(root) + "2") / "repo", commits=1)
    os.symlink(outside, root / "link-out")
    os.symlink(fleet["alpha"], root / "link-in")
    evil = fleet["evil"]
    os.symlink("/etc/passwd", evil / "escape")
    write(evil / "new\nline.txt", "x\n")
    write(evil / "tab\there.txt", "y\n")
    return {**fleet, "base": base, "outside": outside, "twin": prefix_twin}


@pytest.fixture(scope="module")
def server(world):
    return build_server(str(world["_db"]))


def no_evil_files(world) -> list[str]:
    found = []
    for top in (world["base"], Path.cwd()):
        for dirpath, _dirs, files in os.walk(top):
            found += [os.path.join(dirpath, f) for f in files if f.startswith("evil") and "refs" not in dirpath]
    return found


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_scoping_on_every_repo_tool(server, world, mode):
    root = world["_root"]
    refused = {
        str(world["outside"]): "REPO_NOT_IN_FLEET",
        f"{root}/../outside/repo": "REPO_NOT_IN_FLEET",
        str(root / "link-out"): "REPO_NOT_IN_FLEET",
        str(world["twin"]): "REPO_NOT_IN_FLEET",
        "outside/repo": "REPO_NOT_IN_FLEET",
        "../outside/repo": "REPO_NOT_IN_FLEET",
        "/etc": "REPO_NOT_IN_FLEET",
        str(root): "REPO_NOT_IN_FLEET",
        str(root / "missing"): "BAD_PATH",
        "alpha\0": "BAD_PATH",
        f"{root}/alpha\n": "BAD_PATH",
        "": "BAD_ARGUMENT",
        "x" * 5000: "BAD_ARGUMENT",
    }
    async with Client(server, mode=mode) as client:
        for tool, extra in REPO_TOOLS.items():
            for repo, code in refused.items():
                result = await client.call_tool(tool, {"repo": repo, **extra})
                assert error_of(result)[0] == code, (tool, repo, result.content[0].text)
            wrong_type = await client.call_tool(tool, {"repo": ["alpha"], **extra})
            assert error_of(wrong_type)[0] == "BAD_ARGUMENT"
        via_link = ok(await client.call_tool("repo.status", {"repo": str(root / "link-in")}))
        assert via_link["head"] == git(world["alpha"], "rev-parse", "HEAD").strip()
        assert ok(await client.call_tool("repo.brief", {"repo": "alpha"}))["head"]["branch"] == "main"


@pytest.mark.slow
async def test_flag_injection_on_every_ref_parameter(server, world):
    evil = world["evil"]
    assert "--output=evil.txt" in git(evil, "for-each-ref", "--format=%(refname:short)")  # the trap exists
    async with Client(server, mode="legacy") as client:
        for tool, param, extra in REF_PARAMS:
            for value in EVIL_REFS:
                result = await client.call_tool(tool, {"repo": "evil", **extra, param: value})
                code, message = error_of(result)
                assert code in ("BAD_REF", "BAD_ARGUMENT"), (tool, param, value, message)
                if "\n" not in value and "\0" not in value:
                    assert code == "BAD_REF", (tool, param, value, message)
        # dashes in paths are only ever paths: they come after `--`
        lit = ok(await client.call_tool("repo.changes", {"repo": "evil", "path_filter": "--output=evil.txt"}))
        assert lit["changes"] == []
        hist = ok(await client.call_tool("repo.history", {"repo": "evil", "path_filter": "-p"}))
        assert hist["commits"] == []
        code, _ = error_of(await client.call_tool("repo.blame", {"repo": "evil", "file": "--output=evil.txt"}))
        assert code == "NOT_FOUND"
        assert ok(await client.call_tool("fleet.radar", {}))["entries"]
    assert no_evil_files(world) == []
    assert git(evil, "status", "--porcelain=v1", "-z").split("\0")[:-1] == [
        "?? escape", "?? new\nline.txt", "?? tab\there.txt"]


async def test_paths_inside_the_repo_cannot_escape(server, world):
    async with Client(server) as client:
        for tool, extra in (("repo.changes", {}), ("diff.text", {}), ("repo.history", {}),
                            ("diff.refs", {"base": "HEAD~1"})):
            for bad in ("../outside", "/etc/passwd", ".git/config", "a/../../b", "x\ny", "a\0b"):
                code, msg = error_of(await client.call_tool(tool, {"repo": "evil", **extra, "path_filter": bad}))
                assert code == "BAD_PATH", (tool, bad, msg)
        code, msg = error_of(await client.call_tool("repo.blame", {"repo": "evil", "file": "escape"}))
        assert code == "BAD_PATH" and "symlink" in msg
        for bad in ("../../etc/passwd", "/etc/passwd"):
            assert error_of(await client.call_tool("repo.blame", {"repo": "evil", "file": bad}))[0] == "BAD_PATH"


async def test_newline_and_tab_names_stay_exact(server, world):
    async with Client(server) as client:
        status = ok(await client.call_tool("repo.status", {"repo": "evil"}))
        assert status["untracked"] == ["escape", "new\nline.txt", "tab\there.txt"]
        changes = ok(await client.call_tool("repo.changes", {"repo": "evil"}))
        assert [c["path"] for c in changes["changes"]] == ["escape", "new\nline.txt", "tab\there.txt"]


async def test_hostile_sizes_then_a_normal_call(server, world):
    async with Client(server, mode="legacy") as client:
        hostile = [
            ("fleet.search", {"query": "q" * 1_000_000}),
            ("fleet.search", {"query": "commit", "repos": ["alpha"] * 10_000}),
            ("fleet.search", {"query": "a\0b"}),
            ("fleet.repos", {"limit": 10**12}),
            ("fleet.repos", {"cursor": "9" * 1000}),
            ("fleet.radar", {"limit": -5}),
            ("repo.history", {"repo": "alpha", "limit": 10**9}),
            ("repo.history", {"repo": "alpha", "since": "x" * 10_000}),
            ("diff.text", {"repo": "alpha", "max_bytes": 10**12}),
            ("repo.blame", {"repo": "alpha", "file": "README.md", "start_line": 10**8}),
            ("repo.reflog", {"repo": "alpha", "ref": "a" * 100_000}),
            ("commit.details", {"repo": "alpha", "rev": "HEAD", "unified": 10**6}),
            ("repo.brief", {"repo": "alpha", "recent_commits": 10**6}),
            ("repo.status", {"repo": {"nested": ["x"] * 1000}}),
        ]
        for tool, args in hostile:
            result = await client.call_tool(tool, args)
            code, message = error_of(result)
            assert code == "BAD_ARGUMENT", (tool, code, message)
            assert len(message) < 1000
        last = ok(await client.call_tool("repo.brief", {"repo": "alpha"}))
        assert last["head"]["sha"] == git(world["alpha"], "rev-parse", "--short=12", "HEAD").strip()
