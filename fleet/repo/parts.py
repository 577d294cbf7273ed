"""A repository's satellites: its worktrees, submodules and stashes, as lists a caller can page through.

All three come from the same readers as the index record (fleet.repo.record), so they agree with it, without
paying for a whole repository read. The worktree list adds the main worktree first, as `git worktree list`
does, whichever worktree the caller named.
"""

from __future__ import annotations

from typing import TypedDict

from fleet.caps import Capped, cap
from fleet.errors import FleetError
from fleet.git import files as gitfiles
from fleet.git.config import read_config
from fleet.git.layout import Found
from fleet.repo.record import linked_worktrees, main_worktree, read_stashes, read_submodules, worktree_counts

DEFAULT_LIMIT = 200


class Worktree(TypedDict):
    path: str
    head: str | None
    branch: str | None
    detached: bool
    bare: bool
    locked: bool
    lock_reason: str | None
    prunable: bool
    prunable_reason: str | None
    is_main: bool
    operation: str | None
    staged: int | None
    unstaged: int | None
    untracked: int | None
    conflicted: int | None
    current: bool


class WorktreeList(Capped):
    worktrees: list[Worktree]
    count: int


class Submodule(TypedDict):
    path: str
    name: str | None
    url: str | None
    recorded: str | None
    checked_out: str | None
    state: str


class SubmoduleStatus(Capped):
    submodules: list[Submodule]
    count: int
    counts: dict[str, int]


class Stash(TypedDict):
    index: int
    selector: str
    sha: str | None
    message: str | None
    at: str | None


class StashList(Capped):
    stashes: list[Stash]
    count: int


def worktree_list(found: Found, limit: int = DEFAULT_LIMIT) -> WorktreeList:
    """Every worktree of the repository (main first) with HEAD, branch, locked and prunable state, the
    operation in progress there and its staged/unstaged/untracked/conflicted counts (a `git status` in each
    worktree whose `.git` points back to this repository, as the index record reads them)."""
    try:
        refs = gitfiles.read_refs(found.commondir)
        main = main_worktree(found, refs, read_config(found.commondir, complete=True))
        worktree_counts(main, found.commondir)
        rows = [main, *linked_worktrees(found.commondir, refs, with_status=True)]
    except gitfiles.BrokenRepo as exc:
        raise FleetError("GIT_FAILED", f"cannot list worktrees: {exc}") from None
    for row in rows:
        row["current"] = row["path"] == found.path
    items, info = cap(rows, limit)
    return {"worktrees": items, "count": len(rows), **info}


def submodule_status(found: Found, limit: int = DEFAULT_LIMIT) -> SubmoduleStatus:
    """Each submodule's recorded and checked-out commit and its state (clean/drifted/uninitialized/conflict)."""
    subs = [] if found.bare else read_submodules(found.path, found.commondir)
    counts = {state: sum(1 for s in subs if s.get("state") == state)
              for state in ("clean", "drifted", "uninitialized", "conflict")}
    items, info = cap(subs, limit)
    return {"submodules": items, "count": len(subs), "counts": counts, **info}


def stash_list(found: Found, limit: int = DEFAULT_LIMIT) -> StashList:
    """Stash entries newest first (`stash@{0}` first), each with its commit, message and ISO 8601 time."""
    try:
        rows = read_stashes(found.commondir)
    except gitfiles.BrokenRepo as exc:
        raise FleetError("GIT_FAILED", f"cannot read the stash list: {exc}") from None
    items, info = cap(rows, limit)
    return {"stashes": items, "count": len(rows), **info}
