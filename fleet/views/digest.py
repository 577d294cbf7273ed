"""What happened in the fleet since a point in time: the single source for `fleetdeck digest`, the MCP tool
`fleet.digest` and the dashboard's `/digest` page.

`digest()` returns exactly the documented contract (docs/digest.md, the MCP `Digest` model). `report()` adds what the human formats show on top of it:
events per repo per day (`activity_by_repo_day`, reused by the dashboard's chart) and the state of the fleet
at the end of the window (unpushed, dirty, old stashes, rewrites, recoverable commits). In the report, bulk
events (fetches: one `git fetch` moves every remote-tracking ref) are grouped per repository instead of
listed, so real work is not crowded out of the list; asking for such a kind by name lists them again.
"""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Iterable, Mapping

from fleet.caps import check_int
from fleet.errors import FleetError
from fleet.index.events import KINDS, as_stash, stash_times
from fleet.index.freshness import history_progress
from fleet.timespec import iso
from fleet.snapshot.events import KIND as DISCARDED
from fleet.snapshot.events import details as discarded_details
from fleet.timespec import parse_since
from fleet.views.records import Digest

if TYPE_CHECKING:
    from fleet.index.store import Index

MAX_EVENTS_LIMIT = 1000
STALE_STASH_S = 7 * 86400
CHART_MAX_REPOS = 20
CHART_MAX_DAYS = 92
SUMMARY_CAP = 50
BULK_KINDS = ("fetch",)
BULK_REFS_SHOWN = 5


def digest(index: "Index", since: str | int | float, repos: list[str] | None = None,
           kinds: list[str] | None = None, max_events: int = 200) -> Digest:
    """Events since `since` (newest first, at most `max_events`), as records.Digest (the `fleet.digest`
    contract, also `fleetdeck digest --format json` and `/api/digest`)."""
    return _digest(index, *_arguments(index, since, repos, kinds, max_events))


def _arguments(index: "Index", since: str | int | float, repos: list[str] | None, kinds: list[str] | None,
               max_events: int) -> tuple[float, list[int] | None, list[str] | None, int]:
    check_int(max_events, "max_events", 1, MAX_EVENTS_LIMIT)
    return parse_since(since), resolve_repos(index, repos), _check_kinds(kinds), max_events


def _digest(index: "Index", start: float, scope: list[int] | None, kinds: list[str] | None,
            max_events: int) -> Digest:
    total, rows = index.digest.events(start, scope, kinds, max_events)
    names = index.digest.names({r[0] for r in rows})
    stashes = stash_times(index, sorted({r[0] for r in rows}))
    events = [as_stash({
        "repo": names.get(r[0], str(r[0])), "ref": r[1], "kind": r[2], "old_sha": r[3], "new_sha": r[4],
        "at": iso(r[5]), "identity": r[6], "rewrote": None if r[8] is None else bool(r[8]),
        "message": discarded_details(r[7]).get("summary", r[7]) if r[2] == DISCARDED else r[7],
    }, stashes.get((r[0], r[5]))) for r in rows]
    scanned, errors = index.digest.scanned(scope)
    gone = index.digest.gone_names()
    return {
        "since": iso(start), "events": events, "event_count": total, "truncated": total > len(events),
        "omitted_count": total - len(events),
        "repos_scanned": scanned, "errors": [{"repo": name, "error": err} for name, err in errors if err],
        "gone_repos": sorted({e["repo"] for e in events} & gone),  # listed with events, no longer watched
        "history": history_progress(index),  # incomplete: repos whose events are not read yet
    }


def resolve_repos(index: "Index", repos: list[str] | None) -> list[int] | None:
    """Repo ids for fleet names or paths; None means the whole fleet. Unknown names are an error."""
    if repos is None:
        return None
    if isinstance(repos, str) or not all(isinstance(r, str) and r for r in repos):
        raise FleetError("BAD_ARGUMENT", "repos must be a list of fleet names or absolute paths")
    ids = []
    for key in repos:
        repo_id = index.repo_id(key, key.rstrip("/") or key)
        if repo_id is None:
            raise FleetError("REPO_NOT_IN_FLEET", f"not a repository in the fleet: {key}")
        ids.append(repo_id)
    return ids


