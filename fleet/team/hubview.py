"""The hub's pages as data: each machine's answer from the same view code as its own dashboard's (over
`fleet.team.hubread.HubMachine`), merged across machines with `machine` on every record, and each machine's
freshness, so an offline machine's rows are never mistaken for live ones.

A machine is `live` while its pushes keep coming (the pusher pushes at least every minute: `PUSH_HEARTBEAT_S`),
`offline` when the last one is older than OFFLINE_AFTER_S, `never` before its first push and `left` after
`team leave`. What needs the machine itself (git's commit history, working-tree files, a decision) is said to
live there.
"""

from __future__ import annotations

import heapq
import time
from itertools import islice
from datetime import date
from typing import Any, Mapping

from fleet.attention import SCORES
from fleet.caps import check_int
from fleet.errors import FleetError
from fleet.index.search import checked
from fleet.presence import collisions, presence
from fleet.ops.proposals import decode
from fleet.team.decisions import seen_digest
from fleet.team.hubread import Hub, HubMachine
from fleet.snapshot.attention import RAISED_FOR_S
from fleet.team.push import HEARTBEAT_S
from fleet.team.rows import digest as row_digest
from fleet.team.verify import verify_hub
from fleet.timespec import iso, parse_since
from fleet.views.detail import timeline
from fleet.index.events import KINDS
from fleet.views.digest import BULK_KINDS, CHART_MAX_DAYS, MAX_EVENTS_LIMIT, SUMMARY_CAP, chart_rows, digest, report
from fleet.views.queue import REASON_SOURCES, QueueFilter, queue_page, summarize
from fleet.views.radar import radar
from fleet.views.ranking import sort_key

OFFLINE_AFTER_S = 3 * HEARTBEAT_S
NOT_ON_THE_HUB = ("commit history and working-tree files are read from git on {machine} itself: the hub holds "
                  "the index's rows (open {machine}'s own dashboard for them)")


def freshness(hub: Hub, now: float | None = None) -> list[dict]:
    """Every machine with `state` (live, offline, never, left) and the age of its last push, in words too."""
    out = []
    for row in hub.machines():
        age = row["age_s"]
        state = ("left" if row["left_at"] else "never" if age is None
                 else "offline" if age > OFFLINE_AFTER_S else "live")
        out.append({**row, "state": state, "last_push": "never" if age is None else ago(age)})
    return out


def ago(seconds: float) -> str:
    """`3 days ago`, `40 s ago`: how old a machine's last push is, in the words a person reads."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return f"{int(seconds)} s ago"


def chosen(hub: Hub, machine: str | None) -> list[tuple[dict, HubMachine]]:
    """(freshness row, reader) of every machine, or of the one named (unknown: NOT_FOUND)."""
    rows = [(row, hub.machine(row)) for row in freshness(hub)]
    if machine:
        rows = [r for r in rows if r[0]["name"] == machine]
        if not rows:
            raise FleetError("NOT_FOUND", f"no machine {machine!r} on this hub")
    return rows


def _tagged(items: list[dict], machine: str) -> list[dict]:
    return [{**item, "machine": machine} for item in items]


def queue(hub: Hub, params: Mapping[str, str]) -> dict:
    """The attention queue across machines (or the one `params["machine"]` names), ranked as one fleet:
    `attention_queue`'s answer with `machine` on every entry, `machines` (each one's freshness) and the filter.

    Each machine's rows are read with a few statements for all machines (`Hub.seen`); its ranked entries, the
    merged ranking and its tallies are kept while no machine's change counter or extra reasons moved."""
    f = QueueFilter.from_params(dict(params))
    machines = freshness(hub)
    wanted = params.get("machine", "")
    if wanted and wanted not in {m["name"] for m in machines}:
        raise FleetError("NOT_FOUND", f"no machine {wanted!r} on this hub")
    readers = hub.seen([m for m in machines if not wanted or m["name"] == wanted], time.time() - RAISED_FOR_S - 60)
    parts = [_ranked(hub, m) for m in readers]
    merged = _merged(hub, parts)
    rows = [r for m in readers for r in _tagged(presence(m), m.name)]
    by_repo: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        by_repo.setdefault((r["machine"], r["repo"]), []).append({"agent": r["agent"], "state": r["state"]})
    page = queue_page(merged["entries"], f, rows, merged["roots"],
                      lambda e: by_repo.get((e["machine"], e["path"]), []), merged["summary"])
    page["filter"] = {**page["filter"], **({"machine": wanted} if wanted else {})}
    return {**page, "machines": machines}


