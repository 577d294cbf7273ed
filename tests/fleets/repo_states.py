"""Repos in the states the per-repo read functions must handle, built with the real git CLI."""

from __future__ import annotations

import os
from pathlib import Path

from tests.fleets.gitbuild import commit_file, git, init_repo, write


def rich_repo(path: Path) -> Path:
    """Root commit, renames, binary, mode change, symlink, odd names, a side branch merged with a merge commit,
    an annotated and a lightweight tag."""
    repo = init_repo(path, commits=1)
    write(repo / "src" / "app.py", "".join(f"line {i}\n" for i in range(40)))
    write(repo / "data.bin", b"\0\1\2binary")
    write(repo / "sp ace dir" / "file name.txt", "hello\n")
    write(repo / "ünï.txt", "héllo\n")
    write(repo / "tool.sh", "echo hi\n")
    write(repo / "nonl.txt", "no newline")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add files\n\nA body line.\nAnother body line.")
    git(repo, "tag", "-a", "v1", "-m", "release v1")
    git(repo, "mv", "src/app.py", "src/main.py")
    write(repo / "src" / "main.py", "".join(f"line {i}\n" for i in range(40)).replace("line 5\n", "LINE 5\n"))
    write(repo / "data.bin", b"\0\1\2binary changed")
    os.chmod(repo / "tool.sh", 0o755)
    os.symlink("nonl.txt", repo / "link")
    write(repo / "nonl.txt", "no newline either")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "rename and friends")
    git(repo, "tag", "light")
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    commit_file(repo, "side.txt", "from side\n", "side work")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "README.md", "main again\n", "main work")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    return repo


def diverged(path: Path, *, conflicting: bool) -> Path:
    """`main` and `topic` both changed since their base; on `conflict.txt` too when `conflicting`."""
    repo = init_repo(path, commits=1)
    commit_file(repo, "conflict.txt", "a\nb\nc\n", "base")
    git(repo, "checkout", "-q", "-b", "topic")
    commit_file(repo, "conflict.txt" if conflicting else "topic.txt", "a\nTOPIC\nc\n", "topic change")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "conflict.txt", "a\nMAIN\nc\n", "main change")
    return repo


def merge_conflict(path: Path) -> Path:
    """A merge stopped on both_modified, deleted_by_them, both_added and a binary conflict."""
    repo = init_repo(path, commits=1)
    write(repo / "both.txt", "one\ntwo\nthree\n")
    write(repo / "gone.txt", "keep me\n")
    write(repo / "img.bin", b"\0base")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "other")
    write(repo / "both.txt", "one\nOTHER\nthree\n")
    (repo / "gone.txt").unlink()
    write(repo / "new.txt", "other new\n")
    write(repo / "img.bin", b"\0other")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "other side")
    git(repo, "checkout", "-q", "main")
    write(repo / "both.txt", "one\nMAIN\nthree\n")
    write(repo / "gone.txt", "keep me, edited\n")
    write(repo / "new.txt", "main new\n")
    write(repo / "img.bin", b"\0main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "main side")
    git(repo, "merge", "other", check=False)
    return repo


def amend_and_reset(repo: Path) -> tuple[str, str]:
    """Amend one new commit and reset another away; returns (amended-away sha, reset-away sha)."""
    commit_file(repo, "a.txt", "a\n", "to be amended")
    amended = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "commit", "-q", "--amend", "-m", "amended")
    commit_file(repo, "b.txt", "b\n", "to be reset away")
    reset = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    return amended, reset


def busy_repo(root: Path) -> Path:
    """A repo whose logs hold commits, a branch, an amend, a reset back and a deleted branch's history."""
    repo = init_repo(root / "app", commits=3)
    git(repo, "checkout", "-q", "-b", "topic")
    commit_file(repo, "t.txt", "t\n", "topic work")
    git(repo, "commit", "-q", "--amend", "-m", "topic work, amended")
    git(repo, "checkout", "-q", "main")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "branch", "-q", "doomed")
    return repo


def forked_edits(repo: Path, file: str, branch: str, branch_text: str, main_text: str,
                 messages: tuple[str, str] | None = None) -> None:
    """`file` committed as "base", then edited differently on a new `branch` and on main; HEAD ends on
    main. The two edits conflict when one is replayed onto the other (rebase, cherry-pick, merge)."""
    branch_msg, main_msg = messages or (f"{branch} edit", "main edit")
    commit_file(repo, file, "base\n", "base")
    git(repo, "checkout", "-q", "-b", branch)
    commit_file(repo, file, branch_text, branch_msg)
    git(repo, "checkout", "-q", "main")
    commit_file(repo, file, main_text, main_msg)


def rebase_conflict(path: Path) -> Path:
    """`feature` rebased onto `main`, stopped on a conflict in f.txt."""
    repo = init_repo(path, commits=1)
    forked_edits(repo, "f.txt", "feature", "feature\n", "upstream\n", ("feature edit", "upstream edit"))
    git(repo, "checkout", "-q", "feature")
    git(repo, "rebase", "main", check=False)
    return repo


def cherry_pick_conflict(path: Path) -> Path:
    repo = init_repo(path, commits=1)
    forked_edits(repo, "f.txt", "donor", "donor\n", "main\n")
    git(repo, "cherry-pick", "donor", check=False)
    return repo
