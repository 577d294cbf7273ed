"""Everything the repo page shows about one repository, gathered from the index and (for history) git."""

from __future__ import annotations

from fleet.commits import recent_commits
from fleet.gitrun import GitError
from fleet.timeline import reflog_timeline


def repo_detail(index, key: int | str, presence_rows: list[dict] | None = None,
                commits: int = 15, events: int = 60) -> dict | None:
    """The full record plus its reasons, recent commits, reflog timeline and the agents present, or None."""
    record = index.repo(key)
    if record is None:
        return None
    history_error = None
    try:
        log = [] if record.get("gone") else recent_commits(record["path"], record.get("head"), commits)
    except GitError as exc:
        log, history_error = [], exc.message
    return {
        "repo": record,
        "reasons": record.get("reasons") or [],
        "commits": log,
        "timeline": reflog_timeline(index, record, events),
        "agents": [r for r in (presence_rows or []) if r["repo"] == record["path"]],
        "history_error": history_error,
    }
