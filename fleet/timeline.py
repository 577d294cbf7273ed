"""A repository's reflog as a timeline, with history rewrites and still-recoverable commits flagged.

The index keeps reflog lines after git expires them; this module asks git two questions about them:
did a move rewrite history (the old tip is not an ancestor of the new one), and is an old tip now reachable
from no ref at all while its objects still exist (so it can be recovered: `git branch rescue <sha>`).
"""

from __future__ import annotations

import os

from fleet.gitrun import GitError, run_git
from fleet.reader import iso

REWRITE_KINDS = ("amend", "reset", "rebase", "pull", "other")
MAX_ANCESTRY_CHECKS = 40


def rewrote(path: str, old: str | None, new: str | None) -> bool:
    """True when moving a ref from `old` to `new` dropped commits (old is not an ancestor of new)."""
    if not old or not new or old == new:
        return False
    try:
        result = run_git(path, ["merge-base", "--is-ancestor", old, new], ok_codes=(0, 1), timeout=10)
    except GitError:
        return False
    return result.returncode == 1


def unreachable(path: str, shas: set[str]) -> set[str]:
    """Which of `shas` exist in the object store but are reachable from no ref (reflogs aside)."""
    if not shas:
        return set()
    try:
        out = run_git(path, ["rev-list", "--ignore-missing", *sorted(shas), "--not", "--all"],
                      max_bytes=4 * 1024 * 1024, timeout=20).stdout
    except GitError:
        return set()
    return set(out.decode("ascii", "replace").split()) & shas


def reflog_timeline(index, repo: dict, limit: int = 60) -> list[dict]:
    """The newest `limit` reflog events of `repo`, each with `rewrote` and `recoverable` (the dropped tip).

    One move logged on both HEAD and the branch it points at is one event, listing both `refs`.
    """
    events: list[dict] = []
    by_move: dict[tuple, dict] = {}
    for row in index.reflog(repo_id=repo["id"], limit=limit * 2):
        key = (row["at"], row["old_sha"], row["new_sha"], row["message"])
        if key in by_move:
            by_move[key]["refs"].append(row["ref"])
            continue
        row["refs"] = [row["ref"]]
        by_move[key] = row
        events.append(row)
    events = events[:limit]
    path = repo["path"]
    checks = 0 if os.path.isdir(path) else MAX_ANCESTRY_CHECKS  # a repo gone from disk keeps its history
    for event in events:
        event["when"] = iso(event["at"])
        event["rewrote"] = False
        if event["kind"] in REWRITE_KINDS and checks < MAX_ANCESTRY_CHECKS:
            checks += 1
            event["rewrote"] = rewrote(path, event["old_sha"], event["new_sha"])
    dropped = {e["old_sha"] for e in events if e["rewrote"]}
    lost = unreachable(path, dropped)
    for event in events:
        event["recoverable"] = event["old_sha"] if event["rewrote"] and event["old_sha"] in lost else None
    return events