def _check_kinds(kinds: list[str] | None) -> list[str] | None:
    if kinds is None:
        return None
    if isinstance(kinds, str) or any(k not in KINDS for k in kinds):
        raise FleetError("BAD_ARGUMENT", f"kinds must be a list drawn from: {', '.join(KINDS)}")
    return list(kinds)


def activity_by_repo_day(events: Iterable[dict], start: float | None = None, end: float | None = None,
                         max_repos: int = CHART_MAX_REPOS) -> dict:
    """Events per repo per local day, for a chart: `{days, rows: [{repo, counts, total}], max}`.

    `events` are digest events (`repo`, `at` as ISO 8601). Days run from `start` (or the first event) to
    `end` (or now); the busiest `max_repos` repos get a row each, the rest share one "(other repos)" row.
    """
    return _activity(((ev["repo"], _local_day(ev["at"])) for ev in events), start, end, max_repos)


def _activity(days: Iterable[tuple[str, date]], start: float | None, end: float | None, max_repos: int) -> dict:
    """`activity_by_repo_day` over (repo, local day) pairs."""
    per_repo: dict[str, dict[date, int]] = {}
    stamps = []
    for repo, day in days:
        stamps.append(day)
        counts = per_repo.get(repo)
        if counts is None:
            counts = per_repo[repo] = {}
        counts[day] = counts.get(day, 0) + 1
    first = date.fromtimestamp(start) if start is not None else min(stamps, default=date.today())
    last = date.fromtimestamp(end if end is not None else time.time())
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)] if last >= first else []
    return chart_rows(per_repo, days, max_repos)


def chart_rows(per_repo: dict[str, Mapping[date, int]], days: list[date], max_repos: int = CHART_MAX_REPOS) -> dict:
    """The chart of `per_repo` ({repo: events per day}) over `days`: the busiest `max_repos` repos a row each,
    the rest one "(other repos)" row (`activity_by_repo_day`'s shape)."""
    totals = {name: sum(counts.values()) for name, counts in per_repo.items()}   # each repo's summed once
    ranked = sorted(per_repo, key=lambda name: (-totals[name], name))
    shown = [(name, per_repo[name], totals[name]) for name in ranked[:max_repos]]
    rest = ranked[max_repos:]
    if rest:
        merged: dict[date, int] = {}
        for name in rest:
            for day, n in per_repo[name].items():
                merged[day] = merged.get(day, 0) + n
        shown.append((f"(other repos: {len(rest)})", merged, sum(totals[name] for name in rest)))
    rows = [{"repo": name, "counts": [counts.get(d, 0) for d in days], "total": total}
            for name, counts, total in shown]
    return {"days": [d.isoformat() for d in days], "rows": rows,
            "max": max((c for row in rows for c in row["counts"]), default=0)}


def _local_day(stamp: str) -> date:
    return datetime.fromisoformat(stamp).astimezone().date()


