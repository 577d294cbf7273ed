"""The dashboard's audit page, as data: recent entries with filters, repo names put back on fingerprints the
index can match, the log's state (ok, degraded, off) and the chain's last background verification."""

from __future__ import annotations

from typing import Any

from fleet import audit
from fleet.audit.monitor import chain_status
from fleet.audit.read import newest
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.index.target import resolve_target

FILTERS = ("agent", "repo", "event", "result")
PAGE_ENTRIES = 100


def audit_view(index: Index, filters: dict[str, str | None], limit: int = PAGE_ENTRIES) -> dict[str, Any]:
    """Up to `limit` newest entries matching `filters` (agent: declared name; repo: fleet name or path)."""
    log = audit.setup(index.path)
    chosen = {k: (filters.get(k) or "").strip()[:200] or None for k in FILTERS}
    view: dict[str, Any] = {"filters": chosen, "entries": [], "truncated": False, "omitted_count": 0,
                            "log": log.status(), "chain": chain_status(), "error": None}
    if not log.enabled:
        return view
    repo = None
    if chosen["repo"]:
        try:
            repo = log.fingerprint("repo", resolve_target(index, chosen["repo"]).path)
        except FleetError as exc:
            return dict(view, error=exc.message)
    entries, omitted = newest(log.dir, limit, agent=chosen["agent"], repo=repo, event=chosen["event"],
                              result=chosen["result"])
    names = {log.fingerprint("repo", r["path"]): (r["id"], r["name"]) for r in index.summaries()}
    view["entries"] = [{**e, "agent_name": (e.get("agent") or {}).get("name"),
                        "repo_ref": names.get(e.get("repo"))} for e in entries]
    view.update(truncated=omitted > 0, omitted_count=omitted)
    return view


def proposal_trail(index: Index, proposal_id: str, limit: int = PAGE_ENTRIES) -> dict[str, Any]:
    """One proposal's own entries, oldest first: its states, who decided, what ran (the proposal page)."""
    log = audit.setup(index.path)
    if not log.enabled:
        return {"enabled": False, "entries": [], "truncated": False, "omitted_count": 0}
    entries, omitted = newest(log.dir, limit, proposal_id=proposal_id)
    return {"enabled": True, "entries": entries[::-1], "truncated": omitted > 0, "omitted_count": omitted}


def audit_banner() -> dict[str, Any] | None:
    """What every page says about the audit log when it is not simply on: off, or degraded (and since when)."""
    state = audit.status()
    return state if state["state"] in ("off", "degraded") else None
