"""patch, stage_hunks and push proposals on real repositories (a local bare remote for push)."""

from __future__ import annotations

import pytest

from fleet.git.revs import found_of
from fleet.errors import FleetError
from fleet.ops import service
from fleet.repo.changes import repo_changes
from tests.fleets.gitbuild import commit_file, git, write
from tests.fleets.ops_fleet import propose, run, state, with_origin

PATCH = """diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -1 +1,2 @@
 print('one')
+print('two')
"""


@pytest.mark.parametrize("target", ["worktree", "index"])
def test_patch_applies_and_undoes(ops_fleet, target):
    work = ops_fleet["work"]
    before = state(work)
    made = propose(ops_fleet, "patch", {"patch": PATCH, "target": target})
    assert made["preview"]["files"] == ["src/app.py"] and made["preview"]["apply_check"] == "ok"
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    if target == "index":
        assert git(work, "show", ":src/app.py") == "print('one')\nprint('two')\n"
        assert (work / "src/app.py").read_text() == "print('one')\n"
    else:
        assert (work / "src/app.py").read_text() == "print('one')\nprint('two')\n"
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert state(work) == before


@pytest.mark.parametrize("text,code", [
    (PATCH.replace("src/app.py", "../outside.py"), "BAD_PATH"),
    (PATCH.replace("src/app.py", ".git/config"), "BAD_PATH"),
    (PATCH.replace("print('one')\n+", "print('nope')\n+"), "CONFLICT"),
    ("not a patch at all\n", "BAD_ARGUMENT"),
])
def test_bad_patches_are_refused(ops_fleet, text, code):
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "patch", {"patch": text})
    assert err.value.code == code


def test_patch_through_a_symlinked_folder_is_refused(ops_fleet, tmp_path):
    work = ops_fleet["work"]
    (work / "link").symlink_to(tmp_path)
    text = PATCH.replace("a/src/app.py", "/dev/null").replace("src/app.py", "link/evil.py").replace(
        "@@ -1 +1,2 @@\n print('one')\n+print('two')", "@@ -0,0 +1 @@\n+evil")
    text = text.replace("diff --git /dev/null", "diff --git a/link/evil.py")
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "patch", {"patch": "new file mode 100644\n".join(text.split("\n", 1))})
    assert err.value.code in ("BAD_PATH", "BAD_ARGUMENT", "CONFLICT")
    assert not (tmp_path / "evil.py").exists()


def _three_changes(work):
    commit_file(work, "list.txt", "".join(f"{i}\n" for i in range(1, 31)), "numbers")
    write(work / "list.txt", "".join(("three\n" if i == 3 else "fifteen\n" if i == 15 else "x\ny\n" if i == 27
                                      else f"{i}\n") for i in range(1, 31)))


def test_stage_hunks_by_id_whatever_the_context(ops_fleet):
    work = ops_fleet["work"]
    _three_changes(work)
    narrow = repo_changes(found_of(str(work)), "list.txt", unified=0)["changes"][0]["hunks"]
    wide = repo_changes(found_of(str(work)), "list.txt", unified=3)["changes"][0]["hunks"]
    assert len(narrow) == 3 and len({h["id"] for h in narrow}) == 3
    assert wide[-1]["id"] == narrow[-1]["id"]  # the last block stands alone at both widths
    before = state(work)
    done = run(ops_fleet, "stage_hunks", {"path": "list.txt", "hunks": [narrow[2]["id"]]})
    assert done["status"] == "completed", done["error"]
    staged = git(work, "diff", "--cached", "-U0", "--", "list.txt")
    assert "+x\n+y\n" in staged and "three" not in staged and "fifteen" not in staged
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert state(work) == before


def test_stage_hunks_merged_by_wide_context(ops_fleet):
    work = ops_fleet["work"]
    commit_file(work, "near.txt", "".join(f"{i}\n" for i in range(1, 11)), "near")
    write(work / "near.txt", "".join(("A\n" if i == 3 else "B\n" if i == 5 else f"{i}\n") for i in range(1, 11)))
    wide = repo_changes(found_of(str(work)), "near.txt", unified=3)["changes"][0]["hunks"]
    assert len(wide) == 1
    done = run(ops_fleet, "stage_hunks", {"path": "near.txt", "hunks": [wide[0]["id"]]})
    assert done["status"] == "completed"
    assert git(work, "diff", "--name-only", "--", "near.txt") == ""  # both blocks staged


