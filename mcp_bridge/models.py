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

from fleet.repo import identity
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


RepoIdentity = derive(identity.RepoIdentity)


class Named(Out):
    """Added to every per-repo tool's output (mcp_bridge.toolkit): the repository that answered."""

    repo: RepoIdentity


class MaybeNamed(Out):
    """Added to the output of a tool whose `repo` is optional: the repository, when one was given."""

    repo: RepoIdentity | None = None


# --- fleet ---------------------------------------------------------------------------------------------

class Watcher(Out):
    state: str
    mode: str | None
    heartbeat_age_s: float | None


class Refreshed(Out):
    repo: str
    refreshed: bool
    error: str | None


class Freshness(Out):
    """How old the index behind a fleet answer is, whether a watcher keeps it current, what was re-read."""

    indexed_at: str | None
    age_s: float | None
    watcher: Watcher
    refreshed: list[Refreshed]


class Fresh(Out):
    freshness: Freshness


RepoRecord = derive(records.RepoRecord)
RepoPage = type("RepoPage", (derive(records.RepoPage), Fresh), {"__doc__": records.RepoPage.__doc__})
RadarEntry = derive(records.RadarEntry)
Radar = type("Radar", (derive(records.RadarView), Fresh), {"__doc__": records.RadarView.__doc__})
DigestEvent = derive(records.DigestEvent)
HistoryProgress = derive(records.HistoryProgress)
Digest = type("Digest", (derive(records.Digest), Fresh), {"__doc__": records.Digest.__doc__})


class SearchMatch(Out):
    kind: str
    repo: str | None
    path: str | None
    ref: str | None
    sha: str | None
    text: str | None
    at: str | None


class SearchResult(Capped, Fresh):
    query: str
    matches: list[SearchMatch]
    match_count: int
    searched: dict


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


class Conventions(Out):
    sampled: int
    conventional_commits: bool
    conventional_ratio: float
    types: list[str]
    area_prefix_ratio: float
    area_prefixes: list[str]
    signed_off_ratio: float
    trailers: dict[str, int]
    subject_length: dict[str, int]
    ticket_prefixes: dict[str, int]
    issue_refs_ratio: float


class Brief(Out):
    path: str | None
    default_branch: str | None
    conventions: Conventions | None
    head: BriefHead
    operation: dict | None
    working_tree: WorkingTree | None
    stashes: int
    submodules: BriefSubmodules
    worktrees: int
    worktree_attention: list[dict]
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
    operation: str | None
    staged: int | None
    unstaged: int | None
    untracked: int | None
    conflicted: int | None
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
    id: str | None = None  # stable while the file is unchanged; operation.preview.stage_hunks takes it
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


class History(Out):
    ref: str | None
    head_sha: str | None
    range: str | None = None
    commits: list[Commit]
    next_cursor: str | None
    truncated: bool
    has_more: bool
    omitted_count: int | None
    omitted_count_at_least: int
    path_match: str | None = None
    note: str | None = None


class Dropped(Out):
    sha: str
    subject: str
    recover: str


class ReflogEntry(Out):
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


class Refs(Capped):
    head_ref: str | None
    detached: bool
    tag_sort: str
    branches: list[dict]
    remote_branches: list[dict]
    tags: list[dict]
    remotes: list[dict]
    stashes: list[dict]
    counts: dict[str, int]


class CommitDetails(Capped, Commit):
    tree: str
    message: str
    message_truncated: bool
    diff_against: str
    is_root: bool
    changes: list[Change]
    file_count: int
    hunks_omitted_count: int
    lines_omitted_count: int


class RefPair(Capped):
    """What a two-ref comparison resolved: both refs, their shas, and the side the diff starts from."""
    base: str
    head: str
    base_sha: str
    head_sha: str
    merge_base: str | None
    diff_from: str


class DiffRefs(RefPair):
    changes: list[Change]
    file_count: int
    hunks_omitted_count: int
    lines_omitted_count: int


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
    binary: bool
    line_count: int | None
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
    session: str = ""
    repo_name: str | None
    state: str
    waiting_since: str | None = None
    waiting_kind: str | None = None
    sources: list[str]
    branch: str | None
    tool: str | None
    files: list[str]
    last_activity: str | None
    same_agent_as_caller: bool
    you: bool
    other_sessions: int
    mcp_clients: list[dict]


class Presence(Capped):
    repo: str | None
    agents: list[AgentRow]
    agent_count: int
    collisions: list[dict]
    caller: dict
    switches: dict[str, bool]


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
    tool_policy_ok: bool


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
    tool_policy_ok: bool


# --- lost work, branch stacks, scope, semantic diffs --------------------------------------------------------

class LostCommit(Out):
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


class DiscardedWork(Out):
    repo: str
    path: str
    at: str
    restore_from: str
    snapshot: str
    agents: list[str]
    files: list[str]
    count: int
    lines: int
    bytes: int
    stashes_dropped: list[str]
    command: str | None
    summary: str
    restore: str


class SnapshotTaken(Out):
    id: str
    worktree: str
    at: str
    trigger: str
    files: int
    bytes_added: int
    skipped: list[dict]
    unchanged: bool


class SnapshotEntry(Out):
    id: str
    at: str
    trigger: str
    agents: list[str]
    changed_files: int
    discarded: bool
    command: str | None
    head: str | None
    branch: str | None
    skipped: list[dict]


class SnapshotList(Capped):
    snapshots: list[SnapshotEntry]
    snapshot_count: int


class SnapshotDiff(Capped):
    patch: str
    total_bytes: int


class Lost(Capped):
    commits: list[LostCommit]
    commit_count: int
    errors: list[dict]
    discarded: list[DiscardedWork]
    discarded_count: int
    history: HistoryProgress


class StackBranch(Out):
    name: str
    sha: str
    ahead: int


class Upstream(Out):
    name: str
    gone: bool
    sha: str | None
    ahead: int | None
    behind: int | None
    merge_base: str | None


class BranchStack(Capped):
    branch: str
    sha: str
    base: str
    base_sha: str
    default_branch: str | None
    default_branch_source: str | None
    merge_base: str | None
    ahead: int
    behind: int
    upstream: Upstream | None
    stacked_above: list[StackBranch]
    stacked_below: list[StackBranch]


class ScopeAuthor(Out):
    name: str
    email: str
    commits: int


class ScopeFile(Out):
    path: str
    commits: int
    owners: list[str] | None = None


class CodeOwners(Out):
    file: str
    read_by: list[str]
    files_found: list[str]
    owners: list[str]
    rules: list[dict]


class Scope(Capped):
    path: str | None
    since: str | None
    commit_count: int
    commits_truncated: bool
    first_commit_at: str | None
    last_commit_at: str | None
    authors: list[ScopeAuthor]
    author_count: int
    authors_truncated: bool
    files: list[ScopeFile]
    file_count: int
    files_truncated: bool
    codeowners: CodeOwners | None


class Symbol(Out):
    name: str
    kind: str
    line: int
    end_line: int | None


class AddedSymbol(Symbol):
    same_body_as: str | None


class ChangedSymbol(Symbol):
    old_line: int


class SemanticFile(Out):
    path: str
    old_path: str | None
    status: str
    language: str | None
    supported: bool
    reason: str | None = None
    text_diff: dict | None = None
    added: list[AddedSymbol] | None = None
    removed: list[Symbol] | None = None
    changed: list[ChangedSymbol] | None = None


class SemanticDiff(RefPair):
    supported: bool
    files: list[SemanticFile]
    file_count: int
    supported_count: int