def _ranked(hub: Hub, m: HubMachine) -> tuple[tuple, list[tuple[tuple, dict]], tuple[dict, list[str]]]:
    """(key, [(sort key, entry)], its tallies) of one machine's ranked queue tagged with its name, kept while
    the key holds: its index file, change counter and the rows of its extra reasons (agents, pending
    proposals, discarded work)."""
    seen = m.seen
    key = (m.path, m.instance, seen.generation if seen else m.generation(),
           row_digest([seen.presence, seen.pending, seen.discarded]) if seen else None)
    with hub.memo_lock:
        kept = hub.memo.get(("ranked", m.path))
    if kept is not None and kept[0] == key:
        return kept
    entries = _tagged(radar(m, include_clean=True, extra_sources=REASON_SOURCES), m.name)
    made = (key, [((*sort_key(e), e["machine"]), e) for e in entries], summarize(entries))
    with hub.memo_lock:
        hub.memo[("ranked", m.path)] = made
    return made


def _merged(hub: Hub, parts: list[tuple[tuple, list[tuple[tuple, dict]], tuple[dict, list[str]]]]) -> dict:
    """The machines' entries as one ranking (each machine's is sorted already: one merge of sorted runs), the
    tallies summed and the roots (kept for the same machines' keys)."""
    key = tuple(k for k, _, _ in parts)
    with hub.memo_lock:
        kept = hub.memo.get("merged")
    if kept is not None and kept["key"] == key:
        return kept
    pairs = [pair for _, part, _ in parts for pair in part]
    pairs.sort(key=lambda pair: pair[0])
    entries = [entry for _, entry in pairs]
    tally: dict[str, int] = {}
    for _, _, (counted, _codes) in parts:
        for name, n in counted.items():
            tally[name] = tally.get(name, 0) + n
    codes = sorted({c for _, _, (_, found) in parts for c in found}, key=lambda c: -SCORES[c])
    made = {"key": key, "entries": entries, "summary": (tally or summarize([])[0], codes),
            "roots": sorted({e["root"] for e in entries if e.get("root")})}
    with hub.memo_lock:
        hub.memo["merged"] = made
    return made


def repo_page(hub: Hub, machine: str, repo_id: int) -> dict | None:
    """One machine's repo as the hub holds it (None: no such repo), shaped as the repo page's data."""
    (row, m), = chosen(hub, machine)
    record = m.repo(repo_id)
    if record is None:
        return None
    agents = [a for a in presence(m) if a["repo"] == record["path"]]
    return {"repo": {**record, "machine": machine}, "reasons": record.get("reasons") or [], "commits": [],
            "more_commits": 0, "timeline": timeline(m, record["id"]), "agents": agents,
            "history_error": NOT_ON_THE_HUB.format(machine=machine), "files": None,
            "history": {"complete": True, "read": 0, "total": 0}, "machine": row}


def _merge_digests(parts: list[tuple[str, dict]], max_events: int) -> dict:
    """One digest from each machine's: events newest first (at most `max_events`), counts summed."""
    newest = heapq.nlargest(max_events, ((e, name) for name, d in parts for e in d["events"]),
                            key=lambda pair: (pair[0]["at"], pair[1]))   # = sorted(…, reverse=True)[:max_events]
    total = sum(d["event_count"] for _, d in parts)
    shown = [{**e, "machine": name} for e, name in newest]       # only the shown ones tagged
    return {"since": parts[0][1]["since"] if parts else None, "events": shown, "event_count": total,
            "truncated": total > len(shown), "omitted_count": total - len(shown),
            "repos_scanned": sum(d["repos_scanned"] for _, d in parts),
            "errors": [e for name, d in parts for e in _tagged(d["errors"], name)],
            "gone_repos": sorted({g for _, d in parts for g in d["gone_repos"]}),
            "history": {"complete": True, "read": 0, "total": 0}}


