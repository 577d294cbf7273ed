"""Restore points: everything needed to bring a repository back to the moment before a proposal ran.

Taken by the executor right before it runs anything, kept until pruned by an explicit command:
- refs under `refs/fleetdeck/restore/<id>/`: HEAD, every ref the operation will move, a `git stash create`
  snapshot of index and working tree (`.../stash`), and a commit holding the exact bytes (no filters) of
  every path the operation may create, change, delete or overwrite, whatever its status (tracked,
  untracked, ignored, excluded: `Plan.writes`, fleet.ops.writeset), of every file that differs from HEAD or
  the index, and of the untracked files it deletes (`.../files`, fleet.ops.savedfiles);
- a row in `restore_points`: HEAD's branch and sha, the saved refs (None = did not exist), the index as a
  tree, the saved paths (mode, blob, permission bits; or absent: it must not exist after the undo), the
  untracked paths, and the state right after the operation: refs, HEAD, git status, and the exact state of
  every path an undo would write (so an undo refuses, STALE, when any of them changed since).

Restoring puts refs and HEAD back, the index and tracked files with `read-tree -u --reset`, then makes every
saved path exactly as it was; other paths the undo's read-tree writes keep the content they have now.
"""

from __future__ import annotations

import json
import os
import time

from fleet.errors import FleetError
from fleet.git.run import run, text
from fleet.index.store import Index
from fleet.ops import savedfiles, writeset
from fleet.ops.gitexec import exec_git
from fleet.ops.pins import head_state, read_status, ref_sha, revalidate
from fleet.ops.restorepoints import PREFIX, details, restore_ref

MAX_UNTRACKED = 10000


def take(index: Index, repo: str, point_id: str, refs: list[str], untracked_content: list[str],
         undo: dict | None = None, writes: list[str] | None = None) -> dict:
    """Save the repository's state before proposal `point_id` runs. `refs` are the refs it will move;
    `untracked_content` the untracked paths it may delete; `writes` every working-tree path it may create,
    change, delete or overwrite, whatever git thinks of it (saved with whatever stands in its way)."""
    head_ref, head = head_state(repo)
    status, _ = read_status(repo)
    if status.conflicted:
        raise FleetError("CONFLICT", "the repository has unresolved conflicts; finish or abort that first")
    changed = sorted({p for e in status.entries if e.kind in "12" for p in (e.path, e.orig_path) if p})
    untracked = [e.path for e in status.entries if e.kind == "?"]
    if len(untracked) > MAX_UNTRACKED:
        raise FleetError("LIMIT", f"more than {MAX_UNTRACKED} untracked files: a restore point cannot list them")
    files = savedfiles.save(repo, list(dict.fromkeys([*changed, *untracked_content,
                                                      *writeset.expand(repo, writes or [])])))
    saved_refs = {ref: ref_sha(repo, ref) for ref in dict.fromkeys([*refs, *([head_ref] if head_ref else [])])}
    index_tree = text(exec_git(repo, ["write-tree"]).stdout).strip()
    # `stash create` must refresh the index's stat data to tell a touched file from a changed one, and without
    # optional locks (the person's git as fleetdeck runs it) cannot, and fails: refreshed here first (stat
    # data only; `-q` goes on past files that really changed, which the snapshot then holds).
    exec_git(repo, ["update-index", "-q", "--refresh"], check=False)
    snapshot = text(exec_git(repo, ["stash", "create"], literal=False).stdout).strip() or None
    files_commit = savedfiles.files_commit(repo, point_id, files)
    keep = {"HEAD": head, "stash": snapshot, "files": files_commit,
            **{ref: sha for ref, sha in saved_refs.items()}}
    updates = "".join(f"update {restore_ref(point_id, ref)} {sha}\n" for ref, sha in keep.items() if sha)
    if updates:
        exec_git(repo, ["update-ref", "--stdin"], input_bytes=updates.encode())
    row = {"id": point_id, "repo": repo, "created_at": time.time(), "head_ref": head_ref, "head": head,
           "refs": json.dumps(saved_refs), "index_tree": index_tree, "stash_snapshot": snapshot,
           "files_commit": files_commit, "files": json.dumps({"saved": files, "untracked": untracked,
                                                              "undo": undo or {}})}
    index.restore_points.put(row)
    return details(index, point_id)


