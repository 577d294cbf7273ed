"""Output models: the published outputSchema of each tool (fields listed are the contract; fleet/ may add)."""

from __future__ import annotations

from mcp_bridge.envelope import Out


class Capped(Out):
    truncated: bool
    omitted_count: int


# --- fleet ---------------------------------------------------------------------------------------------

class WorktreeRef(Out):
    path: str
    branch: str | None
    head: str | None
    detached: bool
    locked: bool
    prunable: bool


class SubmoduleRef(Out):
    path: str
    recorded: str | None
    checked_out: str | None
    state: str | None


class RepoRecord(Out):
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
    operation_detail: dict | None
    last_activity: str | None
    scanned_at: str | None
    error: str | None
    gone: bool | None
    status: str
    worktrees: list[WorktreeRef]
    submodules: list[SubmoduleRef]


class RepoPage(Capped):
    repos: list[RepoRecord]
    total: int
    offset: int
    next_cursor: str | None


class Reason(Out):
    code: str
    score: int
    summary: str
    next_step: str


class RadarEntry(Out):
    id: int
    name: str
    path: str
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


class Radar(Capped):
    entries: list[RadarEntry]
    total: int


class SearchMatch(Out):
    kind: str
    repo: str | None
    path: str | None
    ref: str | None
    sha: str | None
    text: str | None
    at: str | None


class SearchResult(Capped):
    query: str
    matches: list[SearchMatch]
    match_count: int