def _scoped(m: HubMachine, repos: list[str] | None) -> tuple[list[str], list[int]] | None | bool:
    """The repos of `repos` this machine holds, by name and id (None: all; False: none of them, skip it)."""
    if repos is None:
        return None
    mine = [(r, m.repo_id(r, r.rstrip("/") or r)) for r in repos]
    mine = [(r, rid) for r, rid in mine if rid is not None]
    return ([r for r, _ in mine], [rid for _, rid in mine]) if mine else False


def _each(hub: Hub, machine: str | None, repos: list[str] | None, ahead: list = ()):
    """(machine name, reader, its repos) of the machines a digest covers, their digest queries asked once for all
    of them (`Hub.in_one_pass`, those of `ahead` started at once side by side); a repo no machine holds is an
    error."""
    found = []
    held: set[str] = set()
    for row, m in chosen(hub, machine):
        scope = _scoped(m, repos)
        if scope is not False:
            found.append((row, scope))
            held.update(scope[0] if scope else ())
    missing = sorted(set(repos or ()) - held)
    if missing:
        raise FleetError("REPO_NOT_IN_FLEET", f"not a repository on any machine of the hub: {missing[0]}")
    readers = hub.in_one_pass([(row, scope and scope[1]) for row, scope in found], ahead)
    return [(row["name"], m, scope and scope[0]) for (row, scope), m in zip(found, readers)]


def _asked(start: float, kinds: list[str] | None, max_events: int, whole: bool, scoped: bool) -> list:
    """What each machine's `digest` (`whole`: its `report`) over the window from `start` will ask its source:
    asked ahead for all machines at once (`DigestPass.ask_ahead`), heaviest first. A guess that misses (a view
    asking otherwise) costs its statement only: the view asks its own. Nothing for arguments the view refuses."""
    if not 1 <= max_events <= MAX_EVENTS_LIMIT or (kinds is not None and not set(kinds) <= set(KINDS)):
        return []
    listed = list(kinds) if kinds is not None else [k for k in KINDS if k not in BULK_KINDS] if whole else None
    asks = [lambda p: p.newest(start, listed, max_events), lambda p: p.event_count(start, listed),
            lambda p: p.window_names(start), lambda p: p.repos()]
    if scoped:
        asks.append(lambda p: p.scanned(None))
    if whole:
        asks.append(lambda p: p.unpushed(SUMMARY_CAP))
        if time.time() - start <= CHART_MAX_DAYS * 86400:      # the chart starts with the window
            asks.append(lambda p: p.window_times(start, listed))
        if kinds is None:
            asks.append(lambda p: p.groups(start, list(BULK_KINDS)))
        asks += [lambda p: p.dirty(SUMMARY_CAP), lambda p: p.rewrites(start, SUMMARY_CAP), lambda p: p.lost(start)]
    return asks


def hub_digest(hub: Hub, since: str | int | float, repos: list[str] | None = None, kinds: list[str] | None = None,
               max_events: int = 200, machine: str | None = None) -> dict:
    """`fleet.views.digest.digest` across machines (the `/api/digest` and `digest --team --format json` answer),
    over one window for every machine (`since` read once)."""
    check_int(max_events, "max_events", 1, MAX_EVENTS_LIMIT)
    start = parse_since(since)
    ahead = _asked(parse_since(start * 1000), kinds, max_events, False, repos is not None)
    parts = [(name, digest(m, start * 1000, repos=scope, kinds=kinds, max_events=max_events))
             for name, m, scope in _each(hub, machine, repos, ahead)]
    return {**_merge_digests(parts, max_events), "since": iso(start)}


