"""Every operation end to end: the official MCP client over stdio proposes, the person approves with the
CLI, git confirms the change, the person undoes it (or an agent proposes the restore), git confirms the
state before. One `fleetdeck mcp` session for all ops; the CLI runs in-process (its subprocess form is
covered in test_ops_mcp)."""

from __future__ import annotations

import json

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from fleet.cli import main as cli_main
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.ops.catalog import OPS as CATALOG
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, noninteractive_approver
from tests.fleets.gitbuild import bare_remote, commit_file, git, init_repo
from tests.fleets.mcp_fleet import error_of, ok
from tests.fleets.ops_fleet import build, state

PATCH = ("diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n"
         "@@ -1 +1,2 @@\n print('one')\n+print('two')\n")


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    noninteractive_approver(tmp_path / "config")  # the CLI's --yes decides without a terminal
    built = build(tmp_path)
    work, root = built["work"], built["root"]
    remote = bare_remote(tmp_path / "remote.git")
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "-u", "origin", "main")
    git(work, "checkout", "-q", "topic")
    git(work, "stash", "-q", "-u")
    commit_file(work, "topic.txt", "topic\n", "topic work")
    git(work, "checkout", "-q", "main")
    git(work, "stash", "pop", "-q")
    lib = init_repo(root / "lib", commits=2)
    sup = init_repo(root / "super", commits=1)
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "libs/lib")
    git(sup, "commit", "-q", "-m", "add submodule")
    git(sup / "libs" / "lib", "checkout", "-q", "HEAD~1")
    scan(built["index"], [str(root)])
    built["index"].close()
    built.update(remote=remote, super=sup)
    return built


def cli(fleet, capsys, *args: str) -> dict:
    capsys.readouterr()
    code = cli_main(["--db", str(fleet["db"]), *args, "--json"])
    out = capsys.readouterr().out
    return {"code": code, **(json.loads(out) if out.strip() else {})}


def _subjects(repo, n=1):
    return git(repo, "log", f"-{n}", "--format=%s").split("\n")[:n]


def _snapshot_then_lose(fleet) -> None:
    """Untracked notes the safety net keeps, then an agent's `rm`: the snapshot to propose back."""
    work = fleet["work"]
    (work / "notes.txt").write_text("notes worth keeping\n")
    made = take(WorkTree(str(work), str(work / ".git"), str(work / ".git")), fleet["db"], "manual")
    fleet["snapshot"] = made["id"]
    (work / "notes.txt").unlink()


