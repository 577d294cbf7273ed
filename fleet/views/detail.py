"""Everything the repo page shows about one repository, gathered from the index and (for history) git."""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.index.events import repo_events
from fleet.git.revs import found_of
from fleet.repo.changes import repo_status
from fleet.repo.history import repo_history
from fleet.index.freshness import history_progress
from fleet.timespec import iso


FILES_SHOWN = 50  # per list (conflicted, staged, modified, untracked); the page gives the full counts


def repo_detail(index, key: int | str, presence_rows: list[dict] | None = None,
                commits: int = 15, events: int = 60) -> dict | None:
    """The full record plus its reasons, recent commits, the working tree's files (read from git now, like the
    history: the record holds only counts), event timeline and the agents present, or None."""
    record = index.repo(key)
    if record is None:
        return None
    history: dict = {"commits": [], "truncated": False, "omitted_count": 0}
    history_error = None
    files = None
    if not record.get("gone"):
        try:
            history = repo_history(record["path"], limit=commits, count_omitted=True)  # the page says how many
        except FleetError as exc:  # a GitError too
            history_error = exc.message
        if not record.get("bare"):
            try:
                files = repo_status(found_of(record["path"], record["root"]), FILES_SHOWN)
            except FleetError as exc:  # a GitError too
                files = {"error": exc.message}
    return {
        "repo": record,
        "reasons": record.get("reasons") or [],
        "commits": history["commits"],
        "more_commits": history["omitted_count"],
        "timeline": timeline(index, record["id"], events),
        "agents": [r for r in (presence_rows or []) if r["repo"] == record["path"]],
        "history_error": history_error,
        "files": files,
        "history": history_progress(index, record["id"]),  # its timeline's events are not read yet
    }


def timeline(index, repo_id: int, limit: int = 60) -> list[dict]:
    """The repo's newest events (kept by the index after git expires its reflogs), each with `when` (ISO) and
    `recoverable`: the sha of the commit this very event dropped when no ref reaches it any more."""
    events = repo_events(index, repo_id, limit)
    dropped = {(c["sha"], c["dropped_at"], c["ref"]) for c in index.digest.recoverable(None, [repo_id])["commits"]}
    for event in events:
        event["when"] = iso(event["at"])
        event["recoverable"] = event["old_sha"] if (event["old_sha"], event["at"], event["ref"]) in dropped else None
    return events