def hub_report(hub: Hub, since: str | int | float, repos: list[str] | None = None, kinds: list[str] | None = None,
               max_events: int = 200, machine: str | None = None) -> dict:
    """`fleet.views.digest.report` across machines: the digest merged, the chart and the fleet's state with each
    repository named `machine: repo` (two machines may hold repos of one name). One window for every machine
    (`since` read once, in unix milliseconds to each machine's report), so their queries are asked in one pass."""
    start = parse_since(since)
    ahead = _asked(parse_since(start * 1000), kinds, max_events, True, repos is not None)
    parts: list[tuple[str, dict]] = []
    days: list[str] | None = None
    per_repo: dict[str, dict[date, int]] = {}
    for name, m, scope in _each(hub, machine, repos, ahead):
        part = report(m, start * 1000, repos=scope, kinds=kinds, max_events=max_events)
        activity = part.pop("activity")   # counted into the chart now, its rows let go (not kept for 100 machines)
        days = activity["days"] if days is None else days
        _count_days(per_repo, name, activity)
        parts.append((name, part))
    body = {**_merge_digests([(n, p["digest"]) for n, p in parts], max_events), "since": iso(start)}
    for e in body["events"]:
        e["repo"] = f"{e['machine']}: {e['repo']}"
    body["gone_repos"] = sorted(f"{n}: {g}" for n, p in parts for g in p["digest"]["gone_repos"])
    return {"generated_at": parts[0][1]["generated_at"] if parts else None, "digest": body,
            "activity": _chart(per_repo, days or []), "bulk": _merged_bulk(parts), "fleet": _merged_state(parts)}


def _count_days(per_repo: dict[str, dict[date, int]], name: str, activity: dict) -> None:
    """A machine's chart rows (already counted per local day) as {`machine: repo`: {day: events}}."""
    own = [date.fromisoformat(d) for d in activity["days"]]
    for row in activity["rows"]:
        counts = {day: n for day, n in zip(own, row["counts"]) if n}
        if counts:
            per_repo[f"{name}: {row['repo']}"] = counts


def _chart(per_repo: dict[str, dict[date, int]], days: list[str]) -> dict:
    """The activity chart over the first machine's days from every machine's counts, ranked again as one chart."""
    if not days:
        return {"days": [], "rows": [], "max": 0}
    return chart_rows(per_repo, [date.fromisoformat(d) for d in days])


def _named(items: list[dict], machine: str) -> list[dict]:
    return [{**item, "machine": machine, "repo": f"{machine}: {item['repo']}"} for item in items]


def _merged_bulk(parts: list[tuple[str, dict]]) -> dict:
    groups = sorted((g for n, p in parts for g in _named(p["bulk"]["groups"], n)),
                    key=lambda g: (-g["count"], g["last_at"]))
    total = sum(g["count"] for g in groups)
    kinds = "/".join(sorted({g["kind"] for g in groups}))
    summary = (f"{total} {kinds} event{'s' if total != 1 else ''} in {len(groups)} "
               f"repositor{'ies' if len(groups) != 1 else 'y'} (grouped per repository)") if groups else ""
    return {"groups": groups, "event_count": total, "summary": summary}


def _merged_state(parts: list[tuple[str, dict]]) -> dict:
    out: dict[str, Any] = {}
    for key, count in (("unpushed", "unpushed_count"), ("dirty", "dirty_count"),
                       ("stale_stashes", "stale_stash_count"), ("rewrites", "rewrite_count"),
                       ("recoverable", "recoverable_count")):
        out[key] = list(islice((i for n, p in parts for i in _named(p["fleet"][key], n)), SUMMARY_CAP))
        out[count] = sum(p["fleet"][count] for _, p in parts)
    out["errors"] = [e for n, p in parts for e in _tagged(p["fleet"]["errors"], n)]
    return out


def agents(hub: Hub, machine: str | None = None) -> dict:
    """Agents present on every machine (or one), with the collisions each machine sees among its own."""
    rows, clashes = [], []
    for row, m in chosen(hub, machine):
        mine = presence(m)
        rows += _tagged(mine, row["name"])
        clashes += _tagged(collisions(mine), row["name"])
    return {"agents": rows, "collisions": clashes, "machines": freshness(hub)}


