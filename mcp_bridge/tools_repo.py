"""Per-repository read tools. Each takes `repo` (a fleet name or an absolute path inside a fleet root),
resolves it with the fleet's scoping rules and calls one `fleet/` function."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fleet.ops.catalog import RepoName
from fleet.repo.brief import MAX_COMMITS, repo_brief
from fleet.repo.parts import stash_list, submodule_status, worktree_list
from mcp_bridge import models
from mcp_bridge.argtypes import pydantic_type
from mcp_bridge.toolkit import Toolkit

Repo = pydantic_type(RepoName)
Limit = Annotated[int, Field(ge=1, le=1000, description="most entries to return (1..1000)")]


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    @kit.tool("repo.brief", models.Brief, "One repository at a glance")
    def brief(repo: Repo,
              recent_commits: Annotated[int, Field(ge=0, le=MAX_COMMITS, description="recent commits to list")] = 5,
              ) -> dict:
        """Everything to know before working in a repository, in under 2,500 characters of JSON.

        HEAD and upstream, working-tree counts, an operation in progress, stashes, submodules needing
        attention, recent commits and up to three hints naming the tool that explains each. Read live.
        """
        return repo_brief(bridge.resolve(repo), recent_commits)

    @kit.tool("worktree.list", models.WorktreeList, "Worktrees of a repository")
    def worktrees(repo: Repo, limit: Limit = 200) -> dict:
        """Every worktree of the repository (main first): path, HEAD, branch, locked and prunable state."""
        return worktree_list(bridge.resolve(repo), limit)

    @kit.tool("submodule.status", models.SubmoduleStatus, "Submodules of a repository")
    def submodules(repo: Repo, limit: Limit = 200) -> dict:
        """Each submodule's recorded commit, checked-out commit and state (clean, drifted, uninitialized,
        conflict)."""
        return submodule_status(bridge.resolve(repo), limit)

    @kit.tool("stash.list", models.StashList, "Stashes of a repository")
    def stashes(repo: Repo, limit: Limit = 200) -> dict:
        """Stash entries, newest (stash@{0}) first, with commit, message and time."""
        return stash_list(bridge.resolve(repo), limit)
