"""The attention queue as a person browses it: filters, search, fleet-wide counts and pages.

`fleet.views.radar.radar()` ranks; this module narrows the ranked list the way the dashboard (and any other
surface) asks, so the page, the JSON API and a script all count the same repos the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from fleet.caps import cap, check_int, parse_int
from fleet.errors import FleetError
from fleet.ops.attention import pending_reasons
from fleet.presence.attention import collision_reasons
from fleet.snapshot.attention import discarded_reasons
from fleet.views.radar import radar
from fleet.attention import SCORES
from fleet.views.records import RadarEntry, RadarView

PER_PAGE = 100
MAX_PER_PAGE = 500
LIVE_AGENT_STATES = ("waiting", "working", "open")


@dataclass(frozen=True)
class QueueFilter:
    """What the person narrowed the queue to. Empty strings mean 'any'."""

    root: str = ""
    reason: str = ""
    agent: str = ""
    q: str = ""
    attention_only: bool = False
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def from_params(cls, params: dict[str, str]) -> "QueueFilter":
        """Build a filter from query-string values, clamping what a hand-edited URL could push out of range."""
        def number(key: str, default: int, high: int) -> int:
            try:
                value = parse_int(params.get(key), key, default, -2**63, 2**63)
            except FleetError:
                return default
            return max(1, min(high, value))

        reason = params.get("reason", "")
        return cls(root=params.get("root", ""), reason=reason if reason in SCORES else "",
                   agent=params.get("agent", ""), q=params.get("q", "").strip()[:200],
                   attention_only=params.get("attention") in ("1", "on", "true"),
                   page=number("page", 1, 1_000_000), per_page=number("per_page", PER_PAGE, MAX_PER_PAGE))

    def as_params(self) -> dict[str, str]:
        """The non-default filter values, to rebuild links (pagination) without losing the person's filters."""
        out = {"root": self.root, "reason": self.reason, "agent": self.agent, "q": self.q,
               "attention": "1" if self.attention_only else ""}
        if self.per_page != PER_PAGE:
            out["per_page"] = str(self.per_page)
        return {k: v for k, v in out.items() if v}


# The reasons that live outside the repo records: agents colliding in a repo, proposals waiting in it.
REASON_SOURCES = (collision_reasons, pending_reasons, discarded_reasons)


def agents_by_repo(presence_rows: list[dict]) -> dict[str, list[dict]]:
    """Presence rows grouped by repo path, each reduced to what the queue shows (agent, state)."""
    out: dict[str, list[dict]] = {}
    for row in presence_rows:
        out.setdefault(row["repo"], []).append({"agent": row["agent"], "state": row["state"]})
    return out


def with_agents(entries: list[dict], by_repo: dict[str, list[dict]]) -> list[RadarEntry]:
    """Copies of radar entries (which are shared, read-only) with the agents present in each repo."""
    return [{**entry, "agents": by_repo.get(entry["path"], [])} for entry in entries]  # type: ignore[misc]


def radar_view(index, presence_rows: list[dict] | None = None, include_clean: bool = False,
               limit: int | None = None) -> RadarView:
    """The queue as `fleetdeck radar --json` and MCP `fleet.radar` return it (records.RadarView).

    `total` counts every repo that qualifies, `entries` holds the first `limit` (all when None).
    """
    if limit is not None:
        check_int(limit, "limit", 1, 1_000_000)
    entries = radar(index, include_clean=include_clean, extra_sources=REASON_SOURCES)
    kept, info = cap(entries, len(entries) if limit is None else limit)
    return {"entries": with_agents(kept, agents_by_repo(presence_rows or [])), "total": len(entries),
            **info}  # type: ignore[typeddict-item]


