"""Uncommitted work in a working tree: `repo_changes` (structured hunks) and `repo_status` (labels).

Staged hunks (HEAD -> index) come before unstaged ones (index -> working tree) for the same file; every
hunk says which `side` it belongs to, because their line numbers are relative to different bases.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from fleet.git import diffparse, files as gitfiles
from fleet.repo import hunkids
from fleet.caps import DEFAULT_CAP, Capped, cap, check_int
from fleet.errors import FleetError
from fleet.git.layout import Found
from fleet.git.revs import index_base
from fleet.git.run import GitError, out, text
from fleet.repo.scope import check_rel_path
from fleet.repo.jsonbudget import Timeless
from fleet.git.status import Status as GitStatus, read_status

UNTRACKED_CONTENT_MAX = 32 * 1024
BINARY_SNIFF = 8000
DIFF_FLAGS = ["-z", "--raw", "--patch", *diffparse.PATCH_FLAGS]


class Hunk(TypedDict):
    id: NotRequired[str | None]  # stable while the file is unchanged; operation.preview.stage_hunks takes it
    header: str
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[str]


class Change(TypedDict):
    id: str
    path: str
    old_path: str | None
    status: str
    binary: bool
    insertions: int | None
    deletions: int | None
    hunks: NotRequired[list[Hunk] | None]


class Status(Capped):
    branch: str | None
    detached: bool
    head: str | None
    upstream: str | None
    upstream_gone: bool
    ahead: int | None
    behind: int | None
    stashes: int
    operation: str | None
    staged: list[dict]
    unstaged: list[dict]
    untracked: list[str]
    conflicted: list[dict]
    counts: dict[str, int]
    clean: bool


class Changes(Capped):
    changes: list[Change]
    change_count: int
    staged_count: int
    unstaged_count: int
    untracked_count: int
    summary_only: bool


def _pathspec(path_filter: str | None) -> list[str]:
    return ["--", check_rel_path(path_filter, "path_filter")] if path_filter is not None else ["--"]


def _untracked_hunk(repo: str, rel: str, change: dict[str, Any]) -> None:
    """Give a small untracked text file one `@@ -0,0 +1,N @@` hunk, like `git diff --no-index` would."""
    full = os.path.join(repo, rel)
    try:
        st = os.lstat(full)
        if os.path.islink(full):
            data = os.readlink(full).encode("utf-8", "surrogateescape")
            change["new_mode"] = "120000"
        elif os.path.isfile(full):
            change["new_mode"] = "100755" if st.st_mode & 0o111 else "100644"
            if st.st_size > UNTRACKED_CONTENT_MAX:
                change["content_omitted"] = "too_large"
                return
            with open(full, "rb") as fh:
                data = fh.read(UNTRACKED_CONTENT_MAX + 1)
        else:
            return
    except OSError:
        change["content_omitted"] = "unreadable"
        return
    if b"\0" in data[:BINARY_SNIFF]:
        change["binary"] = True
        change["insertions"] = change["deletions"] = None
        return
    if not data:
        return
    lines = data.split(b"\n")
    missing_newline = lines[-1] != b""
    if not missing_newline:
        lines.pop()
    body = ["+" + text(line) for line in lines]
    if missing_newline:
        body.append("\\ No newline at end of file")
    change["hunks"] = [{"old_start": 0, "old_lines": 0, "new_start": 1, "new_lines": len(lines),
                        "header": f"@@ -0,0 +1,{len(lines)} @@" if len(lines) != 1 else "@@ -0,0 +1 @@",
                        "lines": body, "side": "untracked"}]
    change["insertions"] = len(lines)


def _merge(staged: dict[str, Any] | None, unstaged: dict[str, Any] | None) -> dict[str, Any]:
    """One change per path: staged status wins (it is relative to HEAD) unless the work tree deleted it."""
    parts = [(side, c) for side, c in (("staged", staged), ("unstaged", unstaged)) if c is not None]
    for side, change in parts:
        for hunk in change["hunks"]:
            hunk["side"] = side
    if len(parts) == 1:
        side, change = parts[0]
        change["sides"] = [side]
        return change
    assert staged is not None and unstaged is not None
    merged = dict(staged)
    merged["sides"] = ["staged", "unstaged"]
    merged["hunks"] = staged["hunks"] + unstaged["hunks"]
    merged["new_mode"] = unstaged["new_mode"]
    merged["staged_status"], merged["unstaged_status"] = staged["status"], unstaged["status"]
    if unstaged["status"] == "deleted" and staged["status"] != "added":
        merged["status"] = "deleted"
    merged["binary"] = staged["binary"] or unstaged["binary"]
    for key in ("insertions", "deletions"):
        a, b = staged[key], unstaged[key]
        merged[key] = None if a is None or b is None else a + b
    return merged


def repo_changes(found: Found, path_filter: str | None = None, summary_only: bool = False,
                 unified: int = 3, max_changes: int = DEFAULT_CAP) -> Changes:
    """Every uncommitted change (staged, unstaged, untracked) as Change[], sorted by path, ids change-N."""
    path = found.path
    check_int(unified, "unified", 0, 20)
    check_int(max_changes, "max_changes", 1, 1000)
    spec = _pathspec(path_filter)
    flags = [*DIFF_FLAGS, f"--unified={unified}"]
    # Plumbing, not porcelain `git diff`: that refreshes and rewrites .git/index even without optional locks.
    staged_raw = out(path, ["diff-index", "--cached", "-M", *flags, index_base(path), *spec])
    staged = {c["path"]: c for c in diffparse.parse_diff(staged_raw)}
    unstaged = {c["path"]: c for c in diffparse.parse_diff(out(path, ["diff-files", *flags, *spec]))}
    changes = [_merge(staged.get(p), unstaged.get(p)) for p in sorted(staged.keys() | unstaged.keys())]
    others = out(path, ["ls-files", "--others", "--exclude-standard", "--full-name", "-z", *spec])
    untracked = [text(name) for name in others.split(b"\0") if name]
    for name in untracked:
        changes.append({"path": name, "old_path": None, "status": "added", "similarity": None,
                        "old_mode": None, "new_mode": None, "binary": False, "insertions": 0,
                        "deletions": 0, "hunks": [], "sides": ["untracked"]})
    diffparse.number(changes)
    hunkids.assign(changes)
    kept, info = cap(changes, max_changes)
    for change in kept:
        if change["sides"] == ["untracked"]:
            _untracked_hunk(path, change["path"], change)
    if summary_only:
        kept = [diffparse.summarize(c) for c in kept]
    else:
        kept = [diffparse.cap_change(c) for c in kept]
    return {"changes": kept, "change_count": len(changes), "staged_count": len(staged),
            "unstaged_count": len(unstaged), "untracked_count": len(untracked),
            "summary_only": summary_only, **info}


# --- status -----------------------------------------------------------------------------------------

_LABEL = {"M": "modified", "T": "type_changed", "A": "added", "D": "deleted", "R": "renamed",
          "C": "copied", "U": "unmerged"}
CONFLICT_KIND = {"DD": "both_deleted", "AU": "added_by_us", "UD": "deleted_by_them",
                 "UA": "added_by_them", "DU": "deleted_by_us", "AA": "both_added", "UU": "both_modified"}


def _status_lists(status: GitStatus) -> dict[str, list]:
    """Porcelain v2 entries as labelled staged/unstaged/untracked/conflicted lists."""
    lists: dict[str, list] = {"staged": [], "unstaged": [], "untracked": [], "conflicted": []}
    for entry in status.entries:
        if entry.kind == "?":
            lists["untracked"].append(entry.path)
        elif entry.kind == "u":
            lists["conflicted"].append({"path": entry.path, "kind": CONFLICT_KIND.get(entry.xy, entry.xy)})
        else:
            for side, letter in (("staged", entry.xy[0]), ("unstaged", entry.xy[1])):
                if letter != ".":
                    lists[side].append({"path": entry.path,
                                        "old_path": entry.orig_path if letter in "RC" else None,
                                        "status": _LABEL.get(letter, letter)})
    return lists


def repo_status(found: Found, max_entries: int = DEFAULT_CAP) -> Status:
    """Branch, upstream, ahead/behind, operation, and capped staged/unstaged/untracked/conflicted lists."""
    check_int(max_entries, "max_entries", 1, 10000)
    try:
        status = read_status(found.path, found.commondir)
    except gitfiles.BrokenRepo as exc:
        raise FleetError("GIT_FAILED", f"cannot read the status: {exc}") from None
    except GitError as exc:
        raise FleetError.from_git(exc) from exc
    operation, details = gitfiles.operation(Path(found.gitdir))
    gone = status.upstream is not None and status.ahead is None
    result: dict[str, Any] = {
        "branch": status.head, "detached": status.head is None, "head": status.oid,
        "upstream": status.upstream, "upstream_gone": gone,   # the repo record's shape for a gone upstream
        "ahead": status.ahead, "behind": status.behind, "stashes": status.stash,
        "operation": operation, "operation_details": details,
    }
    counts: dict[str, int] = {}
    omitted = 0
    for key, items in _status_lists(status).items():
        counts[key] = len(items)
        kept, info = cap(items, max_entries)
        result[key] = Timeless(kept)   # paths and labels only: the answer's time conversion need not walk them
        omitted += info["omitted_count"]
    result["counts"] = counts
    result["clean"] = not any(counts.values())
    result["truncated"] = omitted > 0
    result["omitted_count"] = omitted
    return result
