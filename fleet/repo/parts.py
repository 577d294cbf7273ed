"""A repository's satellites: its worktrees, submodules and stashes, as lists a caller can page through.

Worktrees come from `git worktree list --porcelain -z` (the main worktree included, whichever worktree the
caller named); submodules and stashes from the same readers as the index record (fleet.repo.record), so they
agree with it, without paying for a whole repository read.
"""

from __future__ import annotations

from fleet.caps import cap
from fleet.index.discovery import Found
from fleet.errors import FleetError
from fleet.git.run import GitError, run_git
from fleet.repo.record import read_stashes, read_submodules

DEFAULT_LIMIT = 200


def _git(path: str, args: list[str]) -> bytes:
    try:
        return run_git(path, args, timeout=15, max_bytes=8 << 20).stdout
    except GitError as exc:
        raise FleetError.from_git(exc) from exc


def parse_worktrees(data: bytes) -> list[dict]:
    """Records of `git worktree list --porcelain -z`: attribute lines, a blank one between worktrees."""
    rows: list[dict] = []
    row: dict | None = None
    for field in data.split(b"\0"):
        if not field:
            row = None
            continue
        key, _, value = field.decode("utf-8", "replace").partition(" ")
        if key == "worktree":
            row = {"path": value, "head": None, "branch": None, "detached": False, "bare": False,
                   "locked": False, "lock_reason": None, "prunable": False, "prunable_reason": None,
                   "is_main": not rows}
            rows.append(row)
        elif row is None:
            continue
        elif key == "HEAD":
            row["head"] = None if set(value) == {"0"} else value
        elif key == "branch":
            row["branch"] = value[len("refs/heads/"):] if value.startswith("refs/heads/") else value
        elif key in ("detached", "bare"):
            row[key] = True
        elif key in ("locked", "prunable"):
            row[key] = True
            row["lock_reason" if key == "locked" else "prunable_reason"] = value or None
    return rows


def worktree_list(found: Found, limit: int = DEFAULT_LIMIT) -> dict:
    rows = parse_worktrees(_git(found.path, ["worktree", "list", "--porcelain", "-z"]))
    for row in rows:
        row["current"] = row["path"] == found.path
    items, info = cap(rows, limit)
    return {"worktrees": items, "count": len(rows), **info}


def submodule_status(found: Found, limit: int = DEFAULT_LIMIT) -> dict:
    """Each submodule's recorded and checked-out commit and its state (clean/drifted/uninitialized/conflict)."""
    subs = [] if found.bare else read_submodules(found.path, found.commondir)
    counts = {state: sum(1 for s in subs if s.get("state") == state)
              for state in ("clean", "drifted", "uninitialized", "conflict")}
    items, info = cap(subs, limit)
    return {"submodules": items, "count": len(subs), "counts": counts, **info}


def stash_list(found: Found, limit: int = DEFAULT_LIMIT) -> dict:
    """Stash entries newest first (`stash@{0}` first), each with its commit, message and time."""
    stashes = read_stashes(found.commondir)
    rows = [{"index": s["index"], "selector": f"stash@{{{s['index']}}}", "sha": s["sha"],
             "message": s["message"], "at": s["at"]} for s in stashes]
    items, info = cap(rows, limit)
    return {"stashes": items, "count": len(rows), **info}