def counts(entries: list[dict], presence_rows: list[dict]) -> dict[str, int]:
    """Fleet-wide tallies for the queue's header (over every repo, not only the filtered ones)."""
    tally = dict.fromkeys(("attention", "conflicts", "diverged", "dirty", "unpushed", "operations"), 0)
    for e in entries:  # one pass: the queue may hold 10,000 repos
        tally["attention"] += e["status"] != "clean"
        tally["conflicts"] += bool(e["conflicted"])
        tally["diverged"] += bool(e["ahead"] and e["behind"])
        tally["dirty"] += bool(e["dirty"])
        tally["unpushed"] += bool(e["ahead"])
        tally["operations"] += bool(e["operation"])
    return {"repos": len(entries), **tally,
            "agents_working": sum(1 for r in presence_rows if r["state"] == "working")}


def summarize(entries: list[dict]) -> tuple[dict, list[str]]:
    """The queue's header over `entries` (`counts` but for the agents working) and their reasons, most urgent
    first: what a page shows whatever its filter."""
    return counts(entries, []), sorted({r["code"] for e in entries for r in e["reasons"]}, key=lambda c: -SCORES[c])


AgentsOf = Callable[[dict], list[dict]]   # a queue entry -> the agents present in its repo


def agents_of_paths(presence_rows: list[dict]) -> AgentsOf:
    """The agents of an entry by its repo's path (one fleet: a path names one repo)."""
    by_repo = agents_by_repo(presence_rows)
    return lambda entry: by_repo.get(entry["path"], [])


def _matches(entry: dict, f: QueueFilter, agents_of: AgentsOf) -> bool:
    if f.root and entry["root"] != f.root:
        return False
    if f.attention_only and entry["status"] == "clean":
        return False
    if f.reason and not any(r["code"] == f.reason for r in entry["reasons"]):
        return False
    if f.agent and not any(a["agent"] == f.agent for a in agents_of(entry)):
        return False
    if f.q:
        needle = f.q.casefold()
        hay = " ".join(str(entry.get(k) or "") for k in ("name", "path", "branch"))
        hay += " " + " ".join(r["summary"] for r in entry["reasons"])
        if needle not in hay.casefold():
            return False
    return True


def attention_queue(index, f: QueueFilter, presence_rows: list[dict] | None = None) -> dict:
    """One page of the ranked queue after filtering, with the counts and the choices the filters offer.

    Its `entries`, `total`, `truncated` and `omitted_count` read as a records.RadarView (`total` = the
    entries that match the filter, `omitted_count` = those not on this page); the rest drives the page.
    """
    presence_rows = presence_rows or []
    entries = radar(index, include_clean=True, extra_sources=REASON_SOURCES)
    return queue_page(entries, f, presence_rows, index.roots(), agents_of_paths(presence_rows))


def queue_page(entries: list[dict], f: QueueFilter, presence_rows: list[dict], roots: list[str],
               agents_of: AgentsOf, summary: tuple[dict, list[str]] | None = None) -> dict:
    """`attention_queue` over ranked `entries` (one fleet's, or the hub's across machines). `summary`: the
    entries' tallies and reason codes (`summarize`) when the caller kept them from an earlier page."""
    tally, reasons = summary or summarize(entries)
    shown = [e for e in entries if _matches(e, f, agents_of)]
    pages = max(1, math.ceil(len(shown) / f.per_page))
    page = min(f.page, pages)
    start = (page - 1) * f.per_page
    kept: list[RadarEntry] = [{**e, "agents": agents_of(e)}  # type: ignore[misc]
                              for e in shown[start:start + f.per_page]]
    return {
        "entries": kept,
        "total": len(shown),
        "truncated": len(kept) < len(shown),
        "omitted_count": len(shown) - len(kept),
        "matched": len(shown),
        "page": page,
        "pages": pages,
        "per_page": f.per_page,
        "counts": {**tally, "agents_working": sum(1 for r in presence_rows if r["state"] == "working")},
        "roots": roots,
        "reasons": reasons,
        "agents": sorted({r["agent"] for r in presence_rows}),
        "filter": f.as_params(),
    }
