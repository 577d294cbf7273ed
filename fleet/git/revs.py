"""Revisions checked and resolved to commits, merge bases, and a repo's git dirs (for the read tools)."""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.git.run import out, run, text
from fleet.repo.scope import check_rev


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
    """(per-worktree git dir, common git dir), absolute."""
    lines = text(out(repo, ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]))
    git_dir, common = lines.splitlines()[:2]
    return git_dir, common
