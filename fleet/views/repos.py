"""The fleet listing every surface pages through: repo records filtered by root, name and state.

One function so `fleetdeck repos`, the dashboard and the MCP `fleet.repos` tool filter and page the same way.
A cursor is an opaque string (today: the offset of the next page) so clients never build one themselves.
"""

from __future__ import annotations

import os
from typing import Callable

from fleet.errors import FleetError
from fleet.index.store import Index

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000

# Public record fields (DESIGN.md "A repo record"), in a stable order; index-internal columns stay out.
RECORD_FIELDS = (
    "id", "path", "name", "root", "bare", "branch", "detached", "head", "upstream", "upstream_gone",
    "ahead", "behind", "staged", "unstaged", "untracked", "conflicted", "stashes", "operation",
    "operation_detail", "last_activity", "scanned_at", "error", "gone",
)
WORKTREE_FIELDS = ("path", "branch", "head", "detached", "locked", "prunable")
SUBMODULE_FIELDS = ("path", "recorded", "checked_out", "state")


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


def public_record(full: dict) -> dict:
    """The DESIGN.md repo record of a full index record, plus its top attention status."""
    out = {key: full.get(key) for key in RECORD_FIELDS}
    reasons = full.get("reasons") or []
    out["status"] = reasons[0]["code"] if reasons else "clean"
    out["worktrees"] = [{k: w.get(k) for k in WORKTREE_FIELDS} for w in full.get("worktrees", [])]
    out["submodules"] = [{k: s.get(k) for k in SUBMODULE_FIELDS} for s in full.get("submodules", [])]
    return out


def parse_cursor(cursor: str | None) -> int:
    if cursor is None or cursor == "":
        return 0
    if not isinstance(cursor, str) or not cursor.isdigit() or len(cursor) > 9:
        raise FleetError("BAD_ARGUMENT", f"cursor {cursor!r} was not returned by this listing")
    return int(cursor)


def list_repos(index: Index, *, root: str | None = None, name_contains: str | None = None,
               state: str | None = None, cursor: str | None = None, limit: int = DEFAULT_LIMIT,
               include_gone: bool = False) -> dict:
    """One page of repo records matching every filter given, in path order.

    `state` is one of STATES (gone repos are only listed with `include_gone` or `state="gone"`). The answer
    says how many matched (`total`), where the next page starts (`next_cursor`) and what this page left out.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise FleetError("BAD_ARGUMENT", f"limit must be an integer between 1 and {MAX_LIMIT}")
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
