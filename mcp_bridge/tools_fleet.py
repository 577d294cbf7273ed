"""Fleet-wide tools: the same index queries as `fleetdeck repos`, `radar` and the dashboard.

Each answer says how fresh the index behind it is (`freshness`: when it was last written, whether a watcher
keeps it current) and takes `refresh`: up to MAX_REFRESH named repos re-read into the index first.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from fleet.errors import FleetError
from fleet.index.events import KINDS
from fleet.index.freshness import freshness
from fleet.index.search import KINDS as SEARCH_KINDS, search
from fleet.presence import presence
from fleet.views.digest import digest
from fleet.views.queue import radar_view
from fleet.views.repos import STATES, list_repos
from mcp_bridge import models
from mcp_bridge.toolkit import Toolkit

State = Literal[tuple(STATES)]  # type: ignore[valid-type]
SearchKind = Literal[SEARCH_KINDS]  # type: ignore[valid-type]
EventKind = Literal[KINDS]  # type: ignore[valid-type]
Limit = Annotated[int, Field(ge=1, le=1000, description="page size (1..1000)")]
MAX_REFRESH = 10
Refresh = Annotated[list[Annotated[str, Field(min_length=1, max_length=4096)]] | None,
                    Field(max_length=MAX_REFRESH, description=f"fleet names or paths to re-read into the index "
                                                              f"before answering (at most {MAX_REFRESH})")]


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    def fresh(refresh: list[str] | None) -> dict:
        """Re-read the named repos (each one's failure reported, not raised), then say how fresh the index is.

        The scanner (and the libgit2 status it may use) loads only when a call names repos to re-read: a
        connect's first fleet-wide answer stays without it."""
        done = []
        if refresh:
            from fleet.index.scan import refresh_repo
        for name in refresh or []:
            try:
                path = bridge.resolve(name).path
                record = refresh_repo(bridge.index(), path)
                done.append({"repo": name, "refreshed": record is not None,
                             "error": None if record is not None else "not in the index yet: run fleetdeck scan"})
            except FleetError as exc:
                done.append({"repo": name, "refreshed": False, "error": exc.message})
        state = freshness(bridge.index())
        watcher = state["watcher"]
        return {"indexed_at": state["indexed_at"], "age_s": state["age_s"], "refreshed": done,
                "watcher": {"state": watcher["state"], "mode": watcher["mode"],
                            "heartbeat_age_s": watcher["heartbeat_age_s"]}}

    @kit.tool("fleet.repos", models.RepoPage, "Repositories in the fleet")
    def fleet_repos(
        root: Annotated[str | None, Field(max_length=4096, description="only repos under this fleet root")] = None,
        name_contains: Annotated[str | None, Field(max_length=512, description="case-insensitive part of the fleet name")] = None,
        state: Annotated[State | None, Field(description="only repos in this state")] = None,
        cursor: Annotated[str | None, Field(max_length=32, description="next_cursor of the previous page")] = None,
        limit: Limit = 200,
        refresh: Refresh = None,
    ) -> dict:
        """List indexed repositories (the fleet's repo records), filtered and paged.

        Records come from the index the watcher keeps fresh; use repo.brief for a live view of one repo.
        """
        fresh_state = fresh(refresh)
        return {**list_repos(bridge.index(), root=root, name_contains=name_contains, state=state, cursor=cursor,
                             limit=limit, include_gone=state == "gone"), "freshness": fresh_state}

    @kit.tool("fleet.radar", models.Radar, "Fleet attention queue")
    def fleet_radar(
        limit: Limit = 200,
        include_clean: Annotated[bool, Field(description="also list repos that need nothing")] = False,
        refresh: Refresh = None,
    ) -> dict:
        """The repositories that need attention, most urgent first, each with its reasons and a next step.

        Start here for the fleet: conflicts, predicted conflicts, diverged branches, operations in progress,
        uncommitted work, unpushed or unpulled commits, stale stashes, worktree and submodule trouble.
        """
        fresh_state = fresh(refresh)
        index = bridge.index()
        return {**radar_view(index, presence(index), include_clean=include_clean, limit=limit),
                "freshness": fresh_state}

    @kit.tool("fleet.search", models.SearchResult, "Search branches, commits and reflogs")
    def fleet_search(
        query: Annotated[str, Field(min_length=1, max_length=200, description="case-insensitive substring")],
        kinds: Annotated[list[SearchKind] | None, Field(max_length=3, description="branch, commit and/or reflog (default all)")] = None,
        repos: Annotated[list[Annotated[str, Field(max_length=4096)]] | None, Field(max_length=500, description="fleet names or paths to search in (default all)")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        refresh: Refresh = None,
    ) -> dict:
        """Find branch names, commit subjects and reflog messages across the whole fleet.

        Searches the index's memory, which keeps reflog events after git expires them, so it also finds
        dropped commits and deleted branches' history; commit subjects also come from the last 90 days of
        every branch (`searched` in the result says exactly what was searched, and how many repositories'
        recent history was not indexed yet).
        """
        fresh_state = fresh(refresh)
        return {**search(bridge.index(), query, kinds=kinds, repos=repos, limit=limit), "freshness": fresh_state}

    @kit.tool("fleet.digest", models.Digest, "What changed across the fleet")
    def fleet_digest(
        since: Annotated[Annotated[str, Field(max_length=100)] | Annotated[int, Field(ge=0, le=2**53)], Field(description="ISO 8601 time, unix milliseconds, or a duration ago: "
                                                      "90m, 24h, 7d")] = "24h",
        repos: Annotated[list[Annotated[str, Field(max_length=4096)]] | None, Field(max_length=500, description="fleet names or paths (default all)")] = None,
        kinds: Annotated[list[EventKind] | None, Field(max_length=len(KINDS))] = None,
        max_events: Annotated[int, Field(ge=1, le=1000)] = 200,
        refresh: Refresh = None,
    ) -> dict:
        """Everything that moved in the fleet since a time, newest first: commits, amends, merges, checkouts,
        pulls, resets, rebases, cherry-picks, reverts, branch and fetch events, each saying whether it
        rewrote history (the old tip is no longer an ancestor of the new one). From the index's reflog
        memory, which outlives git's own reflog expiry."""
        fresh_state = fresh(refresh)
        return {**digest(bridge.index(), since, repos=repos, kinds=kinds, max_events=max_events),
                "freshness": fresh_state}
