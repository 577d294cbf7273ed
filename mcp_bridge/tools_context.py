"""Where work stands inside one repository: a branch against its base, upstream and the branches stacked
with it (repo.branch_stack), who works under a path (repo.scope: churn and CODEOWNERS owners), and which
functions and classes a change touched (diff.semantic)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from fleet.repo.ownership import repo_scope
from fleet.repo.semantic import diff_semantic
from fleet.repo.stack import STACK_CAP, branch_stack
from mcp_bridge import models
from mcp_bridge.toolkit import Toolkit
from mcp_bridge.tools_git import Files, Range, RelPath, Rev
from mcp_bridge.tools_repo import Repo


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    @kit.tool("repo.branch_stack", models.BranchStack, "A branch against its base, upstream and stack")
    def stack(repo: Repo,
              branch: Annotated[str | None, Field(min_length=1, max_length=4096,
                                                  description="a local branch (default: the checked-out one)")] = None,
              base: Annotated[Rev | None, Field(description="what to compare with (default: the default branch)")] = None,
              limit: Annotated[int, Field(ge=1, le=500, description="most stacked branches per list")] = STACK_CAP,
              ) -> dict:
        """How far a branch is from its base (default: the default branch, from origin/HEAD, else main or
        master) and from its upstream: ahead/behind and merge base for each, plus the local branches
        stacked above it (they contain its tip and go further) and below it (their tips are in its history
        but not in the base)."""
        return branch_stack(bridge.resolve(repo), branch, base, limit)

    @kit.tool("repo.scope", models.Scope, "Churn and owners under a path")
    def scope(repo: Repo, path: Annotated[RelPath | None, Field(description="a folder or file (default: the "
                                                                           "whole repository)")] = None,
              since: Annotated[Annotated[str, Field(max_length=100)] | Annotated[int, Field(ge=0, le=2**53)],
                               Field(description="window start: 90m, 24h, 30d, ISO 8601 or unix ms")] = "90d",
              max_files: Annotated[int, Field(ge=1, le=200)] = 20,
              max_authors: Annotated[int, Field(ge=1, le=200)] = 20) -> dict:
        """Who works under a path and how much: commits in the window, authors by commit count, the
        most-changed files (each with its owners), and the path's owners from CODEOWNERS (read at HEAD from
        .github/, the root, docs/ or .gitlab/; the last matching pattern wins)."""
        return repo_scope(bridge.resolve(repo).path, path, since, max_files, max_authors)

    @kit.tool("diff.semantic", models.SemanticDiff, "Functions and classes a change touched")
    def semantic(repo: Repo, base: Range, head: Rev | None = None, path_filter: RelPath | None = None,
                 max_files: Files = 200) -> dict:
        """Per changed file from `base` to `head` (default HEAD; `base` may be `a..b` or `a...b`): the
        functions, classes and methods added, removed and changed. Python is parsed with its own `ast`; a
        rename is a removal plus an addition (`same_body_as` names a removed symbol with an identical body).
        Every other file says `supported: false`, why, and the diff.refs arguments for its text diff; the
        answer's `supported` is true only when every file was parsed. Never a guess."""
        return diff_semantic(bridge.resolve(repo), base, head, path_filter, max_files)
