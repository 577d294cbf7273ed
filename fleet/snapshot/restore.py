"""Giving work back: a snapshot's files (and, on request, its staged state) written into the working tree.

A restore first snapshots the present (trigger `restore`), so every restore can itself be restored away. It
writes exact bytes and modes, recreates what was deleted and removes what the snapshot did not have, only
for the paths asked (default: all). It never moves HEAD or a branch (that is the proposals' `restore`),
never writes inside `.git`, never follows a link on the way to a path (a folder swapped for a link is
refused, not written through), and writes each file to a temp name beside it before renaming it into place.
"""

from __future__ import annotations

import os
import stat

from fleet import audit
from fleet.audit.config import resolve as audit_config
from fleet.audit.config import unavailable
from fleet.errors import FleetError
from fleet.fsio import replace_file
from fleet.git.run import run_git
from fleet.repo.scope import check_rel_path
from fleet.snapshot.compare import raw_diff
from fleet.snapshot.config import snapshot_settings
from fleet.snapshot.shadow import Shadow, WorkTree, store_for
from fleet.snapshot.take import take_locked


def store_of(tree: WorkTree, db_path: str | os.PathLike[str]) -> Shadow:
    """The shadow store of `tree`; NOT_FOUND when it has never been snapshotted."""
    shadow = store_for(tree, db_path)
    if shadow is None:
        raise FleetError("NOT_FOUND", f"no snapshots of {tree.path} yet")
    return shadow


def restore(tree: WorkTree, db_path: str | os.PathLike[str], snapshot_id: str, *, paths: list[str] = (),
            index: bool = False, dry_run: bool = False, expect: str | None = None) -> dict:
    """Put the snapshot's files (under `paths`, or all) back; with `index`, its staged state too. `expect` is
    the `snapshot_before` of the dry run a person confirmed: when the working tree (under `paths`) is no
    longer as then, STALE, and nothing is written (the confirmation named other changes than it would
    overwrite now)."""
    paths = [check_rel_path(p.rstrip("/"), "path") for p in paths]
    shadow = store_of(tree, db_path)
    with shadow.locked():
        snap = shadow.find(snapshot_id)
        before = take_locked(shadow, tree, db_path, snapshot_settings(), "restore")
        if expect is not None and raw_diff(shadow, shadow.find(expect)["tree"], before["tree"], paths):
            raise FleetError("STALE", "the working tree changed since the restore was confirmed: look at what "
                                      "it would overwrite now, and confirm again")
        changes = [c for c in raw_diff(shadow, before["tree"], snap["tree"], paths) if c[4] != "160000"]
        _refuse_unkept(tree.path, before, [c[3] for c in changes])
        restored = sorted(c[3] for c in changes if c[0] != "D")
        removed = sorted(c[3] for c in changes if c[0] == "D")
        staged = index and snap["index_tree"] is not None and snap["index_tree"] != before["index_tree"]
        if index and snap["index_tree"] is None:
            raise FleetError("BAD_ARGUMENT", f"snapshot {snap['id'][:12]} was taken mid-conflict: it has no "
                                             "staged state to restore (restore the files without --index)")
        if not dry_run:
            blobs = _blobs(shadow, [c[2] for c in changes if c[0] != "D"])
            for status, _, new, path, mode, _ in changes:
                if status == "D":
                    _remove(tree.path, path)
                else:
                    _write(tree.path, path, mode, blobs[new])
            if staged:
                _restore_index(shadow, tree, snap["index_tree"])
    return {"restored": restored, "removed": removed, "index": bool(staged), "snapshot": snap["id"],
            "snapshot_before": before["id"], "dry_run": dry_run}


