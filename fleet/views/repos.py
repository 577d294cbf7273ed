"""The fleet listing every surface pages through: repo records filtered by root, name and state.

One function so `fleetdeck repos`, the dashboard and the MCP `fleet.repos` tool filter and page the same way.
A cursor is an opaque string (today: the offset of the next page) so clients never build one themselves.
"""

from __future__ import annotations

import os
from typing import Callable

from fleet.caps import check_int
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.views.records import RepoPage, RepoRecord, SubmoduleRef, WorktreeRef

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000

# The record's plain fields, in records.RepoRecord's order; the computed ones are filled in by public_record.
RECORD_FIELDS = tuple(k for k in RepoRecord.__annotations__ if k not in ("status", "worktrees", "submodules"))
COLUMN_OF = {"operation_details": "operation_detail"}  # public name -> the index's column, where they differ
WORKTREE_FIELDS = tuple(WorktreeRef.__annotations__)
SUBMODULE_FIELDS = tuple(SubmoduleRef.__annotations__)


def _dirty(r: dict) -> bool:
    return bool((r.get("staged") or 0) + (r.get("unstaged") or 0) + (r.get("untracked") or 0))


STATES: dict[str, Callable[[dict], bool]] = {
    "dirty": _dirty,
    "clean": lambda r: not r.get("score"),
    "ahead": lambda r: bool(r.get("ahead")),
    "behind": lambda r: bool(r.get("behind")),
    "diverged": lambda r: bool(r.get("ahead")) and bool(r.get("behind")),
    "conflicted": lambda r: bool(r.get("conflicted")),
    "operation": lambda r: r.get("operation") is not None,
    "detached": lambda r: bool(r.get("detached")),
    "no_upstream": lambda r: bool(r.get("branch")) and not r.get("upstream"),
    "stashes": lambda r: bool(r.get("stashes")),
    "error": lambda r: r.get("error") is not None,
    "gone": lambda r: bool(r.get("gone")),
}


def public_record(full: dict) -> RepoRecord:
    """The public repo record (records.RepoRecord) of a full index record, plus its top attention status.

    The one projection every surface uses: index-internal columns (score, generation, gitdir, …) stay out.
    """
    out: dict = {key: full.get(COLUMN_OF.get(key, key)) for key in RECORD_FIELDS}
    reasons = full.get("reasons") or []
    out["status"] = reasons[0]["code"] if reasons else "clean"
    out["worktrees"] = [{k: w.get(k) for k in WORKTREE_FIELDS} for w in full.get("worktrees", [])]
    out["submodules"] = [{k: s.get(k) for k in SUBMODULE_FIELDS} for s in full.get("submodules", [])]
    return out  # type: ignore[return-value]


def public_records(index: Index, include_gone: bool = False) -> list[RepoRecord]:
    """Every repo record in the index, in path order (`fleetdeck repos --json`, `/api/repos`)."""
    return [public_record(full) for full in index.repos(include_gone=include_gone)]


def parse_cursor(cursor: str | None) -> int:
    if cursor is None or cursor == "":
        return 0
    if not isinstance(cursor, str) or not cursor.isdigit() or len(cursor) > 9:
        raise FleetError("BAD_ARGUMENT", f"cursor {cursor!r} was not returned by this listing")
    return int(cursor)


def list_repos(index: Index, *, root: str | None = None, name_contains: str | None = None,
               state: str | None = None, cursor: str | None = None, limit: int = DEFAULT_LIMIT,
               include_gone: bool = False) -> RepoPage:
    """One page of repo records matching every filter given, in path order.

    `state` is one of STATES (gone repos are only listed with `include_gone` or `state="gone"`). The answer
    says how many matched (`total`), where the next page starts (`next_cursor`) and what this page left out.
    """
    check_int(limit, "limit", 1, MAX_LIMIT)
    if state is not None and state not in STATES:
        raise FleetError("BAD_ARGUMENT", f"unknown state {state!r}; expected one of {', '.join(STATES)}")
    offset = parse_cursor(cursor)
    rows = index.summaries(include_gone=include_gone or state == "gone")
    if root is not None:
        real = os.path.realpath(root) if os.path.isabs(root) else root
        rows = [r for r in rows if r["root"] in (root, real)]
    if name_contains:
        needle = name_contains.casefold()
        rows = [r for r in rows if needle in r["name"].casefold()]
    if state is not None:
        rows = [r for r in rows if STATES[state](r)]
    page = rows[offset:offset + limit]
    records = [public_record(full) for full in (index.repo(r["id"]) for r in page) if full is not None]
    end = offset + len(page)
    omitted = max(0, len(rows) - end)
    return {
        "repos": records, "total": len(rows), "offset": offset,
        "next_cursor": str(end) if omitted else None, "truncated": omitted > 0, "omitted_count": omitted,
    }
