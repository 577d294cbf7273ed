"""No write without a proposal: an agent's patch files go to fleetdeck's own folder, never into a repository.

The attack as found: patch.generate / patch.remove (official MCP client) created and overwrote a tracked
`patches/*.patch` of a patch-package project, which `npm install` applies, with no proposal. Now both write
only into `patches/` beside the index (0700, outside every repository), and `patch_file_write` is the
proposal that puts a patch file into a repository once a person approves.
"""

from __future__ import annotations

import stat

import pytest

from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.ops import service
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import commit_file, git, init_repo
from tests.fleets.mcp_fleet import call, error_of, ok

LIB_PATCH = ("diff --git a/node_modules/lib/index.js b/node_modules/lib/index.js\n"
             "--- a/node_modules/lib/index.js\n+++ b/node_modules/lib/index.js\n@@ -1 +1 @@\n"
             "-module.exports = 1;\n+module.exports = 2;\n")


@pytest.fixture
def fleet(tmp_path):
    root = tmp_path / "fleet"
    repo = init_repo(root / "app", commits=1)
    commit_file(repo, "src/main.py", "def main():\n    return 1\n", "add main")
    commit_file(repo, "patches/lib+1.0.0.patch", LIB_PATCH, "patch-package patch")
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"root": root, "repo": repo, "db": db, "tmp": tmp_path, "server": build_server(str(db))}


CHANGE = [{"mode": "file_content", "path": "src/main.py", "new_content": "import os; os.system('id')\n"}]


async def test_generate_and_remove_never_write_into_a_repository(fleet):
    server, repo = fleet["server"], fleet["repo"]
    tracked = repo / "patches" / "lib+1.0.0.patch"
    before = tracked.read_bytes()
    for mode in ("overwrite", "append", "upsert"):
        code, message = error_of(await call(server, "patch.generate", {
            "repo": "app", "changes": CHANGE, "patch_file": str(tracked), "write_mode": mode}))
        assert code == "BAD_PATH" and "patch_file_write" in message, message
    code, _ = error_of(await call(server, "patch.generate", {
        "repo": "app", "changes": CHANGE, "patch_file": str(repo / "patches" / "new.patch")}))
    assert code == "BAD_PATH"
    code, _ = error_of(await call(server, "patch.remove", {"patch_file": str(tracked),
                                                           "paths": ["node_modules/lib/index.js"]}))
    assert code == "BAD_PATH"
    assert tracked.read_bytes() == before and not (repo / "patches" / "new.patch").exists()
    assert git(repo, "status", "--porcelain", "-uall") == ""
    listing = ok(await call(server, "patch.inspect", {"patch_file": str(tracked)}))  # reading stays allowed
    assert listing["entry_count"] == 1


async def test_patch_files_go_to_fleetdecks_own_folder(fleet):
    server, repo = fleet["server"], fleet["repo"]
    made = ok(await call(server, "patch.generate", {"repo": "app", "changes": CHANGE, "patch_file": "fix.patch"}))
    folder = fleet["tmp"] / "patches"
    assert made["patch_file"]["patch_file"] == str(folder / "fix.patch") and (folder / "fix.patch").is_file()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    again = ok(await call(server, "patch.generate", {"repo": "app", "changes": CHANGE, "write_mode": "upsert",
                                                     "patch_file": str(folder / "fix.patch")}))
    assert again["patch_file"]["written"] is False
    assert ok(await call(server, "patch.inspect", {"patch_file": "fix.patch"}))["entry_count"] == 1
    assert ok(await call(server, "patch.remove", {"patch_file": "fix.patch", "indices": [0]}))["entries_after"] == 0
    assert git(repo, "status", "--porcelain", "-uall") == ""


@pytest.mark.slow
async def test_patch_file_write_is_a_proposal_a_person_approves(fleet):
    server, repo, db = fleet["server"], fleet["repo"], fleet["db"]
    ok(await call(server, "patch.generate", {"repo": "app", "changes": CHANGE, "patch_file": "fix.patch"}))
    made = ok(await call(server, "operation.preview.patch_file_write", {
        "repo": "app", "reason": "ship the fix as a patch-package patch", "path": "patches/app+1.0.0.patch",
        "patch_file": "fix.patch"}))
    assert made["status"] == "pending" and made["preview"]["writes"] == "patches/app+1.0.0.patch"
    assert [e["path"] for e in made["preview"]["patch_file_entries"]] == ["src/main.py"]
    assert "+import os; os.system('id')" in made["preview"]["diff"]
    assert not (repo / "patches" / "app+1.0.0.patch").exists()  # nothing written before a person approves
    with open_index(db) as index:
        done = service.approve(index, made["proposal_id"], "cli")
        assert done["status"] == "completed", done["error"]
        assert (repo / "patches" / "app+1.0.0.patch").read_text() == (fleet["tmp"] / "patches" / "fix.patch").read_text()
        undone = service.undo(index, done["id"], "cli")
        assert undone["status"] == "completed", undone["error"]
    assert not (repo / "patches" / "app+1.0.0.patch").exists()  # undo takes the new file away again


def test_patch_file_write_refuses_what_is_not_a_patch_file(fleet):
    with open_index(fleet["db"]) as index:
        for args, code in (({"path": "src/evil.py", "patch": LIB_PATCH}, "BAD_PATH"),
                           ({"path": "patches/x.patch", "patch": "not a patch\n"}, "BAD_ARGUMENT"),
                           ({"path": "patches/x.patch", "patch_file": "/etc/passwd"}, "BAD_PATH"),
                           ({"path": "patches/x.patch"}, "BAD_ARGUMENT")):
            with pytest.raises(FleetError) as err:
                service.propose(index, "codex", "patch_file_write", str(fleet["repo"]), args, "x")
            assert err.value.code == code, (args, err.value.message)