def _refuse_unkept(worktree: str, before: dict, paths: list[str]) -> None:
    """A file the snapshot of the present skipped (too big, unreadable, changing) is in no snapshot: writing
    over it, or removing it, could not be undone, so the restore stops and names it."""
    skipped = {s["path"]: s["reason"] for s in before["skipped"]}
    unkept = [p for p in paths if p in skipped and _is_file(os.path.join(worktree, p))]
    if unkept:
        raise FleetError("BAD_PATH", "the snapshot of the present could not keep " + ", ".join(
            f"{p!r} ({skipped[p]})" for p in unkept[:10]) + ": restoring over it would lose it for good; "
            "move it away first, or restore other paths")


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def restore_by_person(tree: WorkTree, db_path: str | os.PathLike[str], snapshot_id: str, *, by: str,
                      paths: list[str] = (), index: bool = False, expect: str | None = None) -> dict:
    """A person's restore (the dashboard's button, `fleetdeck restore`), audited like a decision: its entry is
    written first, and when it cannot be, nothing is restored (AUDIT_UNAVAILABLE) unless the person set
    `[audit] allow_degraded_writes = true`."""
    try:
        log = audit.setup(db_path)
    except FleetError as exc:
        config = audit_config(db_path)
        if not config.allow_degraded_writes:
            raise unavailable(config.dir, exc.message) from None
        log = None
    if log is not None:
        log.require("snapshot.restore", actor=by, repo_path=tree.path, risk="medium",
                    args={"snapshot": snapshot_id, "paths": list(paths), "index": index},
                    summary=f"{by} restored snapshot {snapshot_id[:12]}" + (f" ({len(paths)} path(s))" if paths else ""))
    return restore(tree, db_path, snapshot_id, paths=paths, index=index, expect=expect)


def _blobs(shadow: Shadow, shas: list[str]) -> dict[str, bytes]:
    wanted = sorted(set(shas))
    if not wanted:
        return {}
    data = shadow.git(["cat-file", "--batch"], input_bytes=("\n".join(wanted) + "\n").encode(),
                      max_bytes=4 * 1024 ** 3).stdout
    out, pos = {}, 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        header = data[pos:end].split(b" ")
        if len(header) != 3:
            raise FleetError("GIT_FAILED", f"the snapshot store lacks object {header[0].decode()}")
        size = int(header[2])
        out[header[0].decode()] = data[end + 1:end + 1 + size]
        pos = end + 2 + size
    return out


def _parent(worktree: str, rel: str, create: bool) -> str | None:
    """The real folder `rel` goes in, each component checked to be a folder (never a link) inside the tree;
    made when missing and `create`, else None."""
    folder = worktree
    for part in rel.split("/")[:-1]:
        folder = os.path.join(folder, part)
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(folder, 0o777)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise FleetError("BAD_PATH", f"{rel!r}: {os.path.relpath(folder, worktree)!r} is not a folder "
                                         "(a link or a file): nothing is written through it")
    return folder


def _write(worktree: str, rel: str, mode: str, body: bytes) -> None:
    folder = _parent(worktree, rel, create=True)
    target = os.path.join(folder, os.path.basename(rel))
    try:
        if stat.S_ISDIR(os.lstat(target).st_mode):
            raise FleetError("BAD_PATH", f"{rel!r} is a folder now; move it away to restore the file")
    except FileNotFoundError:
        pass
    if mode == "120000":
        tmp = os.path.join(folder, f".fleetdeck-restore-{os.getpid()}-{os.path.basename(rel)}"[:255])
        os.symlink(body, tmp)
        os.replace(tmp, target)
        return
    umask = os.umask(0)
    os.umask(umask)
    replace_file(target, body, (0o777 if mode == "100755" else 0o666) & ~umask)


def _remove(worktree: str, rel: str) -> None:
    folder = _parent(worktree, rel, create=False)
    if folder is None:
        return
    target = os.path.join(folder, os.path.basename(rel))
    try:
        if not stat.S_ISDIR(os.lstat(target).st_mode):
            os.unlink(target)
    except FileNotFoundError:
        pass


def _restore_index(shadow: Shadow, tree: WorkTree, index_tree: str) -> None:
    """The staged state back: the blobs and trees the repository lacks are copied into its store first (a pack
    from the shadow store, unpacked there: the index's cache tree must never name a tree only the shadow
    store holds), then `read-tree` sets the index. The working tree is not touched."""
    listing = shadow.git(["ls-tree", "-r", "-t", "-z", index_tree]).stdout
    shas = sorted({index_tree} | {e.split(b" ")[2].split(b"\t")[0].decode() for e in listing.split(b"\0")
                                  if e and not e.startswith(b"160000")})
    check = run_git(tree.path, ["cat-file", "--batch-check"], input_bytes=("\n".join(shas) + "\n").encode()).stdout
    missing = [line.split(b" ")[0].decode() for line in check.splitlines() if line.endswith(b" missing")]
    if missing:
        pack = shadow.git(["pack-objects", "--stdout"], input_bytes=("\n".join(missing) + "\n").encode(),
                          max_bytes=4 * 1024 ** 3).stdout
        run_git(tree.path, ["unpack-objects", "-q"], input_bytes=pack, timeout=120.0)
    run_git(tree.path, ["read-tree", index_tree], timeout=120.0)
