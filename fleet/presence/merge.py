"""Merge sightings into one presence row per (agent, repo, session) and decide its state.

Sessions: the agent's own session ids (its hooks' `session_id`, a session file named by it) make rows of
their own, so two sessions of one agent in one repo are two rows; MCP client sessions are rows only where
no such id is known, and evidence without a session (processes, traces) joins the newest row of its agent
and repo.

States: `waiting` — the agent's own hook said it is blocked on the person (a permission prompt, a
question, its finished turn) and nothing newer says it went on, or, ranked below the hooks, its session file
says so (a tool call that asks, unanswered; a finished turn) while its process lives; `working` — positive
evidence of work (a busy status, a freshly started child process, a running tool) or activity within
`thresholds.working` whose turn is not known to be finished (a hook's `working` is itself evidence: its time
alone proves nothing); `open` — an agent process is alive in the repo but quiet; `recent` — something touched the
repo within `thresholds.recent`. Anything older is gone (no row). Editor-only sightings (`ide`) never make `working`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from fleet.presence.model import DEFAULT_THRESHOLDS, MAX_FILES, Sighting, Thresholds
from fleet.timespec import iso

STATE_ORDER = {"waiting": 0, "working": 1, "open": 2, "recent": 3}
LIVE_STATES = ("waiting", "working", "open")
NEWER_S = 5.0   # other evidence this much newer than a waiting hook means the agent went on


def waiting_of(sightings: list[Sighting]) -> Sighting | None:
    """The sighting that says this session waits on the person: the newest hook's word, unless newer activity
    says the agent went on; then (or without hooks) the session file's, while the agent's process lives."""
    hooks = [s for s in sightings if s.source == "hook"]
    later = [s.last_activity for s in sightings if s.source in ("session", "mcp") and s.last_activity is not None]
    if hooks:
        newest = max(hooks, key=lambda s: s.last_activity or 0.0)
        if not later or max(later) <= (newest.last_activity or 0.0) + NEWER_S:
            return None if newest.ended or not newest.waiting_kind else newest
    return _file_waiting(sightings)


def _file_waiting(sightings: list[Sighting]) -> Sighting | None:
    """The newest session file's wait (fleet/presence/model.py, Activity.sighting), believed only while an
    agent process of this session lives and no command it started is running (a fresh child process)."""
    if not any(s.alive for s in sightings) or any(s.busy for s in sightings if s.source == "process"):
        return None
    files = [s for s in sightings if s.source == "session" and not s.alive and s.last_activity is not None]
    if not files:
        return None
    newest = max(files, key=lambda s: s.last_activity or 0.0)
    mcp = [s.last_activity for s in sightings if s.source == "mcp" and s.last_activity is not None]
    if not newest.waiting_kind or (mcp and max(mcp) > (newest.last_activity or 0.0) + NEWER_S):
        return None
    return newest


def state_of(sightings: list[Sighting], now: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> str | None:
    if waiting_of(sightings) is not None:
        return "waiting"
    hooks = [s for s in sightings if s.source == "hook"]
    if hooks and max(hooks, key=lambda s: s.last_activity or 0.0).ended:
        sightings = [s for s in sightings if not (s.alive or s.busy)]   # the session said it ended
    if any(s.busy for s in sightings):
        return "working"
    fresh = [s for s in sightings if s.last_activity is not None and s.source not in ("ide", "hook")
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


def _row(agent: str, repo: str, session: str, sightings: list[Sighting], state: str) -> dict:
    by_time = sorted(sightings, key=lambda s: s.last_activity or 0.0, reverse=True)
    files: list[str] = []
    for s in by_time:
        files += [f for f in s.files if f not in files]
    pids = sorted({s.pid for s in sightings if s.alive and s.pid is not None})
    newest = max((s.last_activity for s in sightings if s.last_activity is not None), default=None)
    waiting = waiting_of(sightings) if state == "waiting" else None
    return {
        "agent": agent,
        "repo": repo,
        "session": session,
        "state": state,
        "waiting_since": iso(waiting.waiting_since) if waiting else None,
        "waiting_kind": waiting.waiting_kind if waiting else None,
        "sources": sorted({s.source for s in sightings}),
        "branch": next((s.branch for s in by_time if s.branch), None),
        "tool": next((s.tool for s in by_time if s.tool), None),
        "files": files[:MAX_FILES],
        "pid": pids[0] if pids else None,
        "pids": pids,
        "last_activity": iso(newest),
        "_ts": newest,
    }


def _tier(session: str) -> int:
    return 0 if not session else 1 if session.startswith("mcp:") else 2


def _groups(sightings: Iterable[Sighting]) -> dict[tuple[str, str, str], list[Sighting]]:
    """Sightings by (agent, repo, session); those of a lesser kind of session (none, then MCP) join the
    newest group of the best kind their agent and repo have."""
    raw: dict[tuple[str, str, str], list[Sighting]] = defaultdict(list)
    for sighting in sightings:
        raw[(sighting.agent, sighting.repo, sighting.session)].append(sighting)
    best: dict[tuple[str, str], int] = {}
    for agent, repo, session in raw:
        best[(agent, repo)] = max(best.get((agent, repo), 0), _tier(session))
    groups: dict[tuple[str, str, str], list[Sighting]] = {k: v for k, v in raw.items()
                                                          if _tier(k[2]) == best[(k[0], k[1])]}
    newest = {}
    for key, group in groups.items():
        at = max((s.last_activity or 0.0 for s in group), default=0.0)
        if (key[0], key[1]) not in newest or at > newest[(key[0], key[1])][0]:
            newest[(key[0], key[1])] = (at, key)
    for key, group in raw.items():
        if key not in groups:
            groups[newest[(key[0], key[1])][1]].extend(group)
    return groups


def merge(sightings: Iterable[Sighting], now: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[dict]:
    """Presence rows, waiting first, then working, open, recent; newest first within a state."""
    rows = []
    for (agent, repo, session), group in _groups(sightings).items():
        state = state_of(group, now, thresholds)
        if state is not None:
            rows.append(_row(agent, repo, session, group, state))
    rows.sort(key=lambda r: (STATE_ORDER[r["state"]], -(r["_ts"] or 0.0), r["agent"], r["repo"], r["session"]))
    for row in rows:
        del row["_ts"]
    return rows
