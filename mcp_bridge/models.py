"""Output models: the published outputSchema of each tool (fields listed are the contract; fleet/ may add).

Every answer is typed once, as a TypedDict next to the fleet/ code that builds it (the fleet-wide records in
fleet/views/records.py, one repository's reads in fleet/repo/*, lost work in fleet/views/recovery.py, patch
files in fleet/patch), and derived here (`derive`), so the CLI, the JSON API and these tools cannot drift
apart; the write side's answers (fleet/ops/proposals.py, fleet/ops/restorepoints.py) are derived beside
their tools in mcp_bridge/tools_ops.py, which alone loads them. The models still written here describe answers an adapter assembles itself (freshness, presence,
snapshots), each with its reason. tests/test_mcp_golden.py holds the published schemas byte for byte. Every
time in every output is an ISO 8601 UTC string (tests/test_mcp_contracts.py checks each model below).
"""

from __future__ import annotations

import functools
import importlib
import types
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import create_model

from fleet import caps
from fleet.index import search
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


Capped = derive(caps.Capped)
RepoIdentity = derive(identity.RepoIdentity)


class Named(Out):
    """Added to every per-repo tool's output (mcp_bridge.toolkit): the repository that answered."""

    repo: RepoIdentity


class MaybeNamed(Out):
    """Added to the output of a tool whose `repo` is optional: the repository, when one was given."""

    repo: RepoIdentity | None = None


# --- fleet ---------------------------------------------------------------------------------------------

# Written here, not derived: mcp_bridge/tools_fleet.py assembles the freshness of a fleet answer from
# fleet.index.freshness and the refreshes it ran itself.
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
SearchResult = type("SearchResult", (derive(search.SearchResult), Fresh), {"__doc__": search.SearchResult.__doc__})


# --- agents -------------------------------------------------------------------------------------------------

# Written here, not derived: the rows are assembled by mcp_bridge/tools_agents.py from fleet.presence's, and
# `session` defaults to "" (a TypedDict key cannot carry a default other than absent).
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


# --- snapshots -----------------------------------------------------------------------------------------------

# Written here, not derived: mcp_bridge/tools_snapshot.py assembles these answers from fleet.snapshot's.
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


# The answers of one repository's reads, lost work and patch files: derived when a tool first names its
# model (module __getattr__), so that a fleet-wide call does not load the readers (and pygit2) for a schema.
READERS = {
    "Brief": "fleet.repo.brief",
    "WorktreeList": "fleet.repo.parts",
    "SubmoduleStatus": "fleet.repo.parts",
    "StashList": "fleet.repo.parts",
    "Status": "fleet.repo.changes",
    "Changes": "fleet.repo.changes",
    "History": "fleet.repo.history",
    "Reflog": "fleet.views.recovery",
    "Refs": "fleet.repo.refs",
    "CommitDetails": "fleet.repo.history",
    "DiffRefs": "fleet.repo.diffs",
    "DiffText": "fleet.repo.diffs",
    "Blame": "fleet.repo.blame",
    "Preflight": "fleet.repo.conflicts",
    "ConflictRead": "fleet.repo.conflicts",
    "PatchGenerated": "fleet.patch.generate",
    "PatchInspected": "fleet.patch.file",
    "PatchRemoved": "fleet.patch.file",
    "PatchValidated": "fleet.patch.file",
    "Lost": "fleet.views.recovery",
    "SnapshotTaken": "fleet.snapshot.take",
    "BranchStack": "fleet.repo.stack",
    "Scope": "fleet.repo.ownership",
    "SemanticDiff": "fleet.repo.semantic",
}


def __getattr__(name: str) -> type[Out]:
    if name not in READERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    model = globals()[name] = derive(getattr(importlib.import_module(READERS[name]), name))
    return model
