"""Refs of one repo: branches (with upstream state), tags (peeled), remotes, stashes, and reflogs.

Reflog files are read directly (with the tolerant `gitfiles.parse_reflog`) rather than through `git reflog`,
whose formats do not expose the old oid; a line without a message (`worktree add`, `update-ref` without -m)
is still an entry, and unreadable lines are counted, not fatal.
"""

from __future__ import annotations

import os
from typing import Any

from fleet.caps import DEFAULT_CAP, Capped, cap, check_int
from fleet.errors import FleetError
from fleet.git import files as gitfiles
from fleet.git.config import read_config
from fleet.git.layout import Found
from fleet.git.revs import check_rev
from fleet.git.run import out, text
from fleet.repo.record import parse_track, read_stashes
from fleet.repo.scope import inside


class Refs(Capped):
    head_ref: str | None
    detached: bool
    tag_sort: str
    branches: list[dict]
    remote_branches: list[dict]
    tags: list[dict]
    remotes: list[dict]
    stashes: list[dict]
    counts: dict[str, int]


def _reflog_file(found: Found, ref: str) -> tuple[str, str]:
    """(full ref name, reflog file) for `ref`: HEAD lives in the worktree's git dir, refs in the common dir."""
    check_rev(ref, "ref")
    if ".." in ref:
        raise FleetError("BAD_REF", "ref must be a single ref, not a range")
    if ref == "HEAD":
        return "HEAD", os.path.join(found.gitdir, "logs", "HEAD")
    full = text(out(found.path, ["rev-parse", "--symbolic-full-name", ref], ok_codes=(0, 128))).strip()
    if not full.startswith("refs/"):
        raise FleetError("NOT_FOUND", f"{ref!r} is not a branch, tag or other named ref with a reflog")
    logs = os.path.realpath(os.path.join(found.commondir, "logs"))
    file = os.path.realpath(os.path.join(logs, full))
    if not inside(file, logs):
        raise FleetError("BAD_REF", f"{ref!r} resolves outside the reflog directory")
    return full, file


def _read_reflog(file: str) -> tuple[list[dict[str, Any]], int, bool]:
    """Entries newest first, unreadable line count, and whether the oldest were clipped (file too big)."""
    try:
        data, _, clipped = gitfiles.read_reflog(file)
    except gitfiles.BrokenRepo as exc:
        raise FleetError("GIT_FAILED", f"cannot read reflog: {exc}") from None
    lines = gitfiles.parse_reflog(data)
    bad = sum(1 for line in data.split(b"\n") if line) - len(lines)
    entries = [{"old_sha": e.old_sha, "new_sha": e.new_sha, "identity": e.identity, "at": e.at, "tz": e.tz,
                "message": e.message} for e in reversed(lines)]
    return entries, bad, clipped


def repo_reflog(found: Found, ref: str = "HEAD", limit: int = 50) -> dict[str, Any]:
    """The newest `limit` reflog entries of `ref`, each with its `ref@{n}` selector (0 = newest)."""
    check_int(limit, "limit", 1, 1000)
    full, file = _reflog_file(found, ref)
    entries, bad, clipped = _read_reflog(file)
    for n, entry in enumerate(entries):
        entry["index"] = n
        entry["selector"] = f"{ref}@{{{n}}}"
    kept, info = cap(entries, limit)
    return {"ref": ref, "full_ref": full, "entries": kept, "entry_count": len(entries),
            "unreadable_lines": bad, "oldest_clipped": clipped, **info}


# --- refs -------------------------------------------------------------------------------------------

_REF_FORMAT = ("%(refname)%00%(objectname)%00%(objecttype)%00%(*objectname)%00%(*objecttype)%00%(symref)%00"
               "%(upstream)%00%(upstream:short)%00%(upstream:track,nobracket)%00%(HEAD)%00%(worktreepath)%00"
               "%(creatordate:unix)%00%(contents:subject)")