def extend(index: Index, repo: str, point_id: str, writes: list[str]) -> None:
    """Save more paths into a restore point before a later step of the same proposal writes them (a plan's
    step previewed only when it runs). Paths already saved keep the content they had before step 1."""
    with index.write():
        files = json.loads(index.restore_points.get(point_id)["files"])
        new = [p for p in writeset.expand(repo, writes) if p not in files["saved"]]
        if not new:
            return
        files["saved"].update(savedfiles.save(repo, new))
        commit = savedfiles.files_commit(repo, point_id, files["saved"])
        exec_git(repo, ["update-ref", restore_ref(point_id, "files"), commit])
        index.restore_points.set(point_id, {"files": json.dumps(files), "files_commit": commit})


def _watched(repo: str, index_tree: str, saved: dict) -> list[str]:
    """Every path an undo writes: the saved ones, and those whose index entry the proposal changed (the
    undo's `read-tree -u` rewrites or removes them)."""
    raw = run(repo, ["diff-index", "--cached", "--no-renames", "--name-only", "-z", index_tree, "--"]).stdout
    return list(dict.fromkeys([*saved, *(os.fsdecode(p) for p in raw.split(b"\0") if p)]))


def record_after(index: Index, point_id: str, after: dict, undo: dict) -> None:
    """The state the proposal left (an undo checks it is still so: refs, HEAD, git status, and the exact
    state of every path the undo would write) and the undo steps its run reported."""
    with index.write():
        row = index.restore_points.get(point_id)
        files = json.loads(row["files"])
        files["undo"] = {**files.get("undo", {}), **undo}
        after = {**after, "paths": {p: savedfiles.state_of(row["repo"], p)
                                    for p in _watched(row["repo"], row["index_tree"], files["saved"])}}
        index.restore_points.set(point_id, {"after": json.dumps(after), "files": json.dumps(files)})


def prune(index: Index, point_id: str) -> dict:
    """The one way a restore point goes: its refs deleted (git may then collect what only they kept) and its
    row marked pruned. Only by the person's explicit command (`fleetdeck restore-points REPO --prune ID`)."""
    point = details(index, point_id)
    if point["pruned"]:
        raise FleetError("NOT_FOUND", f"restore point {point_id} is already pruned")
    refs = text(run(point["repo"], ["for-each-ref", "--format=%(refname)", f"{PREFIX}/{point_id}/"]).stdout).split()
    if refs:
        exec_git(point["repo"], ["update-ref", "--stdin"], input_bytes="".join(f"delete {r}\n" for r in refs).encode())
    index.restore_points.set(point_id, {"pruned": 1})
    return {"restore_point": point_id, "repo": point["repo"], "refs_deleted": len(refs)}


def changed_since(repo: str, point: dict) -> list[str]:
    """The paths an undo would write that are no longer as the proposal left them (ignored and excluded
    ones included: they are compared byte for byte, not through git status)."""
    recorded = (point["after"] or {}).get("paths", {})
    return [p for p, state in recorded.items() if savedfiles.state_of(repo, p) != state]


