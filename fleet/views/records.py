"""The public records: what `fleetdeck … --json`, the JSON API and the MCP tools promise, typed once.

Every surface builds these shapes through the functions in fleet/views (repos.public_record, queue.radar_view,
digest.digest); mcp_bridge/models.py derives its published outputSchema from these TypedDicts, and
tests/test_mcp_contracts.py checks that the dicts really produced have exactly these keys. Times are ISO 8601
UTC strings (`2026-01-31T12:00:00Z`) everywhere; `iso_times` turns the unix seconds some live git reads
carry into that form for the surfaces.
"""

from __future__ import annotations

import operator
import time
from typing import Any, NotRequired, TypedDict

from fleet.timespec import iso
from fleet.repo.jsonbudget import Rows, Timeless

# Keys that hold a time in a public answer. A number under one of them is unix seconds.
TIME_KEYS = frozenset({"at", "author_time", "committer_time", "last_activity", "scanned_at", "since",
                       "dropped_at", "created_at", "updated_at", "when", "committed_at", "first_commit_at",
                       "last_commit_at"})


class WorktreeRef(TypedDict):
    path: str
    branch: str | None
    head: str | None
    detached: bool
    locked: bool
    prunable: bool


class SubmoduleRef(TypedDict):
    path: str
    recorded: str | None
    checked_out: str | None
    state: str | None


class RepoRecord(TypedDict):
    """One repository as the index knows it (docs/architecture.md, "A repo record"), plus its top attention status."""

    id: int
    path: str
    name: str
    root: str
    bare: bool | None
    branch: str | None
    detached: bool | None
    head: str | None
    upstream: str | None
    upstream_gone: bool | None
    ahead: int | None
    behind: int | None
    staged: int | None
    unstaged: int | None
    untracked: int | None
    conflicted: int | None
    stashes: int | None
    operation: str | None
    operation_details: dict[str, Any] | None
    last_activity: str | None
    scanned_at: str | None
    error: str | None
    gone: bool | None
    status: str
    worktrees: list[WorktreeRef]
    submodules: list[SubmoduleRef]


class RepoPage(TypedDict):
    repos: list[RepoRecord]
    total: int
    offset: int
    next_cursor: str | None
    truncated: bool
    omitted_count: int


class Reason(TypedDict):
    code: str
    score: int
    summary: str
    next_step: str
    details: NotRequired[dict[str, Any]]


class AgentBadge(TypedDict):
    agent: str
    state: str


class RadarEntry(TypedDict):
    """One repository in the attention queue: its top reason first, every reason with a next step."""

    id: int
    name: str
    path: str
    root: str
    branch: str | None
    head: str | None
    score: int
    status: str
    summary: str
    next_step: str
    reasons: list[Reason]
    ahead: int | None
    behind: int | None
    dirty: int
    conflicted: int | None
    operation: str | None
    last_activity: str | None
    error: str | None
    agents: list[AgentBadge]


class RadarView(TypedDict):
    """The queue as every surface returns it: `total` entries matched, `entries` the ones returned."""

    entries: list[RadarEntry]
    total: int
    truncated: bool
    omitted_count: int


class DigestEvent(TypedDict):
    repo: str
    ref: str
    kind: str
    old_sha: str | None
    new_sha: str | None
    at: str | None
    identity: str | None
    message: str | None
    rewrote: bool | None


class DigestError(TypedDict):
    repo: str
    error: str


class HistoryProgress(TypedDict):
    """Whether the index holds every repo's reflog history: while `complete` is false (a never-seen fleet's
    history is read behind its state), events are missing; `read` of `total` repos have theirs."""
    complete: bool
    read: int
    total: int


class Digest(TypedDict):
    since: str | None
    events: list[DigestEvent]
    event_count: int
    truncated: bool
    omitted_count: int
    repos_scanned: int
    errors: list[DigestError]
    gone_repos: list[str]
    history: HistoryProgress


_YEAR_10000 = 253_402_300_800


def iso_times(value: Any) -> Any:
    """`value` with every number under a TIME_KEYS key turned into an ISO 8601 UTC string (recursively);
    a time no calendar holds (a hostile reflog's 23-digit stamp) becomes null rather than an error.

    Every MCP answer passes here, a diff's with thousands of lines, so a dict or list with nothing to
    convert is returned as it is (told at C speed for one of scalars only; a fleet.repo.jsonbudget.Timeless list,
    such as a diff's changes or a blame's ranges, is not walked) and only what changed is copied."""
    if isinstance(value, dict):
        if TIME_KEYS.isdisjoint(value) and _SCALARS.issuperset(map(type, value.values())):
            return value
        changed = {}
        for k, v in value.items():
            if k in TIME_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool):
                changed[k] = _iso_or_none(v)
            elif type(v) not in _SCALARS:
                new = iso_times(v)
                if new is not v:
                    changed[k] = new
        return {**value, **changed} if changed else value
    if isinstance(value, list):
        if type(value) is Rows:
            return _iso_rows(value)
        if isinstance(value, Timeless) or _SCALARS.issuperset(map(type, value)):
            return value
        new = [v if type(v) in _SCALARS else iso_times(v) for v in value]
        return value if all(map(operator.is_, new, value)) else new
    return value


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _iso_rows(rows: Rows) -> Rows:
    """A Rows' times converted in place (its dicts belong to this answer alone), each second once: a commit's
    author and committer times are mostly the same second."""
    keys = rows.time_keys
    known: dict[float, str | None] = {}
    for row in rows:
        for key in keys:
            seconds = row[key]
            if type(seconds) is int or type(seconds) is float:
                iso = known.get(seconds)
                if iso is None:
                    iso = known[seconds] = _iso_or_none(seconds)
                row[key] = iso
    return rows


_TWO = [f"{n:02d}" for n in range(60)]   # hours, minutes and seconds as two digits (a lookup, not a format)
_DAYS: dict[int, str] = {}   # "YYYY-MM-DD" of recent days since the epoch (an answer's times share days)


def _iso_or_none(seconds: float) -> str | None:
    if type(seconds) is int and 0 <= seconds < _YEAR_10000:   # the usual case (a blame has 400): the day's
        # date once, the time of day by arithmetic and lookups (10x faster than strftime each time)
        day, clock = divmod(seconds, 86400)
        date = _DAYS.get(day)
        if date is None:
            if len(_DAYS) >= 4096:
                _DAYS.clear()
            date = _DAYS[day] = time.strftime("%Y-%m-%d", time.gmtime(seconds))
        return f"{date}T{_TWO[clock // 3600]}:{_TWO[clock // 60 % 60]}:{_TWO[clock % 60]}Z"
    try:
        return iso(seconds)
    except (OverflowError, ValueError, OSError):
        return None
