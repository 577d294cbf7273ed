"""Output models: the published outputSchema of each tool (fields listed are the contract; fleet/ may add).

The fleet-wide records are typed once in fleet/views/records.py and derived here (`derive`), so the CLI,
the JSON API and these tools cannot drift apart. Every time in every output is an ISO 8601 UTC string
(tests/test_mcp_contracts.py checks each model below).
"""

from __future__ import annotations

import functools
import types
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import create_model

from fleet.views import records
from mcp_bridge.envelope import Out


@functools.cache
def derive(record: type) -> type[Out]:
    """The pydantic output model of a fleet/ record (a TypedDict), its nested records derived too.

    `NotRequired` keys become optional fields (absent or null); every other key is required.
    """
    fields: dict[str, Any] = {}
    for name, hint in get_type_hints(record, include_extras=True).items():
        if get_origin(hint) is NotRequired:
            fields[name] = (_model_type(get_args(hint)[0]) | None, None)
        else:
            fields[name] = (_model_type(hint), ...)
    return create_model(record.__name__, __base__=Out, __doc__=record.__doc__, **fields)


def _model_type(hint: Any) -> Any:
    """`hint` with every TypedDict inside it (list items, union members) replaced by its derived model."""
    if is_typeddict(hint):
        return derive(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin is list:
        return list[_model_type(args[0])]
    if origin in (Union, types.UnionType):
        return Union[tuple(_model_type(a) for a in args)]
    return hint


class Capped(Out):
    truncated: bool
    omitted_count: int


# --- fleet ---------------------------------------------------------------------------------------------

RepoRecord = derive(records.RepoRecord)
RepoPage = derive(records.RepoPage)
RadarEntry = derive(records.RadarEntry)
Radar = derive(records.RadarView)
DigestEvent = derive(records.DigestEvent)
Digest = derive(records.Digest)


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


# --- one repository ---------------------------------------------------------------------------------------

class BriefHead(Out):
    branch: str | None
    detached: bool
    sha: str | None
    unborn: bool
    upstream: str | None
    upstream_gone: bool
    ahead: int | None
    behind: int | None


class WorkingTree(Out):
    clean: bool
    staged: int
    unstaged: int
    untracked: int
    conflicted: int


class BriefSubmodules(Out):
    total: int
    clean: int
    drifted: int
    uninitialized: int
    conflict: int
    attention: list[dict]
    attention_truncated: bool


class BriefCommit(Out):
    sha: str
    at: str | None
    subject: str | None


class Brief(Out):
    path: str | None
    head: BriefHead
    operation: dict | None
    working_tree: WorkingTree | None
    stashes: int
    submodules: BriefSubmodules
    worktrees: int
    recent_commits: list[BriefCommit]
    hints: list[str]
    error: str | None


class Worktree(Out):
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
    current: bool


class WorktreeList(Capped):
    worktrees: list[Worktree]
    count: int


class Submodule(Out):
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


class Stash(Out):
    index: int
    selector: str
    sha: str | None
    message: str | None
    at: str | None


class StashList(Capped):
    stashes: list[Stash]
    count: int


# --- git reads (fleet.repo.changes, history, diffs, refs, blame, conflicts) --------------------------------------

class Hunk(Out):
    header: str
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[str]


class Change(Out):
    id: str
    path: str
    old_path: str | None
    status: str
    binary: bool
    insertions: int | None
    deletions: int | None
    hunks: list[Hunk] | None = None


class Status(Capped):
    branch: str | None
    detached: bool
    head: str | None
    upstream: str | None
    upstream_gone: bool
    ahead: int | None
    behind: int | None
    stashes: int
    operation: str | None
    staged: list[dict]
    unstaged: list[dict]
    untracked: list[str]
    conflicted: list[dict]
    counts: dict[str, int]
    clean: bool


class Changes(Capped):
    changes: list[Change]
    change_count: int
    staged_count: int
    unstaged_count: int
    untracked_count: int
    summary_only: bool


class Commit(Out):
    sha: str
    parents: list[str]
    author_name: str
    author_email: str
    author_time: str
    committer_name: str
    committer_email: str
    committer_time: str
    subject: str
    is_merge: bool


class History(Capped):
    ref: str | None
    head_sha: str | None
    commits: list[Commit]
    next_cursor: str | None


class ReflogEntry(Out):
    index: int
    selector: str
    old_sha: str | None
    new_sha: str | None
    identity: str
    at: str | None
    message: str


class Reflog(Capped):
    ref: str
    full_ref: str
    entries: list[ReflogEntry]
    entry_count: int


class Refs(Capped):
    head_ref: str | None
    detached: bool
    branches: list[dict]
    remote_branches: list[dict]
    tags: list[dict]
    remotes: list[dict]
    stashes: list[dict]
    counts: dict[str, int]


class CommitDetails(Capped, Commit):
    tree: str
    message: str
    diff_against: str
    is_root: bool
    changes: list[Change]
    file_count: int
    hunks_omitted_count: int


class DiffRefs(Capped):
    base: str
    head: str
    base_sha: str
    head_sha: str
    merge_base: str | None
    diff_from: str
    changes: list[Change]
    file_count: int
    hunks_omitted_count: int


class DiffText(Capped):
    mode: str
    patch: str
    patch_truncated: bool
    total_bytes: int
    total_lines: int
    returned_bytes: int
    returned_lines: int
    files: list[dict]
    files_truncated: bool


class Blame(Capped):
    file: str
    ref: str | None
    ref_sha: str | None
    line_count: int
    start_line: int
    end_line: int | None
    ranges: list[dict]
    commits: list[dict]


class Preflight(Capped):
    source: str
    target: str
    source_sha: str
    target_sha: str
    merge_base: str | None
    result: str
    unrelated_histories: bool
    conflicted_paths: list[str]
    conflict_count: int


class ConflictRead(Capped):
    in_conflict: bool
    operation: str | None
    files: list[dict]
    conflicted_file_count: int


# --- agents -------------------------------------------------------------------------------------------------

class AgentRow(Out):
    agent: str
    repo: str
    repo_name: str | None
    state: str
    sources: list[str]
    branch: str | None
    tool: str | None
    files: list[str]
    last_activity: str | None
    same_agent_as_caller: bool


class Presence(Capped):
    repo: str | None
    agents: list[AgentRow]
    agent_count: int
    collisions: list[dict]
    caller: dict


# --- patch authoring ------------------------------------------------------------------------------------------

class PatchGenerated(Out):
    patch: str
    entries: list[dict]
    unchanged: list[str]
    files_changed: int
    insertions: int
    deletions: int
    bytes: int
    git_check: dict | None
    patch_file: dict | None


class PatchInspected(Out):
    patch_file: str
    entries: list[dict]
    entry_count: int
    duplicate_paths: list[str]
    insertions: int
    deletions: int
    bytes: int


class PatchRemoved(Out):
    patch_file: str
    removed: list[dict]
    removed_count: int
    entries_before: int
    entries_after: int


class PatchValidated(Out):
    valid: bool
    entries: list[dict]
    entry_count: int
    total_hunks: int
    duplicate_paths: list[str]
    error: dict | None
    git_check: dict | None
