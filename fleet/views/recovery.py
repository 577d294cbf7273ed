"""Getting dropped commits back: the lost-commit list for one repo or the fleet, and a recovery hint on the
reflog entries that left a commit behind.

`fleet.index.lost` finds the commits (the index remembers which events dropped which tips; git says which of
them still exist and no ref reaches). This module shapes them for agents, each with the one command that
brings the commit back as a branch; nothing here runs it.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, TypedDict

from fleet.caps import Capped, cap, check_int
from fleet.index.lost import lost_commits, unreachable_commits
from fleet.snapshot.events import DiscardedWork, discarded_in_fleet
from fleet.views.records import HistoryProgress

if TYPE_CHECKING:
    from fleet.index.store import Index


class Dropped(TypedDict):
    sha: str
    subject: str
    recover: str


class ReflogEntry(TypedDict):
    index: int
    selector: str
    old_sha: str | None
    new_sha: str | None
    identity: str
    at: str | None
    message: str
    dropped: Dropped | None


class Reflog(Capped):
    ref: str
    full_ref: str
    entries: list[ReflogEntry]
    entry_count: int
    dropped_count: int


class LostCommit(TypedDict):
    repo: str
    path: str
    sha: str
    subject: str
    author: str
    committed_at: str | None
    dropped_at: str | None
    dropped_by: str
    ref: str | None
    message: str | None
    recover: str


class Lost(Capped):
    commits: list[LostCommit]
    commit_count: int
    errors: list[dict]
    discarded: list[DiscardedWork]
    discarded_count: int
    history: HistoryProgress


def recover_command(path: str, sha: str) -> str:
    """The command that makes `sha` reachable again as a new branch (shell-quoted, safe to paste)."""
    return f"git -C {shlex.quote(path)} branch recovered-{sha[:8]} {sha}"


def lost_view(index: "Index", repo_ids: list[int] | None, since: float | None, limit: int) -> Lost:
    """Recoverable commits, newest drop first, capped at `limit`, each with its `recover` command; and the
    uncommitted work the safety net saw discarded (each with its `restore` command), capped alike."""
    check_int(limit, "limit", 1, 1000)
    found = lost_commits(index, since=since, repo_ids=repo_ids)
    commits = [{**c, "recover": recover_command(c["path"], c["sha"])} for c in found["commits"]]
    kept, info = cap(commits, limit)
    discarded = discarded_in_fleet(index, since, repo_ids)
    return {"commits": kept, "commit_count": len(commits), "errors": found["errors"], **info,
            "discarded": discarded[:limit], "discarded_count": len(discarded), "history": found["history"]}


def annotate_reflog(path: str, reflog: dict[str, Any]) -> Reflog:
    """`reflog` (fleet.repo.refs.repo_reflog) with `dropped` on each entry whose old commit still exists but
    no ref reaches any more: `{sha, recover}`, or null. Asked of git now (one cat-file, one rev-list)."""
    olds = {e["old_sha"] for e in reflog["entries"] if e.get("old_sha") and e["old_sha"] != e.get("new_sha")}
    lost = unreachable_commits(path, sorted(olds)) if olds else {}
    for entry in reflog["entries"]:
        sha = entry.get("old_sha")
        entry["dropped"] = ({"sha": sha, "subject": lost[sha][0], "recover": recover_command(path, sha)}
                            if sha in lost and sha != entry.get("new_sha") else None)
    reflog["dropped_count"] = sum(1 for e in reflog["entries"] if e["dropped"])
    return reflog