def cases(fleet):
    work, root, sup = fleet["work"], fleet["root"], fleet["super"]
    staged = lambda: git(work, "diff", "--cached", "--name-only").split()  # noqa: E731
    return [
        ("stage", "work", {"paths": ["README.md"]}, None, lambda: staged() == ["README.md"]),
        ("unstage", "work", {"paths": ["README.md"]}, lambda: git(work, "add", "README.md"), lambda: staged() == [],
         lambda: git(work, "reset", "-q", "--", "README.md")),
        ("stage_hunks", "work", {"path": "README.md", "hunks": "FROM_CHANGES"}, None,
         lambda: staged() == ["README.md"]),
        ("commit", "work", {"message": "e2e commit", "paths": ["README.md"]}, None,
         lambda: _subjects(work) == ["e2e commit"]),
        ("branch", "work", {"name": "feature/e2e"}, None,
         lambda: git(work, "rev-parse", "feature/e2e") == git(work, "rev-parse", "HEAD")),
        ("checkout", "work", {"ref": "topic"}, None,
         lambda: git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/topic"),
        ("stash", "work", {"message": "wip", "include_untracked": True}, None,
         lambda: "wip" in git(work, "stash", "list")),
        ("stash_pop", "work", {}, lambda: git(work, "stash", "-q"), lambda: git(work, "stash", "list") == "",
         lambda: git(work, "stash", "pop", "-q")),
        ("reset", "work", {"mode": "hard", "target": "HEAD~1"}, None,
         lambda: _subjects(work) == ["commit 1"]),
        ("discard", "work", {"paths": ["README.md"]}, None,
         lambda: git(work, "diff", "--name-only") == ""),
        ("merge", "work", {"source": "topic"}, None,
         lambda: git(work, "merge-base", "--is-ancestor", "topic", "main", check=False) == ""
         and (work / "topic.txt").exists()),
        ("patch", "work", {"patch": PATCH}, None,
         lambda: (work / "src/app.py").read_text() == "print('one')\nprint('two')\n"),
        ("patch_file_write", "work", {"path": "patches/app.patch", "patch": PATCH.replace("two", "three")},
         lambda: commit_file(work, "patches/app.patch", PATCH, "a patch-package patch"),
         lambda: (work / "patches/app.patch").read_text() == PATCH.replace("two", "three")),
        ("branch_delete", None, {"targets": [{"repo": "work", "branches": ["topic"]}], "merged_only": False},
         None, lambda: git(work, "branch", "--list", "topic") == ""),
        ("worktree", "work", {"path": str(root / "work-e2e"), "branch": "e2e-wt", "new_branch": True}, None,
         lambda: (root / "work-e2e" / ".git").exists()),
        ("submodule_pointer", "super", {"path": "libs/lib", "action": "return"}, None,
         lambda: git(sup / "libs/lib", "rev-parse", "HEAD").strip() == git(sup, "ls-tree", "HEAD", "libs/lib").split()[2]),
        ("plan", "work", {"steps": [{"op": "stage", "args": {"all": True}},
                                    {"op": "commit", "args": {"message": "planned"}}]}, None,
         lambda: _subjects(work) == ["planned"] and git(work, "status", "--porcelain") == ""),
        ("rebase", "work", {"onto": "topic"}, lambda: git(work, "stash", "-q", "-u"),
         lambda: git(work, "merge-base", "--is-ancestor", "topic", "main", check=False) == "",
         lambda: git(work, "stash", "pop", "-q")),
        ("restore_snapshot", "work", {"snapshot": "FROM_SNAPSHOT"}, lambda: _snapshot_then_lose(fleet),
         lambda: (work / "notes.txt").read_text() == "notes worth keeping\n"),
        ("push", "work", {}, lambda: commit_file(work, "pushed.txt", "p\n", "to push"),
         lambda: git(fleet["remote"], "rev-parse", "main") == git(work, "rev-parse", "main")),
    ]


@pytest.mark.slow
async def test_every_op_propose_approve_undo(fleet, capsys):
    argv = fleetdeck_argv("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=fleetdeck_env(FLEETDECK_DB=str(fleet["db"])))
    covered = set()
    async with Client(params, client_info=Implementation(name="codex", version="1")) as client:
        for op, repo, args, prepare, check, *cleanup in cases(fleet):
            where = fleet["super"] if repo == "super" else fleet["work"]
            if prepare:
                prepare()
            if args.get("snapshot") == "FROM_SNAPSHOT":
                args = {**args, "snapshot": fleet["snapshot"]}
            if args.get("hunks") == "FROM_CHANGES":
                changes = ok(await client.call_tool("repo.changes", {"repo": "work", "path_filter": "README.md"}))
                args = {**args, "hunks": [changes["changes"][0]["hunks"][0]["id"]]}
            before = state(where)
            call = {"reason": f"e2e {op}", **args} if repo is None else {"repo": repo, "reason": f"e2e {op}", **args}
            made = ok(await client.call_tool(f"operation.preview.{op}", call))
            assert made["status"] == "pending" and state(where) == before, op
            approved = cli(fleet, capsys, "proposals", "approve", made["proposal_id"], "--yes")
            assert approved["status"] == "completed", (op, approved.get("error"))
            assert check(), op
            status = ok(await client.call_tool("operation.status", {"proposal_id": made["proposal_id"]}))
            assert status["status"] == "completed" and status["agent"] == "unknown:codex"  # no agent credential
            if op == "push":
                assert cli(fleet, capsys, "proposals", "undo", made["proposal_id"], "--yes")["code"] == 1
            elif op == "stage":  # an agent may ask for the undo too: a restore proposal, approved by the person
                undo = ok(await client.call_tool("operation.preview.restore", {
                    "repo": "work", "reason": "take it back", "restore_point": made["proposal_id"]}))
                assert cli(fleet, capsys, "proposals", "approve", undo["proposal_id"], "--yes")["status"] == "completed"
                assert state(where) == before, op
            else:
                undone = cli(fleet, capsys, "proposals", "undo", made["proposal_id"], "--yes")
                assert undone["status"] == "completed", (op, undone.get("error"))
                assert state(where) == before, op
            for step in cleanup:
                step()
            covered.add(op)
        code, _ = error_of(await client.call_tool("operation.preview.restore", {
            "repo": "work", "reason": "x", "restore_point": "p-nothing"}))
        assert code == "NOT_FOUND"
    assert covered | {"restore"} == set(CATALOG)
    with open_index(fleet["db"]) as index:
        rows = index.conn.execute("select op, status from proposals").fetchall()
    # every op ran; each one a restore took back is `undone` (push cannot be undone, so it stays completed)
    assert {op for op, status in rows if status == "undone"} == covered - {"push"}
    assert all(status == "completed" for op, status in rows if op in ("push", "restore"))
