"""Revisions checked and resolved to commits, merge bases, and a repo's git dirs (for the read tools)."""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.layout import Found, found_at
from fleet.git.run import check_ref, out, run, text
from fleet.git.files import BrokenRepo, is_sha, read_file


def check_rev(value: str, field: str = "ref") -> str:
    """A revision (or range) safe to hand to git; BAD_REF when it could be read as an option."""
    try:
        return check_ref(value, field)
    except ValueError as exc:
        raise FleetError("BAD_REF", str(exc)) from exc


def resolve_commit(repo: str, rev: str, field: str = "ref") -> str:
    """The full sha of the commit `rev` names; BAD_REF when it is unsafe or names no commit."""
    check_rev(rev, field)
    result = run(repo, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                 check=False)
    sha = result.stdout.decode("ascii", "replace").strip()
    if result.returncode != 0 or len(sha) < 40:
        raise FleetError("BAD_REF", f"{field} {rev!r} does not name a commit in this repo")
    return sha


def resolve_range(repo: str, base: str, head: str | None, field: str = "base") -> dict:
    """`base..head`, `base...head` (in `base`) or two separate revisions, each side resolved to a commit.

    Returns `{base, head, base_sha, head_sha, merge_base}`; for `a...b` the diff starts at the merge base.
    """
    check_rev(base, field)
    symmetric = "..." in base
    if symmetric or ".." in base:
        if head is not None:
            raise FleetError("BAD_ARGUMENT", f"{field} is a range; do not pass head as well")
        left, right = base.split("...", 1) if symmetric else base.split("..", 1)
        left, right = left or "HEAD", right or "HEAD"
    else:
        left, right = base, head or "HEAD"
    left_sha = resolve_commit(repo, left, field)
    right_sha = resolve_commit(repo, right, "head")
    merge_base = None
    start = left_sha
    if symmetric:
        merge_base = merge_base_of(repo, left_sha, right_sha)
        if merge_base is None:
            raise FleetError("BAD_REF", f"{base!r}: the two sides share no history")
        start = merge_base
    return {"base": left, "head": right, "base_sha": left_sha, "head_sha": right_sha,
            "merge_base": merge_base, "diff_from": start}


def merge_base_of(repo: str, a: str, b: str) -> str | None:
    result = run(repo, ["merge-base", a, b], ok_codes=(0, 1))
    sha = result.stdout.decode("ascii", "replace").strip()
    return sha or None


def has_head(repo: str) -> bool:
    """False in a repo with no commits yet (unborn HEAD)."""
    return run(repo, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], check=False).returncode == 0


def index_base(repo: str) -> str:
    """What the index is compared with for staged changes: HEAD, or the empty tree before the first commit."""
    if has_head(repo):
        return "HEAD"
    return text(out(repo, ["hash-object", "-t", "tree", "--stdin"], input_bytes=b"")).strip()


def git_dirs(repo: str) -> tuple[str, str]:
    """(per-worktree git dir, common git dir), absolute (`found_of`'s)."""
    found = found_of(repo)
    return found.gitdir, found.commondir


def found_of(repo: str, root: str | None = None) -> Found:
    """The `Found` of a repository path its caller has already scoped (an index record's path, an op's
    repository), for the readers that take one. Read from `.git` (a folder, or a `gitdir:` file) and
    `commondir` as git reads them, without a git process (one `rev-parse` cost as much as the `git status` a
    repo.status call is about); git answers only for a layout these reads do not know. An agent's `repo`
    argument is resolved by fleet.index.target instead, which also checks where each dir lies."""
    top = os.path.abspath(repo)
    # A symlinked `.git` is left to git to follow (rev-parse below).
    found = None if os.path.islink(os.path.join(top, ".git")) else found_at(top, root or top)
    if found is not None:
        return found
    lines = text(out(repo, ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]))
    first, common = lines.splitlines()[:2]
    return Found(top, first, common, False, root or top)


_UNKNOWN = object()


def head_commit(repo: str) -> str | None:
    """HEAD's commit sha, or None when HEAD is unborn, read from git's files (HEAD, the loose ref, else its
    line in packed-refs) without a git process: a history page must cost about one `git log`. Layouts these
    reads do not know (reftable, a symref chain, an odd HEAD) are asked of git."""
    found = _head_from_files(repo)
    if found is not _UNKNOWN:
        return found  # type: ignore[return-value]
    if not has_head(repo):
        return None
    return resolve_commit(repo, "HEAD")


def _head_from_files(repo: str) -> object:
    try:
        git_dir, common = git_dirs(repo)
        head = read_file(os.path.join(git_dir, "HEAD"), 4096, "HEAD")
        if head is None or os.path.isdir(os.path.join(common, "reftable")):
            return _UNKNOWN
        text = head.decode("utf-8", "replace").strip()
        if is_sha(text):
            return text
        if not text.startswith("ref: refs/heads/"):
            return _UNKNOWN
        ref = text[len("ref: "):]
        if ".." in ref.split("/") or any(ord(ch) <= 32 for ch in ref):
            return _UNKNOWN          # git refuses such a HEAD: let it say so
        loose = read_file(os.path.join(common, *ref.split("/")), 4096, "ref")
        if loose is not None:
            value = loose.decode("ascii", "replace").strip()
            return value if is_sha(value) else _UNKNOWN
        packed = read_file(os.path.join(common, "packed-refs"), 64 * 1024 * 1024, "packed-refs")
        needle = b" " + ref.encode() + b"\n"
        at = (packed or b"").find(needle)
        if at < 0:
            return None if not (packed or b"").endswith(needle[:-1]) else _UNKNOWN
        line_start = packed.rfind(b"\n", 0, at) + 1
        value = packed[line_start:at].decode("ascii", "replace")
        return value if is_sha(value) else _UNKNOWN
    except (BrokenRepo, OSError, ValueError):
        return _UNKNOWN
