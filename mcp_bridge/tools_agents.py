"""Which coding agents are working where: fleet-wide, or in one repository (fleet.presence)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fleet.caps import cap
from fleet.presence import agent_id, collisions, presence, refresh_presence
from mcp_bridge import models
from mcp_bridge.bridge import caller
from mcp_bridge.toolkit import Toolkit
from mcp_bridge.tools_repo import Repo


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    @kit.tool("agents.presence", models.Presence, "Coding agents at work")
    def agents_presence(
        repo: Annotated[Repo | None, Field(description="one repository (default: the whole fleet)")] = None,
        refresh: Annotated[bool, Field(description="look again now (process table, agents' session "
                                                   "stores) instead of reading the last stored view")] = True,
        limit: Annotated[int, Field(ge=1, le=1000)] = 200,
    ) -> dict:
        """Other coding agents working, open or recently active in the fleet (or one repo): agent, state,
        branch, last tool, repo-relative files; plus collisions (two agents in one repo or on the same
        files). Your own rows say `same_agent_as_caller`. Never prompts, messages or file contents."""
        index = bridge.index()
        path = bridge.resolve(repo).path if repo is not None else None
        rows = refresh_presence(index) if refresh else presence(index)
        if path is not None:
            rows = [r for r in rows if r["repo"] == path]
        me = agent_id(caller.get()) if caller.get() else None
        view = [{**r, "same_agent_as_caller": me is not None and r["agent"] == me} for r in rows]
        kept, info = cap(view, limit)
        return {"repo": path, "agents": kept, "agent_count": len(rows), "collisions": collisions(rows),
                "caller": {"client_name": caller.get(), "agent": me}, **info}
