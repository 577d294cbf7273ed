"""Merge sightings into one presence row per (agent, repo) and decide its state.

States (FluxGit's model): `working` — positive evidence of work (a busy status, a freshly started child
process, a running tool) or activity within `thresholds.working` whose turn is not known to be finished;
`open` — an agent process is alive in the repo but quiet; `recent` — something touched the repo within
`thresholds.recent`. Anything older is gone (no row). Editor-only sightings (`ide`) never make `working`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from fleet.presence.model import DEFAULT_THRESHOLDS, MAX_FILES, Sighting, Thresholds
from fleet.repo.record import iso

STATE_ORDER = {"working": 0, "open": 1, "recent": 2}


def state_of(sightings: list[Sighting], now: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> str | None:
    if any(s.busy for s in sightings):
        return "working"
    fresh = [s for s in sightings if s.last_activity is not None and s.source != "ide"
             and now - s.last_activity <= thresholds.working]
    active = [s.last_activity for s in fresh if not s.idle]
    finished = [s.last_activity for s in fresh if s.idle]
    if active and (not finished or max(active) > max(finished)):
        return "working"
    if any(s.alive for s in sightings):
        return "open"
    newest = max((s.last_activity for s in sightings if s.last_activity is not None), default=None)
    if newest is not None and now - newest <= thresholds.recent:
        return "recent"
    return None


def _row(agent: str, repo: str, sightings: list[Sighting], state: str) -> dict:
    by_time = sorted(sightings, key=lambda s: s.last_activity or 0.0, reverse=True)
    files: list[str] = []
    for s in by_time:
        files += [f for f in s.files if f not in files]
    pids = sorted({s.pid for s in sightings if s.alive and s.pid is not None})
    newest = max((s.last_activity for s in sightings if s.last_activity is not None), default=None)
    return {
        "agent": agent,
        "repo": repo,
        "state": state,
        "sources": sorted({s.source for s in sightings}),
        "branch": next((s.branch for s in by_time if s.branch), None),
        "tool": next((s.tool for s in by_time if s.tool), None),
        "files": files[:MAX_FILES],
        "pid": pids[0] if pids else None,
        "pids": pids,
        "last_activity": iso(newest),
        "_ts": newest,
    }


def merge(sightings: Iterable[Sighting], now: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[dict]:
    """Presence rows, working first, then open, then recent; newest first within a state."""
    groups: dict[tuple[str, str], list[Sighting]] = defaultdict(list)
    for sighting in sightings:
        groups[(sighting.agent, sighting.repo)].append(sighting)
    rows = []
    for (agent, repo), group in groups.items():
        state = state_of(group, now, thresholds)
        if state is not None:
            rows.append(_row(agent, repo, group, state))
    rows.sort(key=lambda r: (STATE_ORDER[r["state"]], -(r["_ts"] or 0.0), r["agent"], r["repo"]))
    for row in rows:
        del row["_ts"]
    return rows
