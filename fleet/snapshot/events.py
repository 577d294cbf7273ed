"""Discarded work as the rest of fleetdeck sees it: an event of kind `discarded` in the index (so the digest,
`fleetdeck lost` and the agents' `fleet.lost` / `repo.lost` list it; fleet/snapshot/attention.py raises the
repo on the attention queue for a day).

The event's `old_sha` is the snapshot that gives the work back, `new_sha` the snapshot that found it gone,
`identity` the agents present, `message` the person's summary (and the command when a hook saw it).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TypedDict

from fleet.index.events import add_seen_event, events_of_kind
from fleet.index.store import Index, open_index
from fleet.timespec import iso

KIND = "discarded"
REF = "(working tree)"


class DiscardedWork(TypedDict):
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


def summary(lost: dict, at: float) -> str:
    files = f"{lost['count']} file{'s' if lost['count'] != 1 else ''}" if lost["count"] else ""
    stashes = len(lost.get("stashes_dropped") or [])
    parts = [p for p in (files, f"{lost['lines']} lines" if lost["lines"] else "",
                         f"{stashes} stash{'es' if stashes != 1 else ''} dropped" if stashes else "") if p]
    when = datetime.fromtimestamp(at, tz=timezone.utc).strftime("%H:%M UTC")
    who = f" while {', '.join(lost['agents'])} {'was' if len(lost['agents']) == 1 else 'were'} working" \
        if lost.get("agents") else ""
    return f"Uncommitted work discarded: {', '.join(parts) or 'content'} at {when}{who}"


def record(db_path: str | os.PathLike[str], worktree: str, meta: dict, restore_from: str) -> None:
    """Store the discarded event of snapshot `meta` (taken of `worktree`) in the index, when there is one."""
    if not Path(db_path).exists():
        return
    lost = meta["discarded"]
    details = {"files": lost["files"], "count": lost["count"], "lines": lost["lines"], "bytes": lost["bytes"],
               "stashes_dropped": lost["stashes_dropped"], "command": lost.get("command"),
               "summary": summary(lost, meta["t"]), "worktree": worktree}
    with open_index(db_path) as index:
        state = index.state_of(worktree)
        if state is None:
            return
        add_seen_event(index, state[0], REF, KIND, int(meta["t"]), restore_from, meta["id"],
                       ", ".join(lost["agents"]) or None, json.dumps(details, sort_keys=True))


def details(message: str | None) -> dict:
    """The details a discarded event's message carries (an empty dict for a message of another shape)."""
    try:
        value = json.loads(message or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def discarded_in_fleet(index: Index, since: float | None = None, repo_ids: list[int] | None = None) -> list[DiscardedWork]:
    """Every discarded event, newest first: repo, when, what, who, and the restore command."""
    out = []
    for name, path, at, restore_from, snapshot, agents, message in events_of_kind(index, KIND, since, repo_ids):
        info = details(message)
        out.append({"repo": name, "path": path, "at": iso(at), "restore_from": restore_from, "snapshot": snapshot,
                    "agents": agents.split(", ") if agents else [], "files": info.get("files", []),
                    "count": info.get("count", 0), "lines": info.get("lines", 0), "bytes": info.get("bytes", 0),
                    "stashes_dropped": info.get("stashes_dropped", []), "command": info.get("command"),
                    "summary": info.get("summary", "Uncommitted work discarded"),
                    "restore": f"fleetdeck restore {name} {restore_from[:12]}"})
    return out
