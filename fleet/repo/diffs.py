"""Diffs between revisions: structured (`diff_refs`) and as capped patch text (`diff_text`)."""

from __future__ import annotations

from fleet.git import diffparse
from fleet.caps import DEFAULT_CAP, Capped, cap, check_int
from fleet.errors import FleetError
from fleet.git.layout import Found
from fleet.git.revs import index_base, resolve_commit, resolve_range
from fleet.git.run import out, text
from fleet.repo.history import DEFAULT_DIFF_BYTES, DIFF_FLAGS
from fleet.repo.jsonbudget import DEFAULT_MAX_HUNKS, DEFAULT_MAX_LINES, json_size, shape_changes
from fleet.repo.scope import check_rel_path
from fleet.repo.changes import Change

PATCH_READ_LIMIT = 64 * 1024 * 1024


class RefPair(Capped):
    """What a two-ref comparison resolved: both refs, their shas, and the side the diff starts from."""
    base: str
    head: str
    base_sha: str
    head_sha: str
    merge_base: str | None
    diff_from: str


class DiffRefs(RefPair):
    changes: list[Change]
    file_count: int
    hunks_omitted_count: int
    lines_omitted_count: int


class DiffText(Capped):
    mode: str
    patch: str
    patch_truncated: bool
    total_bytes: int
    total_lines: int
    returned_bytes: int
    returned_lines: int
    files: list[dict]
    files_truncated: bool


def path_spec(path_filter: str | None) -> list[str]:
    """`--` and the agent's one path (checked: relative, inside the repo), the tail of every diff command."""
    return ["--"] + ([check_rel_path(path_filter, "path_filter")] if path_filter is not None else [])


def diff_refs(found: Found, base: str, head: str | None = None, unified: int = 3,
              path_filter: str | None = None, max_files: int = DEFAULT_CAP,
              max_bytes: int = DEFAULT_DIFF_BYTES, max_hunks: int = DEFAULT_MAX_HUNKS,
              max_hunk_lines: int = DEFAULT_MAX_LINES) -> DiffRefs:
    """Change[] from `base` to `head` (default HEAD); `base` may be a range `a..b` or `a...b`. The JSON of
    the result stays within `max_bytes` + ENVELOPE (fleet.repo.jsonbudget).

    `a...b` diffs from the merge base of a and b to b (what b adds), as `git diff a...b` does.
    """
    check_int(unified, "unified", 0, 20)
    check_int(max_files, "max_files", 1, 5000)
    check_int(max_bytes, "max_bytes", 1024, 16 * 1024 * 1024)
    check_int(max_hunks, "max_hunks", 1, 100000)
    check_int(max_hunk_lines, "max_hunk_lines", 1, 100000)
    path = found.path
    sides = resolve_range(path, base, head)
    raw = out(path, ["diff", *DIFF_FLAGS, f"--unified={unified}", sides["diff_from"], sides["head_sha"],
                     *path_spec(path_filter)], max_bytes=PATCH_READ_LIMIT)
    return {**sides, **shape_changes(diffparse.index_diff(raw), max_files, max_bytes, max_hunks=max_hunks,
                                     max_lines=max_hunk_lines, reserve=json_size(sides))}


def _text_args(path: str, base: str | None, head: str | None, staged: bool) -> tuple[list[str], dict]:
    """The plumbing diff command for each diff_text mode, each revision resolved to a sha first.

    Plumbing because porcelain `git diff` refreshes and rewrites .git/index when it looks at the work tree;
    `diff-files`/`diff-index` never write, and print the same patch (a stat-dirty file has no patch).
    """
    if base is None:
        if head is not None:
            raise FleetError("BAD_ARGUMENT", "head needs a base")
        if staged:
            return ["diff-index", "--cached", index_base(path)], {"mode": "staged"}
        return ["diff-files"], {"mode": "unstaged"}
    if head is None and ".." not in base:
        sha = resolve_commit(path, base, "base")
        mode = "base_to_index" if staged else "base_to_worktree"
        return (["diff-index", "--cached", sha] if staged else ["diff-index", sha]), {"mode": mode, "base_sha": sha}
    if staged:
        raise FleetError("BAD_ARGUMENT", "staged applies only when comparing with the index (no head)")
    sides = resolve_range(path, base, head)
    return ["diff-tree", "-r", sides["diff_from"], sides["head_sha"]], {"mode": "refs", **sides}


def _cut(patch: bytes, max_bytes: int, max_lines: int) -> bytes:
    """The longest prefix ending on a line boundary within both caps (a last line without a newline ends
    at the end of the patch)."""
    head = patch if len(patch) <= max_bytes else patch[:patch.rfind(b"\n", 0, max_bytes) + 1]
    parts = head.split(b"\n", max_lines)
    if len(parts) > max_lines:   # more than max_lines lines: end after the max_lines-th newline
        return head[:len(head) - len(parts[-1])]
    return head


def diff_text(found: Found, base: str | None = None, head: str | None = None, staged: bool = False,
              max_bytes: int = 65536, max_lines: int = 2000, path_filter: str | None = None,
              unified: int = 3, max_files: int = DEFAULT_CAP) -> DiffText:
    """A unified patch as text, cut on a line boundary at `max_bytes`/`max_lines`, with totals.

    No base: working tree vs index (or index vs HEAD when `staged`). A base alone: that commit vs the working
    tree (or the index when `staged`). A base and head, or a range: between the two commits.
    """
    check_int(max_bytes, "max_bytes", 1, 1024 * 1024)
    check_int(max_lines, "max_lines", 1, 100000)
    check_int(unified, "unified", 0, 20)
    check_int(max_files, "max_files", 1, 5000)
    path = found.path
    (command, *revs), info = _text_args(path, base, head, staged)
    spec = path_spec(path_filter)
    flags = [*diffparse.PATCH_FLAGS, "-M"]
    # One git run for the numstat and the patch: each run of a work-tree diff stats every tracked file.
    numstat, patch = diffparse.split_numstat(out(
        path, [command, "--numstat", "-z", "--patch", f"--unified={unified}", *flags, *revs, *spec],
        max_bytes=PATCH_READ_LIMIT))
    files, files_info = cap(numstat, max_files)
    kept = _cut(patch, max_bytes, max_lines)
    total_lines = patch.count(b"\n") + (0 if patch.endswith(b"\n") or not patch else 1)
    cut = len(kept) < len(patch)
    return {**info, "patch": text(kept), "truncated": cut or files_info["truncated"], "patch_truncated": cut,
            "total_bytes": len(patch),
            "total_lines": total_lines, "returned_bytes": len(kept),
            "returned_lines": kept.count(b"\n") + (0 if kept.endswith(b"\n") or not kept else 1),
            "files": files, "files_truncated": files_info["truncated"],
            "omitted_count": files_info["omitted_count"]}
