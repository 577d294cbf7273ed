"""Jinja filters: presentation only (relative times, short shas, severity classes, query strings)."""

from __future__ import annotations

import time
from datetime import datetime
from urllib.parse import urlencode

import jinja2

from fleet.repo.record import iso
from fleet.views.report import one_line

SEVERITY = {
    "conflict": "critical", "broken": "critical", "predicted_conflict": "high", "agent_collision": "high",
    "diverged": "high", "operation": "op", "local_changes": "medium",
    "behind": "info", "ahead": "info", "stale_stash": "low", "worktree": "low", "submodule": "low",
    "no_upstream": "low", "clean": "ok",
}
LABELS = {
    "conflict": "conflict", "broken": "broken", "predicted_conflict": "will conflict",
    "agent_collision": "agent collision", "diverged": "diverged", "operation": "in progress",
    "local_changes": "uncommitted", "behind": "behind", "ahead": "unpushed",
    "stale_stash": "old stash", "worktree": "worktree", "submodule": "submodule", "no_upstream": "no upstream",
    "clean": "clean",
}


def ago(stamp: str | float | None, now: float | None = None) -> str:
    """'3 min ago' for an ISO time or unix seconds; '—' when unknown."""
    if stamp is None or stamp == "":
        return "—"
    if isinstance(stamp, str):
        try:
            seconds = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return stamp
    else:
        seconds = float(stamp)
    delta = max(0, int((now or time.time()) - seconds))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if delta >= size:
            return f"{delta // size} {unit} ago"
    return "just now" if delta < 5 else f"{delta} s ago"


def short(sha: str | None) -> str:
    return sha[:8] if sha else "—"


def num(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def query(params: dict[str, str], **changes: object) -> str:
    """`?a=1&page=2`: the current filters with some values changed (None drops a key)."""
    merged = {**params, **{k: str(v) for k, v in changes.items() if v is not None}}
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
    return "?" + urlencode(merged) if merged else "?"


def install(env: jinja2.Environment) -> None:
    env.filters.update(ago=ago, short=short, num=num, iso=iso, one_line=one_line)
    env.globals.update(query=query, severity=SEVERITY, labels=LABELS)