def _remotes(found: Found) -> list[dict[str, Any]]:
    """The repository's remotes from its own config (includes followed), read as the index record reads them."""
    try:
        return gitfiles.remotes(read_config(found.commondir))
    except gitfiles.BrokenRepo as exc:
        raise FleetError("GIT_FAILED", str(exc)) from None


def _stashes(found: Found) -> list[dict[str, Any]]:
    try:
        return read_stashes(found.commondir)
    except gitfiles.BrokenRepo as exc:
        raise FleetError("GIT_FAILED", f"cannot read the stash list: {exc}") from None


# `sort` values and git's --sort keys for them. Tags are newest first by default (creator date: the tag's own
# date when annotated, else its commit's), so the cap keeps the releases people look for; ties by name.
TAG_SORTS = {"newest": ["--sort=refname", "--sort=-creatordate"], "oldest": ["--sort=refname", "--sort=creatordate"],
             "name": ["--sort=refname"], "version": ["--sort=refname", "--sort=-version:refname"]}


def repo_refs(found: Found, max_entries: int = DEFAULT_CAP, sort: str = "newest") -> Refs:
    """Local and remote-tracking branches (by name), tags (in `sort` order), remotes and stashes, each list
    capped. A gone upstream keeps its name: `upstream: "origin/x", upstream_gone: true`, ahead/behind null
    (the repo record's shape)."""
    check_int(max_entries, "max_entries", 1, 10000)
    if sort not in TAG_SORTS:
        raise FleetError("BAD_ARGUMENT", f"sort must be one of {', '.join(TAG_SORTS)}, not {str(sort)[:40]!r}")
    fmt = f"--format={_REF_FORMAT}"
    path = found.path
    data = out(path, ["for-each-ref", fmt, "refs/heads", "refs/remotes"])
    data += out(path, ["for-each-ref", *TAG_SORTS[sort], fmt, "refs/tags"])
    lists: dict[str, list[dict[str, Any]]] = {"branches": [], "remote_branches": [], "tags": []}
    for line in data.split(b"\n"):
        if not line:
            continue
        (refname, sha, otype, peeled, peeled_type, symref, upstream, upstream_short, track, head, worktree, date,
         subject) = (text(f) for f in line.split(b"\0"))
        when = int(date) if date else None
        if refname.startswith("refs/heads/"):
            ahead, behind, gone = parse_track(track)
            has_upstream = bool(upstream) and not gone
            lists["branches"].append({
                "name": refname[len("refs/heads/"):], "ref": refname, "sha": sha, "current": head == "*",
                "upstream": upstream_short or None, "upstream_gone": gone,
                "ahead": ahead if has_upstream else None, "behind": behind if has_upstream else None,
                "worktree_path": worktree or None, "subject": subject, "committer_time": when})
        elif refname.startswith("refs/remotes/"):
            lists["remote_branches"].append({"name": refname[len("refs/remotes/"):], "ref": refname,
                                             "sha": sha, "symref": symref or None, "subject": subject})
        else:
            lists["tags"].append({"name": refname[len("refs/tags/"):], "ref": refname, "sha": sha,
                                  "annotated": otype == "tag", "target": peeled or sha,
                                  "target_type": peeled_type or otype,
                                  "subject": subject, "created": when})
    lists["remotes"] = _remotes(found)
    lists["stashes"] = _stashes(found)
    head = text(out(path, ["symbolic-ref", "-q", "HEAD"], ok_codes=(0, 1))).strip()
    result: dict[str, Any] = {"head_ref": head or None, "detached": not head}
    counts: dict[str, int] = {}
    omitted = 0
    for key, items in lists.items():
        counts[key] = len(items)
        result[key], info = cap(items, max_entries)
        omitted += info["omitted_count"]
    result.update({"tag_sort": sort, "counts": counts, "truncated": omitted > 0, "omitted_count": omitted})
    return result
