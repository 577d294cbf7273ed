"""Which coding agents are working where: fleet-wide, or in one repository (fleet.presence).

The caller's own record is found by its MCP session (the session key the bridge recorded it under, or on
stdio the client process above fleetdeck), never by its name: a second session of the same agent in the
same repo is another agent at work, which is the collision this tool exists to show.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fleet.caps import cap
from fleet.presence import agent_id, collisions, presence, refresh_presence
from fleet.presence.bridge import mcp_sessions
from fleet.presence.switches import presence_switches
from mcp_bridge import models
from fleet.agents.identity import is_authenticated
from mcp_bridge.bridge import caller, caller_session, identity
from mcp_bridge.toolkit import Toolkit
from mcp_bridge.tools_repo import Repo

MAX_CLIENTS = 8


def mark_caller(rows: list[dict], sessions: list[dict], me: dict, my_agent: str | None) -> list[dict]:
    """Each row with `you` (the caller's own session or client process is in it), `other_sessions` (how many
    other sessions or agent processes it holds) and `mcp_clients` (its MCP sessions, versions and times)."""
    my_pids = set(me.get("pids") or [])
    my_key = f"s:{me.get('session')}"
    view = []
    rowed = {(r["agent"], r["repo"], r.get("session") or "") for r in rows}
    for row in rows:
        session = row.get("session") or ""
        mine = [s for s in sessions if s["agent"] == row["agent"] and s["repo"] == row["repo"] and (
            f"mcp:{s['session']}" == session if session.startswith("mcp:")
            else (row["agent"], row["repo"], f"mcp:{s['session']}") not in rowed)]  # a row of its own, or this one
        # one key per MCP session, plus each agent process no recorded session accounts for
        covered = {s["client_pid"] for s in mine if s["client_pid"]}
        procs = {p for p in row.get("pids") or [] if p not in covered}
        keys = {f"s:{s['session']}" for s in mine} | procs
        own = ({my_key} & keys) | (procs & my_pids)
        clients = [{"version": s["client_version"], "you": f"s:{s['session']}" == my_key, "tool": s["tool"],
                    "last_activity": s["at"]} for s in mine[:MAX_CLIENTS]]
        view.append({**row, "you": bool(own), "other_sessions": len(keys - own), "mcp_clients": clients,
                     "same_agent_as_caller": my_agent is not None and row["agent"] == my_agent})
    return view


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    @kit.tool("agents.presence", models.Presence, "Coding agents at work")
    def agents_presence(
        repo: Annotated[Repo | None, Field(description="one repository (default: the whole fleet)")] = None,
        refresh: Annotated[bool, Field(description="look again now (process table, agents' session "
                                                   "stores) instead of reading the last stored view")] = True,
        limit: Annotated[int, Field(ge=1, le=1000)] = 200,
    ) -> dict:
        """Other coding agents waiting on the person, working, open or recently active in the fleet (or one
        repo), one row per session: agent, state (`waiting` with `waiting_since` and `waiting_kind`
        permission|question|idle, from the agents' own hooks), branch, last tool, repo-relative files, MCP
        client versions; plus collisions (two agents in one repo
        or on the same files). Your own row says `you` (found by your MCP session, not your name: another
        session of the same agent is someone else, counted in `other_sessions`). `switches` says which
        evidence the settings turned off. Never prompts, messages or file contents."""
        index = bridge.index()
        switches = presence_switches()
        path = bridge.resolve(repo).path if repo is not None else None
        rows = refresh_presence(index) if refresh else presence(index)
        if path is not None:
            rows = [r for r in rows if r["repo"] == path]
        who = identity.get()
        authenticated = who is not None and is_authenticated(who.agent)
        me = who.agent if authenticated else (agent_id(caller.get()) if caller.get() else None)
        sessions = mcp_sessions(index) if switches["record_mcp_clients"] else []
        view = mark_caller(rows, sessions, caller_session.get() or {}, me)
        kept, info = cap(view, limit)
        return {"repo": path, "agents": kept, "agent_count": len(rows), "collisions": collisions(rows),
                "caller": {"client_name": caller.get(), "agent": me,
                           "client_version": (caller_session.get() or {}).get("version"),
                           "identity": who.agent if who else None, "authenticated": authenticated},
                "switches": switches, **info}
