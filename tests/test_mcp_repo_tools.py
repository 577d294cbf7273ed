"""Per-repo MCP tools on real repositories, checked against the git CLI (conflict, rebase, detached, empty,
renames, binary, non-ASCII names, worktrees, submodules)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from fleet.git.revs import found_of
from fleet.repo.changes import repo_changes
from fleet.repo.history import commit_details
from fleet.views.records import iso_times
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import git
from tests.fleets.mcp_fleet import call, error_of, ok


@pytest.fixture(scope="module")
def server(mcp_fleet):
    return build_server(str(mcp_fleet["_db"]))


def porcelain(repo) -> list[str]:
    return [line for line in git(repo, "status", "--porcelain=v1", "-z").split("\0") if line]


@pytest.mark.slow
async def test_brief_in_every_state(server, mcp_fleet):
    for name in ("alpha", "beta", "dirty", "conflicted", "rebasing", "detached", "empty", "super", "evil"):
        result = await call(server, "repo.brief", {"repo": name})
        assert len(result.content[0].text) < 2500, name
        brief = ok(result)
        repo = mcp_fleet[name]
        head = git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).strip()
        assert brief["head"]["sha"] == (head[:12] or None), name
        branch = git(repo, "symbolic-ref", "-q", "--short", "HEAD", check=False).strip()
        assert brief["head"]["branch"] == (branch or None), name  # an unborn HEAD still names its branch
        lines = porcelain(repo)
        assert brief["working_tree"]["untracked"] == sum(1 for ln in lines if ln.startswith("??")), name
        assert brief["working_tree"]["conflicted"] == sum(1 for ln in lines if ln[:2] in
                                                          ("UU", "AA", "DD", "AU", "UA", "DU", "UD")), name
        assert len(brief["hints"]) <= 3
        expected = git(repo, "log", "-n5", "--format=%h", "--abbrev=12", check=False).split() if head else []
        assert [c["sha"] for c in brief["recent_commits"]] == expected, name
    empty = ok(await call(server, "repo.brief", {"repo": "empty"}))
    assert empty["head"]["unborn"] is True and empty["recent_commits"] == []
    rebasing = ok(await call(server, "repo.brief", {"repo": "rebasing"}))
    assert rebasing["operation"]["name"] == "rebase" and rebasing["head"]["branch"] is None
    assert any("conflict.read" in h for h in rebasing["hints"])
    detached = ok(await call(server, "repo.brief", {"repo": str(mcp_fleet["detached"])}))
    assert detached["head"]["detached"] is True and "detached" in detached["hints"][0]
    sub = ok(await call(server, "repo.brief", {"repo": "super"}))
    assert sub["submodules"]["drifted"] == 1 and sub["submodules"]["attention"] == [
        {"path": "libs/alpha", "state": "drifted"}]


async def test_status_and_changes_match_git(server, mcp_fleet):
    status = ok(await call(server, "repo.status", {"repo": "dirty"}))
    assert status["head"] == git(mcp_fleet["dirty"], "rev-parse", "HEAD").strip()
    staged = {(e["status"], e["path"], e["old_path"]) for e in status["staged"]}
    assert staged == {("renamed", "new name.txt", "old name.txt"), ("added", "café.txt", None)}
    assert status["untracked"] == ["notes.txt"]
    assert {e["path"] for e in status["unstaged"]} == {"README.md", "logo.bin"}

    result = await call(server, "repo.changes", {"repo": "dirty"})
    data = ok(result)
    assert data.pop("repo")["path"] == str(mcp_fleet["dirty"])
    assert data == json.loads(json.dumps(repo_changes(found_of(str(mcp_fleet["dirty"])))))
    by_path = {c["path"]: c for c in data["changes"]}
    assert by_path["logo.bin"]["binary"] is True
    assert by_path["new name.txt"]["old_path"] == "old name.txt"
    assert "café.txt" in by_path and "notes.txt" in by_path
    readme = by_path["README.md"]
    assert "+changed" in readme["hunks"][0]["lines"]
    summary = ok(await call(server, "repo.changes", {"repo": "dirty", "summary_only": True}))
    assert all("hunks" not in c for c in summary["changes"])
    one = ok(await call(server, "repo.changes", {"repo": "dirty", "path_filter": "café.txt"}))
    assert [c["path"] for c in one["changes"]] == ["café.txt"]


async def test_history_reflog_refs_and_commit(server, mcp_fleet):
    alpha = mcp_fleet["alpha"]
    hist = ok(await call(server, "repo.history", {"repo": "alpha", "limit": 2}))
    assert [c["sha"] for c in hist["commits"]] == git(alpha, "log", "-n2", "--format=%H").split()
    assert hist["truncated"] is True and hist["has_more"] is True and hist["omitted_count"] is None
    counted = ok(await call(server, "repo.history", {"repo": "alpha", "limit": 2, "count_omitted": True}))
    assert counted["omitted_count"] == int(git(alpha, "rev-list", "--count", "HEAD")) - 2
    page2 = ok(await call(server, "repo.history", {"repo": "alpha", "limit": 2, "cursor": hist["next_cursor"]}))
    assert [c["sha"] for c in page2["commits"]] == git(alpha, "log", "-n2", "--skip=2", "--format=%H").split()

    reflog = ok(await call(server, "repo.reflog", {"repo": "rebasing"}))
    assert [e["new_sha"] for e in reflog["entries"]] == git(mcp_fleet["rebasing"], "reflog", "--format=%H").split()

    refs = ok(await call(server, "repo.refs", {"repo": "alpha"}))
    assert {b["name"] for b in refs["branches"]} == set(git(alpha, "branch", "--format=%(refname:short)").split())
    assert [t["name"] for t in refs["tags"]] == ["v1"] and refs["tags"][0]["annotated"] is True

    root_sha = git(alpha, "rev-list", "--max-parents=0", "HEAD").strip()
    root = ok(await call(server, "commit.details", {"repo": "alpha", "rev": root_sha}))
    assert root["is_root"] is True and root["diff_against"] == "empty_tree"
    head = ok(await call(server, "commit.details", {"repo": "alpha", "rev": "HEAD"}))
    assert head.pop("repo")["name"] == "alpha"
    assert head == json.loads(json.dumps(iso_times(commit_details(str(alpha), "HEAD"))))
    unix = int(git(alpha, "log", "-1", "--format=%at").strip())
    assert head["author_time"] == datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert head["subject"] == "feat: add app" and [c["path"] for c in head["changes"]] == ["src/app.py"]


@pytest.mark.slow
async def test_diffs_blame_and_conflicts(server, mcp_fleet):
    beta = mcp_fleet["beta"]
    diff = ok(await call(server, "diff.refs", {"repo": "beta", "base": "origin/main...HEAD"}))
    assert [c["path"] for c in diff["changes"]] == git(beta, "diff", "--name-only", "origin/main...HEAD").split()
    text = ok(await call(server, "diff.text", {"repo": "beta", "base": "HEAD", "head": "origin/main"}))
    assert text["patch"] == git(beta, "diff", "-M", "HEAD", "origin/main")
    small = ok(await call(server, "diff.text", {"repo": "beta", "base": "HEAD", "head": "origin/main",
                                                "max_lines": 3}))
    assert small["returned_lines"] == 3 and small["truncated"] is True

    blame = ok(await call(server, "repo.blame", {"repo": "alpha", "file": "README.md"}))
    oracle = git(mcp_fleet["alpha"], "blame", "--porcelain", "README.md")
    assert {r["sha"] for r in blame["ranges"]} == {ln.split()[0] for ln in oracle.splitlines()
                                                   if len(ln.split()[0]) == 40 and not ln.startswith("\t")}

    pre = ok(await call(server, "repo.conflict_preflight", {"repo": "beta"}))
    assert pre["target"] == "refs/remotes/origin/main" and pre["result"] in ("clean", "conflicts")

    merge = ok(await call(server, "conflict.read", {"repo": "conflicted"}))
    assert merge["in_conflict"] is True and merge["operation"] == "merge"
    assert [f["path"] for f in merge["files"]] == git(mcp_fleet["conflicted"], "diff", "--name-only",
                                                      "--diff-filter=U").split()
    rebase = ok(await call(server, "conflict.read", {"repo": "rebasing"}))
    assert rebase["operation"] == "rebase" and rebase["ours_theirs_inverted"] is True
    clean = ok(await call(server, "conflict.read", {"repo": "alpha"}))
    assert clean["in_conflict"] is False


async def test_worktrees_submodules_stashes(server, mcp_fleet):
    wts = ok(await call(server, "worktree.list", {"repo": "alpha"}))
    oracle = [ln.split(" ", 1)[1] for ln in git(mcp_fleet["alpha"], "worktree", "list", "--porcelain").splitlines()
              if ln.startswith("worktree ")]
    assert [w["path"] for w in wts["worktrees"]] == oracle
    assert wts["worktrees"][0]["is_main"] and wts["worktrees"][0]["current"]
    assert wts["worktrees"][1]["branch"] == "feature/login"
    # a linked worktree is addressable by path even though the index lists only its repository
    linked = ok(await call(server, "worktree.list", {"repo": str(mcp_fleet["_root"] / "alpha-wt")}))
    assert [w["current"] for w in linked["worktrees"]] == [False, True]
    brief = ok(await call(server, "repo.brief", {"repo": str(mcp_fleet["_root"] / "alpha-wt")}))
    assert brief["head"]["branch"] == "feature/login"

    subs = ok(await call(server, "submodule.status", {"repo": "super"}))
    (sub,) = subs["submodules"]
    assert sub["state"] == "drifted"
    assert sub["recorded"] == git(mcp_fleet["super"], "ls-tree", "HEAD", "libs/alpha").split()[2]
    assert sub["checked_out"] == git(mcp_fleet["super"] / "libs" / "alpha", "rev-parse", "HEAD").strip()
    assert git(mcp_fleet["super"], "submodule", "status").startswith("+")

    stashes = ok(await call(server, "stash.list", {"repo": "dirty"}))
    assert [(s["selector"], s["sha"]) for s in stashes["stashes"]] == [
        tuple(ln.split(" ", 1)) for ln in git(mcp_fleet["dirty"], "stash", "list", "--format=%gd %H").splitlines()]
    assert stashes["stashes"][0]["message"].endswith("wip: first idea")


async def test_subdirectory_and_missing_things(server, mcp_fleet):
    assert ok(await call(server, "repo.status", {"repo": str(mcp_fleet["alpha"] / "src")}))["head"]
    code, _ = error_of(await call(server, "commit.details", {"repo": "alpha", "rev": "no-such-branch"}))
    assert code == "BAD_REF"
    code, _ = error_of(await call(server, "repo.blame", {"repo": "alpha", "file": "missing.txt"}))
    assert code == "NOT_FOUND"
    assert ok(await call(server, "repo.history", {"repo": "empty"}))["commits"] == []


async def test_non_utf8_bytes_become_replacement_characters(server, mcp_fleet):
    brief = ok(await call(server, "repo.brief", {"repo": "latin"}))
    assert brief["recent_commits"][0]["subject"] == "caf\ufffd: latin-1 subject"
    hist = ok(await call(server, "repo.history", {"repo": "latin", "limit": 1}))
    assert hist["commits"][0]["subject"] == "caf\ufffd: latin-1 subject"
    text = ok(await call(server, "diff.text", {"repo": "latin"}))
    assert "+caf\ufffd cr\ufffdme br\ufffdl\ufffde" in text["patch"].splitlines()
    changes = ok(await call(server, "repo.changes", {"repo": "latin"}))
    assert changes["changes"][0]["path"] == "menu.txt"
    details = ok(await call(server, "commit.details", {"repo": "latin", "rev": "HEAD"}))
    assert details["changes"][0]["hunks"][0]["lines"] == ["+caf\ufffd cr\ufffdme"]
