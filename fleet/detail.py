"""Everything the repo page shows about one repository, gathered from the index and (for history) git."""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.gitrun import GitError
from fleet.history import repo_history
from fleet.timeline import reflog_timeline


def repo_detail(index, key: int | str, presence_rows: list[dict] | None = None,
                commits: int = 15, events: int = 60) -> dict | None:
    """The full record plus its reasons, recent commits, reflog timeline and the agents present, or None."""
    record = index.repo(key)
    if record is None:
        return None
    history: dict = {"commits": [], "truncated": False, "omitted_count": 0}
    history_error = None
    if not record.get("gone"):
        try:
            history = repo_history(record["path"], limit=commits)
        except (FleetError, GitError) as exc:
            history_error = exc.message
    return {
        "repo": record,
        "reasons": record.get("reasons") or [],
        "commits": history["commits"],
        "more_commits": history["omitted_count"],
        "timeline": reflog_timeline(index, record, events),
        "agents": [r for r in (presence_rows or []) if r["repo"] == record["path"]],
        "history_error": history_error,
    }