def proposals(hub: Hub, machine: str | None = None, limit: int = 300) -> dict:
    """The proposals the machines mirrored (preview and fingerprint, never the arguments), newest first."""
    names = [row["name"] for row, _ in chosen(hub, machine)]
    found = hub.proposals(names, limit + 1)
    rows = [{**row, "machine": name} for name, row in found[:limit]]
    now = time.time()
    return {"pending": [r for r in rows if r["status"] == "pending" and r["expires_at"] > now],
            "others": [r for r in rows if not (r["status"] == "pending" and r["expires_at"] > now)],
            "truncated": len(found) > limit, "machines": freshness(hub)}


def proposal(hub: Hub, machine: str, proposal_id: str) -> dict | None:
    """One machine's mirrored proposal as its hub page shows it (None: the machine pushed none): the row decoded
    as every surface shows a proposal, whether it can still be decided (pending and not expired), the digest a
    decision made from the page names (`seen`), and each decision made on the hub with its state."""
    (row, _m), = chosen(hub, machine)
    mirrored = hub.proposal(machine, proposal_id)
    if mirrored is None:
        return None
    shown = {**decode(mirrored), "machine": machine, "interrupted": False,   # its executor is that machine's
             "repo_label": mirrored.get("repo_name") or mirrored.get("repo")}
    open_ = mirrored.get("status") == "pending" and float(mirrored.get("expires_at") or 0) > time.time()
    return {"proposal": shown, "decidable": open_, "seen": seen_digest(mirrored), "machine": row,
            "decisions": [{**d, "state": "waiting" if d["outcome"] is None else d["outcome"]}
                          for d in hub.decisions(machine, proposal_id)]}


def audit(hub: Hub, machine: str, limit: int = 100) -> dict:
    """One machine's audit entries as the hub holds them, newest first, and the chain's check on the hub."""
    (row, _m), = chosen(hub, machine)
    found = hub.audit(machine, limit + 1)
    return {"machine": row, "entries": [{**entry, "machine": machine} for entry in found[:limit]],
            "truncated": len(found) > limit, "chain": verify_hub(hub.conns.dsn, machine, {}).as_dict()}


def search(hub: Hub, query: str, *, kinds: list[str] | None = None, repos: list[str] | None = None,
           limit: int = 50, machine: str | None = None) -> dict:
    """`fleet.index.search.search` across machines: branches first (by name), then commits and other reflog
    events newest first, each with `machine`; what the hub searched is said (no recent history: git's)."""
    wanted = checked(query, kinds, limit)
    branches: list[dict] = []
    commits: list[dict] = []
    others: list[dict] = []
    total = 0
    for name, m, scope in _each(hub, machine, repos):
        ids = None if scope is None else [m.repo_id(r, r.rstrip("/") or r) for r in scope]
        names = m.repo_names()
        for kind, bucket in (("branch", branches), ("commit", commits), ("reflog", others)):
            if kind in wanted:
                found, count = (m.search.branches(query, ids, limit) if kind == "branch"
                                else m.search.events(query, kind == "commit", ids, limit))
                total += count
                for match in found:
                    match["repo"], match["path"] = names.get(match.pop("repo_id"), (None, None))
                bucket += _tagged(found, name)
    branches.sort(key=lambda b: (b["name"], b["machine"]))
    newest = sorted(commits, key=lambda c: c["at"] or "", reverse=True) + \
        sorted(others, key=lambda c: c["at"] or "", reverse=True)
    matches = (branches + newest)[:limit]
    return {"query": query, "matches": matches, "match_count": total, "truncated": total > len(matches),
            "omitted_count": total - len(matches),
            "searched": {"kinds": wanted, "branches": "local branch names of every repository the machines pushed",
                         "reflog": "the reflog lines each machine pushed as events (kept after git expires them)",
                         "history": None}}
