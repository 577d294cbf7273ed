"""Presence the agents report through their own hooks (`fleetdeck hooks install`): per session, whether it
works, waits on the person (a permission prompt, a question, its finished turn) or ended.

Only the agent, the repo, the hook's `session_id`, the state, its kind and times and the tool's name are
kept: never the prompt, a notification's message or a tool's input. A session that leaves `waiting` and
comes back to it within FLAP_S keeps its first `waiting_since`, so a flapping session is one item (one
inbox row, one notification), never two. Waiting survives the recent window (an agent blocked for an hour
still waits) up to WAITING_MAX_S.
"""

from __future__ import annotations

import os
import re
import time

from fleet.presence.bridge import agent_id
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting, Thresholds
from fleet.presence.store import read_agent_rows, upsert_row
from fleet.timespec import iso

FLAP_S = 5.0
WAITING_MAX_S = 12 * 3600.0
KINDS = ("permission", "question", "idle")
# Claude Code's, Copilot CLI's, Cline's (its extension's, its SDK's): running them is asking the person
QUESTION_TOOLS = ("AskUserQuestion", "ask_user", "ask_followup_question", "ask_question")
_SAFE = re.compile(r"[^A-Za-z0-9._:-]")

# (agent, hook event) -> state, or a function of the payload for events whose meaning depends on a field
_NOTIFY = {"permission_prompt": "permission", "idle_prompt": "idle", "elicitation_dialog": "question",
           "ToolPermission": "permission"}


def event_state(agent: str, payload: dict) -> tuple[str, str | None] | None:
    """(state, waiting kind) that a hook event of `agent` means, or None when it says nothing of it."""
    event = payload.get("hook_event_name")
    tool = payload.get("tool_name")
    if event in ("PreToolUse", "BeforeTool"):
        return ("waiting", "question") if tool in QUESTION_TOOLS else ("working", None)
    if event in ("UserPromptSubmit", "BeforeAgent", "PostToolUse", "AfterTool", "TaskStart", "TaskResume"):
        return "working", None
    if event == "PermissionRequest":
        return "waiting", "permission"
    if event == "Notification":
        kind = _NOTIFY.get(str(payload.get("notification_type")))
        return ("waiting", kind) if kind else None
    if event in ("Stop", "AfterAgent", "TaskComplete"):
        return "waiting", "idle"
    if event in ("SessionStart", "TaskCancel", "Aborted"):     # (the person stopped the turn: no wait)
        return "open", None
    if event == "SessionEnd":
        return "ended", None
    return None


def clean_session(value: object) -> str:
    return _SAFE.sub("", value)[:128] if isinstance(value, str) else ""


def record_hook_event(index, agent: str, payload: dict, now: float | None = None) -> dict | None:
    """Record what one hook event says of its session and return the session's presence row (None when the
    event says nothing of presence, or its `cwd` is in no indexed repo). The row is written at once, so the
    dashboard sees the change without waiting for a refresh."""
    found = event_state(agent, payload)
    session = clean_session(payload.get("session_id"))
    cwd = payload.get("cwd")
    who = agent_id(agent)
    if found is None or not session:
        return None
    records = index.summaries()
    repos = RepoMap([r["path"] for r in records])
    if isinstance(cwd, str) and os.path.isabs(cwd):
        repo = repos.find(cwd)
    elif cwd is None:   # an event that names no folder (Goose's, Cursor's, Cline's): the one fleet repo of its
        # workspace roots, else the repo its session's tool events named
        roots = {repos.find(root) for root in payload.get("workspace_roots") or ()} - {None}
        repo = roots.pop() if len(roots) == 1 else index.presence.hook_repo(who, session)
    else:
        repo = None
    if repo is None or not any(r["path"] == repo for r in records):
        return None
    record = next(r for r in records if r["path"] == repo)
    state, kind = found
    now = time.time() if now is None else now
    tool = payload.get("tool_name")
    tool = tool[:64] if isinstance(tool, str) and state != "open" else None
    with index.write():
        old = index.presence.hook(who, repo, session)
        since, left = _times(old, state, kind, now)
        index.presence.put_hook(who, repo, session, state, kind if state == "waiting" else (old[1] if old else None),
                                since, left, tool, now)
        rows = read_agent_rows(index, who, repo)
        row = next((r for r in rows if r["session"] == session), None) or {
            "agent": who, "repo": repo, "session": session, "sources": [], "files": [], "pids": [], "pid": None,
            "branch": None, "tool": None}
        waiting = state == "waiting"
        row.update({
            "repo_id": record.get("id"), "repo_name": record.get("name"),
            "state": "recent" if state == "ended" else state,
            "waiting_since": iso(since) if waiting else None, "waiting_kind": kind if waiting else None,
            "sources": sorted(set(row["sources"]) | {"hook"}), "tool": tool or row.get("tool"),
            "branch": row.get("branch") or record.get("branch"), "last_activity": iso(now), "refreshed_at": iso(now),
        })
        for other in rows:          # the sessionless row this session's evidence now belongs to
            if other["session"] in ("",) or other["session"].startswith("mcp:"):
                index.presence.drop(who, repo, other["session"])
        upsert_row(index, row)
    return row


def _times(old: tuple | None, state: str, kind: str | None, now: float) -> tuple[float | None, float | None]:
    """(waiting_since, left_waiting_at) after a change to `state`: a session waiting for the same thing, or
    back to waiting within FLAP_S of leaving it, keeps its first time."""
    old_state, old_kind, old_since, old_left = old if old else (None, None, None, None)
    if state == "waiting":
        if old_since is not None and old_kind == kind and (
                old_state == "waiting" or (old_left is not None and now - old_left <= FLAP_S)):
            return old_since, None
        return now, None
    if old_state == "waiting":
        return old_since, now
    return old_since, old_left


def sightings(index, repos: list[str], now: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Sighting]:
    """What the hooks recorded, as sightings (a waiting session up to WAITING_MAX_S, the rest within the recent
    window); older records are deleted."""
    rows = index.presence.hooks_sweep(now - WAITING_MAX_S, now - thresholds.recent)
    known = RepoMap.of(repos)
    out = []
    for agent, repo, session, state, kind, since, tool, at in rows:
        if known.find(repo) != repo:
            continue
        waiting = state == "waiting"
        out.append(Sighting(agent=agent, repo=repo, source="hook", last_activity=min(at, now), tool=tool,
                            session=session, busy=state == "working" and now - at <= thresholds.working,
                            alive=state == "open", ended=state == "ended",
                            waiting_kind=kind if waiting else None, waiting_since=since if waiting else None))
    return out
