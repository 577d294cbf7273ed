"""Everything that waits on the person, in one list: pending proposals (oldest first, with the time left),
agents waiting (their own hooks said so), discarded uncommitted work (the safety net), and conflicts or
operations in progress where an agent is present.

Each item is `{kind, repo, agent, since, summary, url, action}` plus `key` (one per item and state: what
notifications are deduplicated by) and a few fields of its kind. A summary holds names only (repo names,
op kinds, agent names, counts): never a diff, a path, an argument or an agent's own words, so the same text
can go to a phone (fleet.notify). `url` is a dashboard path (no host, never a token).
"""

from __future__ import annotations

import time
from datetime import datetime

from fleet.index.events import count_of_kind, newest_of_kind
from fleet.index.store import Index
from fleet.ops import proposals
from fleet.presence.merge import LIVE_STATES
from fleet.presence.store import read_rows
from fleet.snapshot.events import KIND as DISCARDED, discarded_in_fleet
from fleet.timespec import iso
from fleet.words import plural

KINDS = ("proposal", "waiting", "discarded", "conflict")
DISCARDED_WINDOW_S = 24 * 3600.0
WAITING_WORDS = {"permission": "a permission", "question": "an answer", "idle": "its next prompt"}


def _ts(value: str | None) -> float | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None
    except ValueError:
        return None


def _left(seconds: float) -> str:
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
    return f"{max(0, int(seconds // 60))} min"


def _proposal_items(index: Index, names: dict[str, dict], now: float) -> list[dict]:
    rows = proposals.page(index, limit=proposals.PAGE_MAX, status="pending")["proposals"]   # oldest first
    out = []
    for p in rows:
        repo = names.get(p["repo"], {}).get("name") or p["repo"].rstrip("/").rsplit("/", 1)[-1]
        left = (_ts(p["expires_at"]) or now) - now
        out.append({"kind": "proposal", "repo": repo, "agent": p["agent"], "since": p["created_at"],
                    "summary": f"{p['agent']} proposes {p['op']} in {repo} ({p['risk']} risk), "
                               f"{_left(left)} left",
                    "url": f"/proposals/{p['id']}",
                    "action": "approve or reject" if p["risk"] == "low" else "open the proposal",
                    "key": f"proposal:{p['id']}", "id": p["id"], "op": p["op"], "risk": p["risk"],
                    "expires_at": p["expires_at"], "expires_in_s": max(0, int(left))})
    return out


def _waiting_items(rows: list[dict], names: dict[str, dict], now: float) -> list[dict]:
    out = []
    for r in rows:
        if r["state"] != "waiting":
            continue
        record = names.get(r["repo"], {})
        repo = record.get("name") or r.get("repo_name") or r["repo"]
        since = r.get("waiting_since") or r.get("last_activity")
        branch = r.get("branch")
        waited = now - (_ts(since) or now)
        out.append({"kind": "waiting", "repo": repo, "agent": r["agent"], "since": since,
                    "summary": f"{r['agent']} waits for {WAITING_WORDS.get(r.get('waiting_kind'), 'you')} in "
                               f"{repo}{f' ({branch})' if branch else ''} for {_left(waited)}",
                    "url": f"/repos/{record['id']}" if record.get("id") else "/agents",
                    "action": "open the agent's repo", "key": f"waiting:{r['agent']}:{r['repo']}:"
                                                              f"{r.get('session') or ''}:{since}",
                    "waiting_kind": r.get("waiting_kind"), "branch": branch, "session": r.get("session") or ""})
    return out


def _discarded_items(index: Index, names: dict[str, dict], now: float) -> list[dict]:
    by_name = {r["name"]: r for r in names.values()}
    out = []
    for d in discarded_in_fleet(index, since=now - DISCARDED_WINDOW_S):
        record = names.get(d["path"]) or by_name.get(d["repo"], {})
        what = plural(d["count"], "file") if d["count"] else "uncommitted work"
        out.append({"kind": "discarded", "repo": d["repo"], "agent": ", ".join(d["agents"]) or None,
                    "since": d["at"], "summary": f"{what} discarded in {d['repo']}"
                                                 f"{' while ' + ', '.join(d['agents']) + ' worked' if d['agents'] else ''}",
                    "url": f"/repos/{record['id']}" if record.get("id") else "/digest",
                    "action": d["restore"], "key": f"discarded:{d['snapshot']}", "restore": d["restore"]})
    return out


def _conflict_items(rows: list[dict], names: dict[str, dict]) -> list[dict]:
    present: dict[str, list[str]] = {}
    for r in rows:
        if r["state"] in LIVE_STATES:
            present.setdefault(r["repo"], []).append(r["agent"])
    out = []
    for path, agents in sorted(present.items()):
        record = names.get(path)
        if not record or not (record.get("conflicted") or record.get("operation")):
            continue
        what = (f"{plural(record['conflicted'], 'conflicted file')}" if record.get("conflicted") else "") + \
            (f"{' in a ' if record.get('conflicted') else 'a '}{record['operation']} in progress"
             if record.get("operation") else "")
        who = ", ".join(sorted(set(agents)))
        out.append({"kind": "conflict", "repo": record["name"], "agent": who, "since": record.get("scanned_at"),
                    "summary": f"{what} in {record['name']} while {who} {'is' if len(set(agents)) == 1 else 'are'} "
                               "there",
                    "url": f"/repos/{record['id']}", "action": "open the repo and finish or abort it",
                    "key": f"conflict:{path}:{record.get('operation') or ''}:{record.get('conflicted') or 0}",
                    "operation": record.get("operation"), "conflicted": record.get("conflicted") or 0})
    return out


def inbox(index: Index, now: float | None = None) -> dict:
    """`{items, counts}`: proposals oldest first, then agents waiting longest first, discarded work and
    conflicts newest first."""
    now = time.time() if now is None else now
    names = {r["path"]: r for r in index.summaries()}
    rows = read_rows(index)
    waiting = sorted(_waiting_items(rows, names, now), key=lambda i: i["since"] or "")
    items = (_proposal_items(index, names, now) + waiting + _discarded_items(index, names, now)
             + _conflict_items(rows, names))
    counts = {kind: sum(1 for i in items if i["kind"] == kind) for kind in KINDS}
    return {"items": items, "counts": counts, "at": iso(now)}


def counts(index: Index, now: float | None = None) -> dict[str, int]:
    """The inbox's counts by kind without building its items (every page's strip): read-only queries."""
    now = time.time() if now is None else now
    rows = read_rows(index)
    discarded = count_of_kind(index, DISCARDED, int(now - DISCARDED_WINDOW_S))
    names = {r["path"]: r for r in index.summaries()}
    return {"proposal": proposals.change_stamp(index)[0] or 0,
            "waiting": sum(1 for r in rows if r["state"] == "waiting"), "discarded": discarded,
            "conflict": len(_conflict_items(rows, names))}


def counts_stamp(index: Index) -> tuple:
    """A cheap stamp that moves when the inbox may have changed (the event stream polls it)."""
    a = proposals.change_stamp(index)
    return (*a, *index.presence.stamp(), newest_of_kind(index, DISCARDED), index.generation())
