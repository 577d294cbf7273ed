"""Per-repository git reads: status, changes, history, reflog, refs, commits, diffs, blame, conflicts.

Every tool is one call into fleet/ (changes, history, diffs, refs, blame, conflicts), which checks each
revision (nothing starting with `-`, ranges side by side) and each path (relative, no `..`, no symlink out).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from fleet.repo.blame import repo_blame
from fleet.repo.changes import repo_changes, repo_status
from fleet.repo.conflicts import conflict_preflight, conflict_read
from fleet.repo.diffs import diff_refs, diff_text
from fleet.repo.history import CURSOR_MAX, DEFAULT_DIFF_BYTES, commit_details, repo_history
from fleet.views.recovery import annotate_reflog
from fleet.repo.refs import repo_refs, repo_reflog
from mcp_bridge import models
from mcp_bridge.toolkit import Toolkit
from mcp_bridge.tools_repo import Repo

Rev = Annotated[str, Field(min_length=1, max_length=4096, description="a revision: branch, tag, sha, HEAD~2, ...")]
Range = Annotated[str, Field(min_length=1, max_length=4096, description="a revision or a range a..b / a...b")]
RelPath = Annotated[str, Field(min_length=1, max_length=4096, description="a path relative to the repository root")]
Unified = Annotated[int, Field(ge=0, le=20, description="context lines around each hunk")]
Entries = Annotated[int, Field(ge=1, le=10000, description="most entries per list")]
Files = Annotated[int, Field(ge=1, le=5000, description="most files to return")]
DiffBytes = Annotated[int, Field(ge=1024, le=16 * 1024 * 1024,
                                  description="byte budget for the whole result's JSON (plus a 1 KiB envelope)")]
Hunks = Annotated[int, Field(ge=1, le=100000, description="most hunks per file")]
HunkLines = Annotated[int, Field(ge=1, le=100000, description="most lines per hunk")]


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    def path_of(repo: str) -> str:
        return bridge.resolve(repo).path

    @kit.tool("repo.status", models.Status, "Working-tree status")
    def status(repo: Repo, max_entries: Entries = 200) -> dict:
        """Branch, upstream, ahead/behind, operation in progress, and the staged, unstaged, untracked and
        conflicted files (as `git status` lists them)."""
        return repo_status(bridge.resolve(repo), max_entries)

    @kit.tool("repo.changes", models.Changes, "Uncommitted changes with hunks")
    def changes(repo: Repo, path_filter: RelPath | None = None, summary_only: bool = False,
                unified: Unified = 3, max_changes: Annotated[int, Field(ge=1, le=1000)] = 200) -> dict:
        """Every uncommitted change as a Change with typed hunks (staged hunks first, each with its `side`).

        `summary_only` drops hunk bodies (counts only) for a cheap overview of a large change set.
        """
        return repo_changes(bridge.resolve(repo), path_filter, summary_only, unified, max_changes)

    @kit.tool("repo.history", models.History, "Commit history")
    def history(repo: Repo, ref: Annotated[Rev | None, Field(description="a revision, or a range a..b / a...b")] = None,
                limit: Annotated[int, Field(ge=1, le=200)] = 20,
                path_filter: RelPath | None = None,
                since: Annotated[str | None, Field(max_length=100, description="ISO 8601 or '2 weeks ago'")] = None,
                until: Annotated[str | None, Field(max_length=100)] = None, include_merges: bool = True,
                cursor: Annotated[str | None, Field(max_length=CURSOR_MAX, description="next_cursor of the previous page")] = None,
                author: Annotated[str | None, Field(max_length=200, description="part of the author's name or email (case-insensitive)")] = None,
                path_glob: Annotated[bool, Field(description="path_filter is a glob (* ? [..] within a folder, ** across)")] = False,
                count_omitted: Annotated[bool, Field(description="count the commits after this page (a full walk: slow on big histories)")] = False,
                ) -> dict:
        """Commits reachable from `ref` (default HEAD, or a range), newest first, paged with a stable cursor,
        at about the cost of `git log` for the page (without filters or a range, a page deep in history
        too): `has_more` and `omitted_count_at_least` say there is more; `omitted_count` is null unless
        `count_omitted`. `path_filter` is a literal path unless
        `path_glob`; a filter that matched no commit says so in `note`."""
        return repo_history(path_of(repo), ref, limit, path_filter, since, until, include_merges, cursor,
                            author, path_glob, count_omitted)

    @kit.tool("repo.reflog", models.Reflog, "Reflog of a ref")
    def reflog(repo: Repo, ref: Rev = "HEAD", limit: Annotated[int, Field(ge=1, le=1000)] = 50) -> dict:
        """Where a ref (default HEAD) has pointed, newest first, with `ref@{n}` selectors: the way back to
        commits lost by a reset or rebase. An entry that left a commit no ref reaches any more says so in
        `dropped` {sha, subject, recover} (`recover` is the command that brings it back as a branch)."""
        found = bridge.resolve(repo)
        return annotate_reflog(found.path, repo_reflog(found, ref, limit))

    @kit.tool("repo.refs", models.Refs, "Branches, tags, remotes, stashes")
    def refs(repo: Repo, max_entries: Entries = 200,
             sort: Literal["newest", "oldest", "name", "version"] = "newest") -> dict:
        """Local branches (upstream, ahead/behind, worktree; a gone upstream keeps its name with
        `upstream_gone: true`), remote-tracking branches, tags (`sort`: newest first by creator date by
        default, oldest, name, or version), remotes (URLs with credentials redacted) and stashes."""
        return repo_refs(bridge.resolve(repo), max_entries, sort)

    @kit.tool("commit.details", models.CommitDetails, "One commit with its diff")
    def details(repo: Repo, rev: Rev, unified: Unified = 3, max_bytes: DiffBytes = DEFAULT_DIFF_BYTES,
                max_files: Files = 200, max_hunks: Hunks = 200, max_hunk_lines: HunkLines = 200) -> dict:
        """A commit's metadata, full message, parents and parsed diff (root commits against the empty tree,
        merges against their first parent). The result's JSON stays within `max_bytes` + 1 KiB: files,
        hunks and lines are cut in order, each level saying `truncated` and `omitted_count`."""
        return commit_details(path_of(repo), rev, unified, max_bytes, max_files, max_hunks, max_hunk_lines)

    @kit.tool("diff.refs", models.DiffRefs, "Structured diff between revisions")
    def refs_diff(repo: Repo, base: Range, head: Rev | None = None, unified: Unified = 3,
                  path_filter: RelPath | None = None, max_files: Files = 200,
                  max_bytes: DiffBytes = DEFAULT_DIFF_BYTES, max_hunks: Hunks = 200,
                  max_hunk_lines: HunkLines = 200) -> dict:
        """Change[] from `base` to `head` (default HEAD). `base` may be a range: `a..b`, or `a...b` for what b
        adds since it forked from a. The result's JSON stays within `max_bytes` + 1 KiB: files, hunks and
        lines are cut in order, each level saying `truncated` and `omitted_count`."""
        return diff_refs(bridge.resolve(repo), base, head, unified, path_filter, max_files, max_bytes, max_hunks,
                         max_hunk_lines)

    @kit.tool("diff.text", models.DiffText, "Patch text")
    def text_diff(repo: Repo, base: Range | None = None, head: Rev | None = None, staged: bool = False,
                  max_bytes: Annotated[int, Field(ge=1, le=1024 * 1024)] = 65536,
                  max_lines: Annotated[int, Field(ge=1, le=100000)] = 2000, path_filter: RelPath | None = None,
                  unified: Unified = 3, max_files: Files = 200) -> dict:
        """A unified patch as text, cut on a line boundary at the byte/line caps, with totals.

        No base: working tree vs index (`staged`: index vs HEAD). A base: that commit vs the working tree
        (`staged`: vs the index). A base and head, or a range: between two commits.
        """
        return diff_text(bridge.resolve(repo), base, head, staged, max_bytes, max_lines, path_filter, unified, max_files)

    @kit.tool("repo.blame", models.Blame, "Who changed each line")
    def blame(repo: Repo, file: RelPath, ref: Rev | None = None,
              start_line: Annotated[int | None, Field(ge=1)] = None, end_line: Annotated[int | None, Field(ge=1)] = None,
              ignore_whitespace: bool = False, detect_moves: bool = False,
              max_lines: Annotated[int, Field(ge=1, le=5000)] = 200) -> dict:
        """Line ranges of `file` (at `ref`, or the working tree) with the commit that last changed each; a binary
        file gives `binary: true` and no lines."""
        return repo_blame(path_of(repo), file, ref, start_line, end_line, ignore_whitespace, detect_moves,
                          max_lines)

    @kit.tool("repo.conflict_preflight", models.Preflight, "Predict a merge")
    def preflight(repo: Repo, target: Rev | None = None, source: Rev = "HEAD") -> dict:
        """Would merging `target` (default: the upstream) into `source` conflict? Computed with
        `git merge-tree`, never touching HEAD, the index or the working tree; no fetch."""
        return conflict_preflight(bridge.resolve(repo), target, source)

    @kit.tool("conflict.read", models.ConflictRead, "The conflict in progress")
    def conflict(repo: Repo, max_bytes: Annotated[int, Field(ge=1, le=1024 * 1024)] = 16384,
                 max_files: Annotated[int, Field(ge=1, le=200)] = 20,
                 context_lines: Annotated[int, Field(ge=0, le=50, description="lines shown around each conflict region")] = 3) -> dict:
        """An active merge/rebase/cherry-pick/revert conflict: ours and theirs (with the rebase inversion
        spelled out), and per file its kind, its conflict regions first (line numbers, the ours/base/theirs
        text of each with `context_lines` around it), then the whole base/ours/theirs contents of the sides
        that fit in `max_bytes` (a bigger side gives its size and `content_omitted: "too_large"`)."""
        return conflict_read(bridge.resolve(repo), max_bytes, max_files, context_lines)
