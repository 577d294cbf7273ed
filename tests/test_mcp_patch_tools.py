"""patch.* over MCP: diffs git accepts, a patch-file store confined to the fleet roots, repos untouched."""

from __future__ import annotations

import os

import pytest

from mcp_bridge.server import build_server
from tests.fleets.gitbuild import commit_file, git, init_repo
from fleet.index.store import open_index
from fleet.index.scan import scan
from tests.fleets.mcp_fleet import call, error_of, ok


@pytest.fixture
def fleet(tmp_path):
    root = tmp_path / "fleet"
    repo = init_repo(root / "app", commits=1)
    commit_file(repo, "src/main.py", "def main():\n    return 1\n", "add main")
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"root": root, "repo": repo, "db": db, "tmp": tmp_path, "server": build_server(str(db))}


def status(repo) -> str:
    return git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")


@pytest.mark.slow
async def test_generate_every_mode_and_git_accepts_it(fleet):
    server, repo = fleet["server"], fleet["repo"]
    before = status(repo)
    changes = [
        {"mode": "search_replace", "path": "src/main.py",
         "replacements": [{"search": "return 1", "replace": "return 2", "line_hint": 2}]},
        {"mode": "create_file", "path": "docs/new file.md", "new_content": "héllo\n"},
        {"mode": "rename_file", "path": "README.md", "new_path": "README.txt"},
    ]
    data = ok(await call(server, "patch.generate", {"repo": "app", "changes": changes}))
    assert data["git_check"]["ok"] is True and data["files_changed"] == 3
    assert git(repo, "apply", "--check", "-", input=data["patch"].encode()) == ""
    assert status(repo) == before  # nothing in the repository changed
    pair = ok(await call(server, "patch.generate", {"repo": str(repo), "check": False, "changes": [
        {"mode": "text_pair", "path": "src/main.py", "old_text": "a\n", "new_text": "b\n"}]}))
    assert pair["git_check"] is None and "+b" in pair["patch"]
    code, msg = error_of(await call(server, "patch.generate", {"repo": "app", "changes": [
        {"mode": "search_replace", "path": "src/main.py", "replacements": [{"search": "nowhere", "replace": ""}]}]}))
    assert code in ("NOT_FOUND", "BAD_ARGUMENT"), msg
    code, _ = error_of(await call(server, "patch.generate", {"repo": "app", "changes": [
        {"mode": "delete_file", "path": "../outside.txt"}]}))
    assert code == "BAD_PATH"
    code, _ = error_of(await call(server, "patch.generate", {"repo": "app", "changes": [
        {"mode": "teleport", "path": "x"}]}))
    assert code == "BAD_ARGUMENT"


async def test_patch_file_store_in_fleetdecks_folder_only(fleet):
    """Writes go to fleetdeck's patch folder (tests/test_mcp_patch_folder.py: never into a repository, and
    no longer anywhere in a fleet root); reads also take a patch file inside a fleet root."""
    server, root = fleet["server"], fleet["root"]
    target = str(fleet["tmp"] / "patches" / "work.patch")
    made = ok(await call(server, "patch.generate", {"repo": "app", "patch_file": "work.patch", "changes": [
        {"mode": "file_content", "path": "src/main.py", "new_content": "def main():\n    return 3\n"},
        {"mode": "create_file", "path": "notes.md", "new_content": "n\n"}]}))
    assert made["patch_file"]["entries_after"] == 2 and os.path.isfile(target)
    listing = ok(await call(server, "patch.inspect", {"patch_file": target}))
    assert [e["path"] for e in listing["entries"]] == ["src/main.py", "notes.md"]
    valid = ok(await call(server, "patch.validate", {"patch_file": target, "repo": "app"}))
    assert valid["valid"] is True and valid["git_check"]["ok"] is True
    removed = ok(await call(server, "patch.remove", {"patch_file": target, "paths": ["notes.md"]}))
    assert removed["entries_after"] == 1
    broken = ok(await call(server, "patch.validate", {"patch": "not a patch\n@@ nonsense"}))
    assert broken["valid"] is False

    outside = fleet["tmp"] / "outside"
    outside.mkdir()
    os.symlink(outside, root / "escape")
    for bad in (str(outside / "x.patch"), str(root / "escape" / "x.patch"), f"{root}/../outside/x.patch",
                "sub/relative.patch", str(root / "x.txt")):
        for tool, args in (("patch.generate", {"repo": "app", "changes": [
                {"mode": "delete_file", "path": "README.md"}]}), ("patch.inspect", {}), ("patch.validate", {})):
            code, msg = error_of(await call(server, tool, {**args, "patch_file": bad}))
            assert code == "BAD_PATH", (tool, bad, msg)
    assert list(outside.iterdir()) == []
    assert ok(await call(server, "patch.inspect", {"patch_file": target}))["entry_count"] == 1
    code, _ = error_of(await call(server, "patch.generate", {"repo": "app", "patch_file": str(root / "fleet.patch"),
                                                             "changes": [{"mode": "delete_file", "path": "README.md"}]}))
    assert code == "BAD_PATH" and not (root / "fleet.patch").exists()  # a fleet root is no longer a place to write


async def test_patch_tool_annotations(fleet):
    from mcp import Client

    async with Client(fleet["server"]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["patch.generate"].annotations.read_only_hint is False
    assert tools["patch.remove"].annotations.destructive_hint is True
    assert tools["patch.inspect"].annotations.read_only_hint is True
    assert tools["patch.validate"].annotations.read_only_hint is True
