"""Reading a working tree's snapshots: the list (newest first, filtered by time or path) and diffs between
two snapshots or a snapshot and the working tree now."""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.run import GitError
from fleet.git.layout import Found
from fleet.repo.scope import check_rel_path
from fleet.snapshot.compare import EMPTY_TREE, raw_diff
from fleet.snapshot.restore import store_of
from fleet.snapshot.shadow import WorkTree, store_for
from fleet.snapshot.take import take

MAX_DIFF_BYTES = 8 * 1024 * 1024


def work_tree_of(found: Found) -> WorkTree:
    """The working tree of a resolved repository; a bare repository has none to snapshot."""
    if found.bare:
        raise FleetError("BAD_ARGUMENT", f"{found.path} is a bare repository: it has no working tree")
    return WorkTree(found.path, found.gitdir, found.commondir)


def listed(meta: dict) -> dict:
    """A snapshot as the list shows it."""
    return {"id": meta["id"], "at": meta["at"], "trigger": meta["trigger"], "agents": meta["agents"],
            "changed_files": meta.get("changed_files", 0), "discarded": bool(meta.get("discarded")),
            "command": meta.get("command"), "head": meta["head"], "branch": meta["branch"],
            "skipped": meta.get("skipped", [])}


def snapshots(tree: WorkTree, db_path: str | os.PathLike[str], *, since: float | None = None,
              path: str | None = None) -> list[dict]:
    """Every kept snapshot of `tree`, newest first; `path` keeps those where that path (a file or folder)
    changed from the snapshot before."""
    shadow = store_for(tree, db_path)
    if shadow is None:
        return []
    entries = shadow.entries()
    if path is not None:
        path = check_rel_path(path.rstrip("/"), "path")
        entries = [m for i, m in enumerate(entries)
                   if raw_diff(shadow, entries[i - 1]["tree"] if i else EMPTY_TREE,
                               m["tree"], [path])]
    if since is not None:
        entries = [m for m in entries if m["t"] >= since]
    return [listed(m) for m in reversed(entries)]


def discarded_events(tree: WorkTree, db_path: str | os.PathLike[str], since: float | None = None) -> list[dict]:
    """The snapshots that found work discarded, newest first, each with what was lost and the snapshot
    before it (the one to restore)."""
    shadow = store_for(tree, db_path)
    if shadow is None:
        return []
    entries = shadow.entries()
    out = []
    for i, meta in enumerate(entries):
        lost = meta.get("discarded")
        if lost and i and (since is None or meta["t"] >= since):
            out.append({"worktree": tree.path, "at": meta["at"], "snapshot": meta["id"],
                        "restore_from": entries[i - 1]["id"], **lost})
    return out[::-1]


def diff(tree: WorkTree, db_path: str | os.PathLike[str], old: str, new: str | None = None,
         path: str | None = None) -> str:
    """The unified diff from snapshot `old` to snapshot `new`, or to the working tree now (a snapshot of the
    present is taken for it: that changes nothing in the repository)."""
    shadow = store_of(tree, db_path)
    a = shadow.find(old)["tree"]
    b = shadow.find(new)["tree"] if new else take(tree, db_path, "manual")["tree"]
    args = ["--literal-pathspecs", "diff", "--no-ext-diff", "--no-textconv", "--no-color", "--binary", a, b]
    if path:
        args += ["--", check_rel_path(path.rstrip("/"), "path")]
    try:
        return shadow.git(args, max_bytes=MAX_DIFF_BYTES).stdout.decode("utf-8", "replace")
    except GitError as exc:
        raise FleetError.from_git(exc) from exc
