"""Lost work over MCP: the commits a reset, rebase, amend or branch deletion dropped and git still has, for
one repository or the fleet (the same list as `fleetdeck lost`), each with the command that recovers it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fleet.views.recovery import lost_view
from fleet.timespec import parse_since
from fleet.views.digest import resolve_repos
from mcp_bridge import models
from mcp_bridge.toolkit import Toolkit
from mcp_bridge.tools_repo import Repo

Since = Annotated[Annotated[str, Field(max_length=100)] | Annotated[int, Field(ge=0, le=2**53)] | None,
                  Field(description="only drops since: ISO 8601, unix ms or 90m/24h/7d")]
Limit = Annotated[int, Field(ge=1, le=1000, description="most commits to return (1..1000)")]


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    def since_of(since: str | int | None) -> float | None:
        return parse_since(since) if since is not None else None

    @kit.tool("repo.lost", models.Lost, "Recoverable commits of a repository")
    def repo_lost(repo: Repo, since: Since = None, limit: Limit = 200) -> dict:
        """Commits this repository dropped (reset, rebase, amend, a deleted branch, a detached HEAD left
        behind) that no ref reaches any more while git still has them, newest drop first, each with the
        `recover` command that brings it back as a branch. From the index's reflog memory, checked with git
        now; a repo not yet indexed has no memory to search."""
        found = bridge.resolve(repo)
        state = bridge.index().state_of(found.path)
        ids = [state[0]] if state is not None and not state[2] else []
        return lost_view(bridge.index(), ids, since_of(since), limit)

    @kit.tool("fleet.lost", models.Lost, "Recoverable commits across the fleet")
    def fleet_lost(
        repos: Annotated[list[Annotated[str, Field(max_length=4096)]] | None,
                         Field(max_length=500, description="fleet names or paths (default all)")] = None,
        since: Since = None, limit: Limit = 200,
    ) -> dict:
        """Every recoverable commit in the fleet (or the named repos), newest drop first, each with where it
        was dropped, by what, and the `recover` command. Nothing is run."""
        index = bridge.index()
        return lost_view(index, resolve_repos(index, repos), since_of(since), limit)
