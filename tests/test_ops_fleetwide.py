"""branch_delete across repositories, worktree and submodule_pointer proposals on real repositories."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.ops import service
from tests.fleets.gitbuild import commit_file, git, init_repo
from tests.fleets.ops_fleet import propose, run, state


def _branches(repo) -> str:
    return git(repo, "for-each-ref", "--format=%(refname:short) %(objectname) %(upstream)", "refs/heads")


@pytest.fixture
def two(ops_fleet):
    """work: `topic` (merged), `merged-b` (merged), `wip` (unmerged); other: `old` (merged), `feature` checked
    out in a worktree."""
    work = ops_fleet["work"]
    git(work, "branch", "merged-b")
    git(work, "config", "branch.merged-b.remote", ".")
    git(work, "config", "branch.merged-b.merge", "refs/heads/main")
    git(work, "checkout", "-q", "-b", "wip")
    git(work, "stash", "-q", "-u")
    commit_file(work, "wip.txt", "unmerged\n", "unmerged work")
    git(work, "checkout", "-q", "main")
    other = init_repo(ops_fleet["root"] / "other", commits=2)
    git(other, "branch", "old", "HEAD~1")
    git(other, "branch", "feature")
    git(other, "worktree", "add", "-q", str(ops_fleet["root"] / "other-wt"), "feature")
    scan(ops_fleet["index"], [str(ops_fleet["root"])])
    return ops_fleet, work, other


def test_branch_delete_across_repos_and_undo(two):
    ops_fleet, work, other = two
    before = (_branches(work), _branches(other))
    made = service.propose(ops_fleet["index"], "claude-code", "branch_delete", str(work), {"targets": [
        {"repo": str(work), "branches": ["topic", "merged-b", "wip"]},
        {"repo": "other", "branches": ["old", "feature"]}]}, "tidy up")
    verdicts = {(t["repo"].rsplit("/", 1)[1], b["branch"]): b["action"] for t in made["preview"]["targets"]
                for b in t["branches"]}
    assert verdicts == {("work", "topic"): "delete", ("work", "merged-b"): "delete", ("work", "wip"): "keep",
                        ("other", "old"): "delete", ("other", "feature"): "keep"}
    assert made["risk"] == "high"
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert (done["result"]["deleted"], done["result"]["kept"], done["result"]["failed"]) == (3, 2, 0)
    assert git(work, "branch", "--format=%(refname:short)").split() == ["main", "wip"]
    assert sorted(git(other, "branch", "--format=%(refname:short)").split()) == ["feature", "main"]
    tip = git(other, "rev-parse", f"refs/fleetdeck/restore/{done['id']}/heads/old").strip()
    assert tip == git(other, "rev-parse", "main~1").strip()
    undone = service.undo(ops_fleet["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    assert (_branches(work), _branches(other)) == before


def test_branch_delete_skips_a_moved_tip(two):
    ops_fleet, work, other = two
    made = service.propose(ops_fleet["index"], "codex", "branch_delete", "other", {
        "targets": [{"repo": "other", "branches": ["old"]}], "merged_only": False}, "tidy")
    git(other, "branch", "-f", "old", "main")
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["result"]["branches"][0]["status"] == "failed"
    assert "moved" in done["result"]["branches"][0]["why"]
    assert git(other, "rev-parse", "old").strip() == git(other, "rev-parse", "main").strip()


@pytest.mark.parametrize("args,code", [
    ({"targets": [{"repo": "other", "branches": ["--force"]}]}, "BAD_REF"),
    ({"targets": [{"repo": "other", "branches": ["nope"]}]}, "BAD_REF"),
    ({"targets": [{"repo": "/", "branches": ["old"]}]}, "REPO_NOT_IN_FLEET"),
    ({"targets": [{"repo": "other", "branches": [f"b{i}" for i in range(21)]}]}, "LIMIT"),
    ({"targets": [{"repo": "other", "branches": ["feature"]}]}, "BAD_ARGUMENT"),  # nothing deletable
    ({"targets": []}, "BAD_ARGUMENT"),
])
def test_bad_branch_delete(two, args, code):
    ops_fleet, _, _ = two
    with pytest.raises(FleetError) as err:
        service.propose(ops_fleet["index"], "codex", "branch_delete", "other", args, "tidy")
    assert err.value.code == code


def test_worktree_new_branch_and_undo(ops_fleet):
    work = ops_fleet["work"]
    target = ops_fleet["root"] / "work-feature"
    before = state(work)
    done = run(ops_fleet, "worktree", {"path": str(target), "branch": "feature/wt", "new_branch": True})
    assert done["status"] == "completed", done["error"]
    assert git(target, "symbolic-ref", "HEAD").strip() == "refs/heads/feature/wt"
    assert str(target) in git(work, "worktree", "list")
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert not target.exists() and state(work) == before


@pytest.mark.parametrize("args,code", [
    ({"path": "/tmp/outside-the-fleet", "branch": "x", "new_branch": True}, "BAD_PATH"),
    ({"path": "relative/path", "branch": "x", "new_branch": True}, "BAD_PATH"),
    ({"path": "{root}/work", "branch": "x", "new_branch": True}, "BAD_PATH"),
    ({"path": "{root}/wt2", "branch": "main"}, "BAD_ARGUMENT"),  # checked out already
    ({"path": "{root}/wt2", "branch": "-b"}, "BAD_REF"),
])
def test_bad_worktree(ops_fleet, args, code):
    args = {k: v.format(root=ops_fleet["root"]) if isinstance(v, str) else v for k, v in args.items()}
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "worktree", args)
    assert err.value.code == code


@pytest.fixture
def superproject(ops_fleet):
    lib = init_repo(ops_fleet["root"] / "lib", commits=3)
    sup = init_repo(ops_fleet["root"] / "super", commits=1)
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "libs/lib")
    git(sup, "commit", "-q", "-m", "add submodule")
    git(sup / "libs" / "lib", "checkout", "-q", "HEAD~1")
    scan(ops_fleet["index"], [str(ops_fleet["root"])])
    return sup


@pytest.mark.slow
def test_submodule_pointer_record_and_return(ops_fleet, superproject):
    sup = superproject
    sub = sup / "libs" / "lib"
    checked = git(sub, "rev-parse", "HEAD").strip()
    recorded = git(sup, "ls-tree", "HEAD", "libs/lib").split()[2]
    made = service.propose(ops_fleet["index"], "codex", "submodule_pointer", str(sup),
                           {"path": "libs/lib", "action": "return"}, "back to recorded")
    assert (made["preview"]["recorded"], made["preview"]["checked_out"]) == (recorded, checked)
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(sub, "rev-parse", "HEAD").strip() == recorded
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert git(sub, "rev-parse", "HEAD").strip() == checked
    made = service.propose(ops_fleet["index"], "codex", "submodule_pointer", str(sup),
                           {"path": "libs/lib", "action": "record", "message": "bump lib"}, "record it")
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(sup, "ls-tree", "HEAD", "libs/lib").split()[2] == checked
    assert "Proposed-by: codex" in git(sup, "log", "-1", "--format=%B")


def test_submodule_pointer_refusals(ops_fleet, superproject):
    sup = superproject
    for args, code in (({"path": "README.md", "action": "return"}, "BAD_PATH"),
                       ({"path": "libs/lib", "action": "record"}, "BAD_ARGUMENT"),  # no message
                       ({"path": "libs/lib", "action": "jump"}, "BAD_ARGUMENT")):
        with pytest.raises(FleetError) as err:
            service.propose(ops_fleet["index"], "codex", "submodule_pointer", str(sup), args, "x")
        assert err.value.code == code
    git(sup / "libs" / "lib", "checkout", "-q", "main")
    with pytest.raises(FleetError) as err:  # no longer differs
        service.propose(ops_fleet["index"], "codex", "submodule_pointer", str(sup),
                        {"path": "libs/lib", "action": "return"}, "x")
    assert err.value.code == "BAD_ARGUMENT"