def check_undo(repo: str, point: dict) -> None:
    """STALE unless the repository is exactly as the proposal left it (an undo must not lose later work)."""
    if point["pruned"]:
        raise FleetError("NOT_FOUND", f"restore point {point['restore_point']} was pruned")
    if not point["after"]:
        raise FleetError("BAD_ARGUMENT", f"restore point {point['restore_point']} belongs to a proposal that did "
                                         "not complete; nothing to undo (see `fleetdeck proposals show`)")
    if os.path.realpath(point["repo"]) != os.path.realpath(repo):
        raise FleetError("BAD_ARGUMENT", "that restore point belongs to another repository")
    moved = changed_since(repo, point)
    if moved:
        shown = ", ".join(moved[:10]) + (f" and {len(moved) - 10} more" if len(moved) > 10 else "")
        raise FleetError("STALE", f"cannot undo: {len(moved)} path(s) the undo would write changed since the "
                                  f"proposal ran: {shown}")
    try:
        revalidate(repo, point["after"])
    except FleetError as exc:
        raise FleetError("STALE", "cannot undo: " + exc.message.replace("since the preview", "since the "
                                                                        "proposal ran")) from None


def reflog_message(point_id: str) -> str:
    """What an undo writes in the reflogs it moves (fleet.git.files reads it as a `reset`)."""
    return f"fleetdeck: undo {point_id}"


def apply(repo: str, point: dict) -> dict:
    """Bring `repo` back to the restore point. Call check_undo first (and take a restore point of now).

    Refs and HEAD go back, the index and tracked files with `read-tree -u --reset`, then every saved path is
    made exactly as it was (bytes, permission bits, type, or absent); a path whose index entry the proposal
    changed but whose file it did not write keeps the content it has now (which check_undo found to be what
    the proposal left, and so what was there before)."""
    undo = point["_undo"]
    _undo_satellites(repo, undo)
    saved = point["_saved"]
    after = point["after"] or {}
    watched = after["paths"] if "paths" in after else point["_untracked"]  # older points: no path states
    keep_now = savedfiles.save(repo, [p for p in watched if p not in saved])
    updates = []
    for ref, sha in point["refs"].items():
        updates.append(f"update {ref} {sha}\n" if sha else f"delete {ref}\n")
    why = ["-m", reflog_message(point["restore_point"])]  # the reflog (timeline, digest) says what moved it
    if updates:
        exec_git(repo, ["update-ref", *why, "--stdin"], input_bytes="".join(updates).encode())
    if point["head_ref"]:
        exec_git(repo, ["symbolic-ref", *why, "HEAD", point["head_ref"]])
    elif point["head"]:
        exec_git(repo, ["update-ref", *why, "--no-deref", "HEAD", point["head"]])
    exec_git(repo, ["read-tree", "-u", "--reset", point["index_tree"]])
    try:
        written = savedfiles.write_back(repo, {**keep_now, **saved})
    except OSError as exc:
        raise FleetError("GIT_FAILED", f"the undo could not write {exc.filename or 'a file'}: {exc.strerror}; "
                                       f"its restore point {point['restore_point']} still holds every byte") from None
    if undo.get("stash_drop"):
        top = ref_sha(repo, "refs/stash")
        if top == undo["stash_drop"]:
            exec_git(repo, ["stash", "drop", "-q"], literal=False)
    if undo.get("stash_store"):
        exec_git(repo, ["stash", "store", "-m", undo.get("stash_message") or "restored by fleetdeck",
                        undo["stash_store"]])
    return {"head": head_state(repo)[1], "files_written": written}


def _undo_satellites(repo: str, undo: dict) -> None:
    """Undo steps outside the repository's own refs and files: a worktree it added, a submodule it moved."""
    sub = undo.get("submodule_head")
    if sub:
        folder = os.path.join(repo, sub["path"])
        if head_state(folder)[1] != sub["now"]:
            raise FleetError("STALE", f"cannot undo: submodule {sub['path']} moved since")
        if sub["ref"]:
            exec_git(folder, ["switch", "-q", sub["ref"][len("refs/heads/"):]])
        else:
            exec_git(folder, ["switch", "-q", "--detach", sub["sha"]])
    if undo.get("worktree_remove"):
        exec_git(repo, ["worktree", "remove", undo["worktree_remove"]])