def test_stage_hunks_unknown_or_stale_id(ops_fleet):
    work = ops_fleet["work"]
    _three_changes(work)
    hunk = repo_changes(found_of(str(work)), "list.txt", unified=0)["changes"][0]["hunks"][0]
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "stage_hunks", {"path": "list.txt", "hunks": ["h-0000000000000000"]})
    assert err.value.code == "NOT_FOUND"
    made = propose(ops_fleet, "stage_hunks", {"path": "list.txt", "hunks": [hunk["id"]]})
    write(work / "list.txt", "changed entirely\n")
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "STALE" in done["error"]
    assert git(work, "diff", "--cached", "--name-only") == ""


@pytest.fixture
def pushable(ops_fleet, tmp_path):
    return ops_fleet, with_origin(ops_fleet, tmp_path, to_push=False)


def test_push_sends_commits_and_says_it_cannot_be_undone(pushable):
    ops_fleet, remote = pushable
    work = ops_fleet["work"]
    commit_file(work, "pushed.txt", "new\n", "to push")
    made = propose(ops_fleet, "push", {})
    preview = made["preview"]
    assert preview["can_undo"] is False and "cannot be undone" in preview["note"]
    assert [c["subject"] for c in preview["commits_sent"]] == ["to push"] and preview["fast_forward"]
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(remote, "rev-parse", "main").strip() == git(work, "rev-parse", "main").strip()
    with pytest.raises(FleetError) as err:
        service.undo(ops_fleet["index"], done["id"], "cli")
    assert err.value.code == "BAD_ARGUMENT" and "cannot be undone" in err.value.message


def test_force_with_lease_is_pinned_to_what_the_preview_saw(pushable, tmp_path):
    ops_fleet, remote = pushable
    work = ops_fleet["work"]
    git(work, "commit", "-q", "--amend", "-m", "rewritten")
    plain = propose(ops_fleet, "push", {})
    assert plain["preview"]["fast_forward"] is False and "refuse" in plain["preview"]["warning"]
    made = propose(ops_fleet, "push", {"force_with_lease": True})
    assert made["risk"] == "high" and made["preview"]["commits_dropped_on_remote"][0]["subject"] == "add app"
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    commit_file(other, "theirs.txt", "someone else\n", "someone else's push")
    git(other, "push", "-q", "origin", "main")
    theirs = git(remote, "rev-parse", "main").strip()
    git(work, "fetch", "-q", "origin")  # the tracking ref moves: the preview's pin no longer holds
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "STALE" in done["error"]
    assert git(remote, "rev-parse", "main").strip() == theirs


def test_force_with_lease_refused_by_git_when_the_remote_moved_unseen(pushable, tmp_path):
    ops_fleet, remote = pushable
    work = ops_fleet["work"]
    git(work, "commit", "-q", "--amend", "-m", "rewritten")
    made = propose(ops_fleet, "push", {"force_with_lease": True})
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    commit_file(other, "theirs.txt", "someone else\n", "someone else's push")
    git(other, "push", "-q", "origin", "main")
    theirs = git(remote, "rev-parse", "main").strip()
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")  # no fetch: only git's lease stops it
    assert done["status"] == "failed" and "stale info" in done["result"]["stdout"]
    assert git(remote, "rev-parse", "main").strip() == theirs


@pytest.mark.parametrize("args,code", [
    ({"remote": "--receive-pack=evil"}, "BAD_REF"),
    ({"remote": "nowhere"}, "BAD_REF"),
    ({"branch": "-f"}, "BAD_REF"),
    ({"branch": "missing"}, "BAD_REF"),
])
def test_bad_push_arguments(pushable, args, code):
    ops_fleet, _ = pushable
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "push", args)
    assert err.value.code == code
