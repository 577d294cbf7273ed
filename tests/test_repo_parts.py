"""The satellite lists (fleet.repo.parts) read from git's files, checked field by field against the git CLI.

One worktree reader serves the index record and `worktree.list`, one stash reader serves the record,
`repo.refs` and `stash.list`: each list here must equal what git itself prints.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from fleet.git.revs import found_of
from fleet.git.layout import found_at
from fleet.repo.parts import stash_list, worktree_list
from fleet.repo.record import read_repo, read_stashes
from fleet.repo.refs import repo_refs
from tests.fleets.gitbuild import bare_remote, commit_file, git, init_repo, write

FIELDS = ("path", "head", "branch", "detached", "bare", "locked", "lock_reason", "prunable")


def _git_worktrees(repo: Path) -> list[dict]:
    """`git worktree list --porcelain`, every worktree (main first), in our row's terms."""
    rows = []
    for block in git(repo, "worktree", "list", "--porcelain").strip().split("\n\n"):
        row = {"path": None, "head": None, "branch": None, "detached": False, "bare": False, "locked": False,
               "lock_reason": None, "prunable": False}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            if key == "worktree":
                row["path"] = value
            elif key == "HEAD":
                row["head"] = None if set(value) == {"0"} else value
            elif key == "branch":
                row["branch"] = value.removeprefix("refs/heads/")
            elif key in ("detached", "bare", "prunable"):
                row[key] = True
            elif key == "locked":
                row["locked"], row["lock_reason"] = True, value or None
        rows.append(row)
    return rows


def _ours(folder: Path, root: Path) -> list[dict]:
    found = found_at(str(folder), str(root))
    return [{k: w[k] for k in FIELDS} for w in worktree_list(found)["worktrees"]]


def test_worktree_list_equals_git_from_every_worktree(tmp_path: Path):
    root = tmp_path / "root"
    repo = init_repo(root / "main", commits=2)
    git(repo, "worktree", "add", "-q", str(root / "linked"), "-b", "topic")
    git(repo, "worktree", "add", "-q", "--detach", str(root / "detached"), "HEAD~1")
    git(repo, "worktree", "add", "-q", str(root / "locked"), "-b", "usb")
    git(repo, "worktree", "lock", "--reason", "on a usb disk", str(root / "locked"))
    git(repo, "worktree", "add", "-q", str(root / "gone"), "-b", "gone")
    shutil.rmtree(root / "gone")
    commit_file(root / "linked", "t.txt", "t\n")
    expected = _git_worktrees(repo)
    assert [w["prunable"] for w in expected].count(True) == 1  # the trap is set
    for where in (repo, root / "linked", root / "detached"):
        assert _ours(where, root) == expected, where
    record = read_repo(found_at(str(repo), str(root)))
    assert [{k: w[k] for k in FIELDS} for w in record["worktrees"]] == expected[1:]


def test_worktree_list_of_a_bare_repository(tmp_path: Path):
    root = tmp_path / "root"
    seed = init_repo(tmp_path / "seed", commits=1)
    bare = bare_remote(root / "store.git")
    git(seed, "push", "-q", str(bare), "main")
    git(bare, "worktree", "add", "-q", str(root / "work"), "main")
    expected = _git_worktrees(bare)
    assert expected[0]["bare"]
    assert _ours(bare, root) == expected
    assert _ours(root / "work", root) == _git_worktrees(root / "work")


def test_one_stash_reader_for_every_surface(tmp_path: Path):
    root = tmp_path / "root"
    repo = init_repo(root / "r", commits=1)
    for text in ("one\n", "two\n"):
        write(repo / "README.md", text)
        git(repo, "stash", "push", "-q", "-m", f"wip {text.strip()}")
    found = found_at(str(repo), str(root))
    listed = stash_list(found)["stashes"]
    assert listed == read_stashes(found.commondir) == repo_refs(found_of(str(repo)))["stashes"]
    assert read_repo(found)["stash_list"] == listed
    oracle = git(repo, "stash", "list", "--format=%gd%x00%H%x00%gs%x00%cI").splitlines()
    assert [(s["selector"], s["sha"], s["message"]) for s in listed] == [tuple(ln.split("\0")[:3]) for ln in oracle]
    assert all(s["at"].endswith("Z") and s["at"][:19] == ln.split("\0")[3][:19]
               for s, ln in zip(listed, oracle))