def report(index: "Index", since: str | int | float, repos: list[str] | None = None,
           kinds: list[str] | None = None, max_events: int = 200) -> dict:
    """The digest plus what a person reading it by mail wants: the activity chart and the fleet's state now.

    The chart covers at most CHART_MAX_DAYS days: the end of the window, or up to its newest event.
    """
    start, scope, kinds, max_events = _arguments(index, since, repos, kinds, max_events)
    listed = kinds if kinds is not None else [k for k in KINDS if k not in BULK_KINDS]
    body = _digest(index, start, scope, listed, max_events)
    now = time.time()
    chart_end = now
    if now - start > CHART_MAX_DAYS * 86400 and body["events"]:
        chart_end = min(now, datetime.fromisoformat(body["events"][0]["at"]).timestamp())  # the newest event
    chart_start = max(start, chart_end - CHART_MAX_DAYS * 86400)
    times = index.digest.event_times(chart_start, scope, listed, chart_end)
    names = index.digest.names({rid for rid, _at in times})
    # each event's local day from its unix second (what `_local_day` of its ISO time gives, without the round trip)
    every = ((names.get(rid, str(rid)), date.fromtimestamp(at)) for rid, at in times)
    return {
        "generated_at": iso(now), "digest": body,
        "activity": _activity(every, chart_start, chart_end, CHART_MAX_REPOS),
        "bulk": bulk_groups(index, start, scope) if kinds is None else {"groups": [], "event_count": 0, "summary": ""},
        "fleet": fleet_state(index, start, scope, now),
    }


def bulk_groups(index: "Index", start: float, scope: list[int] | None) -> dict:
    """Bulk events since `start` grouped per (repo, kind), busiest first: `{groups: [{repo, kind, count,
    ref_count, refs (the first few, by name), first_at, last_at}], event_count, summary}`."""
    ref_rows, group_rows = index.digest.groups(start, scope, list(BULK_KINDS))
    names = index.digest.names({r[0] for r in group_rows})
    refs: dict[tuple[int, str], list[str]] = {}
    for repo_id, kind, ref in ref_rows:
        refs.setdefault((repo_id, kind), []).append(ref)
    groups = []
    for repo_id, kind, count, first, last in group_rows:
        names_ = refs.get((repo_id, kind), [])
        groups.append({"repo": names.get(repo_id, str(repo_id)), "kind": kind, "count": count,
                       "ref_count": len(names_), "refs": names_[:BULK_REFS_SHOWN],
                       "first_at": iso(first), "last_at": iso(last)})
    total = sum(g["count"] for g in groups)
    kinds = "/".join(sorted({g["kind"] for g in groups}))
    return {"groups": groups, "event_count": total,
            "summary": f"{total} {kinds} event{'s' if total != 1 else ''} in {len(groups)} "
                       f"repositor{'ies' if len(groups) != 1 else 'y'} (grouped per repository)"}


def fleet_state(index: "Index", start: float, scope: list[int] | None, now: float) -> dict:
    """The fleet at the end of the window: what a person should still act on."""
    queries = index.digest
    # ahead of its upstream, or with no upstream at all (never pushed: `ahead` and `upstream` are None)
    unpushed_count, unpushed = queries.unpushed(scope, SUMMARY_CAP)
    dirty_count, dirty = queries.dirty(scope, SUMMARY_CAP)
    stash_count, stashes = queries.stashes_before(iso(now - STALE_STASH_S), scope, SUMMARY_CAP)
    rewrite_count, rewrites = queries.rewrites(start, scope, SUMMARY_CAP)
    lost = queries.recoverable(start, scope)
    return {
        "unpushed": [{"repo": r[0], "branch": r[1], "ahead": r[2], "upstream": r[3]} for r in unpushed],
        "unpushed_count": unpushed_count,
        "dirty": [{"repo": r[0], "staged": r[1], "unstaged": r[2], "untracked": r[3], "conflicted": r[4]}
                  for r in dirty], "dirty_count": dirty_count,
        "stale_stashes": [{"repo": r[0], "index": r[1], "message": r[2], "at": r[3]} for r in stashes],
        "stale_stash_count": stash_count,
        "rewrites": [{"repo": r[0], "ref": r[1], "kind": r[2], "old_sha": r[3], "new_sha": r[4], "at": iso(r[5]),
                      "message": r[6]} for r in rewrites], "rewrite_count": rewrite_count,
        "recoverable": [dict(c, dropped_at=iso(c["dropped_at"]), committed_at=iso(c["committed_at"]))
                        for c in lost["commits"][:SUMMARY_CAP]],
        "recoverable_count": len(lost["commits"]), "errors": lost["errors"],
    }
