"""Taking a snapshot: the working tree's exact bytes and the index, as commits in the shadow store.

What runs, and why nothing in the repository changes:
1. `git status --porcelain=v2 -z` in the repository with the read side's rules (no optional locks: the index
   is not rewritten; the repository's filters, hooks and fsmonitor neutralized) names what differs from the
   index and what is untracked and not ignored;
2. each of those files is read by fleetdeck itself (lstat first, O_NOFOLLOW|O_NONBLOCK: a link is stored as
   a link, a FIFO never blocks, a file over `max_file_bytes` is skipped and listed) and written as a blob into
   the shadow store (fleet/snapshot/objects.py); staged blobs and new stash commits are copied there from the
   repository with `cat-file --batch`, a read;
3. a copy of the repository's index (its stat data spares git re-hashing anything) becomes the index tree, and,
   with the working-tree entries applied by `update-index --index-info`, the working-tree tree: `write-tree
   --missing-ok` in the shadow store, with no alternate, so the repository's objects are never freshened;
4. one commit for the index tree, one for the snapshot (its parents: the index commit and the stash tips, so the
   shadow's own gc keeps them), and last its ref, atomically: a process killed midway leaves no snapshot.

A snapshot equal to the store's newest (same trees, HEAD, branch and stash) is not kept. What costs nothing
twice is not done twice: a file whose stat data (inode, size, mtime, ctime) is as at the last snapshot is
not read again (`statcache.json`), and when the index file and every working-tree entry are as then, the
trees are the last snapshot's (no git run beyond the status).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from fleet.errors import FleetError
from fleet.git.config import ConfigError, read_config_file, read_repo_config
from fleet.git.config import parse as parse_config
from fleet.git.files import BrokenRepo, read_file
from fleet.git.run import GitError, run_git
from fleet.snapshot.compare import EMPTY_TREE, discarded_between
from fleet.snapshot.events import record as record_discarded
from fleet.snapshot.config import snapshot_settings
from fleet.snapshot.objects import ZERO, commit_body, object_id, write_object
from fleet.snapshot.retention import due, prune_store
from fleet.snapshot.shadow import Shadow, WorkTree, store_for
from fleet.timespec import iso
from fleet.repo.scope import behind_link

TRIGGERS = ("watch", "sweep", "manual", "mcp", "restore")
MAX_SKIPPED = 200
MAX_STASH_LOG = 1024 * 1024
STAT_CACHE = "statcache.json"   # path -> [ino, size, mtime_ns, ctime_ns, blob]: files not read again


class SnapshotTaken(TypedDict):
    id: str
    worktree: str
    at: str
    trigger: str
    files: int
    bytes_added: int
    skipped: list[dict]
    unchanged: bool


def taken(meta: dict) -> SnapshotTaken:
    """A snapshot just taken as `fleetdeck snapshot` and snapshot.take report it: the store's bookkeeping
    left out, and nothing added when it equals the last one (which is kept instead)."""
    return {"id": meta["id"], "worktree": meta["worktree"], "at": meta["at"], "trigger": meta["trigger"],
            "files": meta["files"], "bytes_added": 0 if meta["unchanged"] else meta["bytes_added"],
            "skipped": meta["skipped"], "unchanged": meta["unchanged"]}


@dataclass
class _Scan:
    """What status said: HEAD, branch, the index entries to apply, the staged blobs to copy."""

    head: str | None = None
    branch: str | None = None
    lines: list[bytes] = field(default_factory=list)
    staged: list[str] = field(default_factory=list)
    files: int = 0
    bytes_added: int = 0
    skipped: list[dict] = field(default_factory=list)
    unmerged: bool = False
    seen: dict = field(default_factory=dict)      # the stat cache: path -> [ino, size, mtime_ns, ctime_ns, sha]
    known: dict = field(default_factory=dict)     # the last snapshot's cache
    folders: dict = field(default_factory=dict)   # path -> whether it is a real folder (not a link)


def valid_trigger(trigger: str) -> str:
    if trigger in TRIGGERS or (trigger.startswith(("hook:", "proposal:")) and 5 < len(trigger) <= 80
                               and trigger.isprintable()):
        return trigger
    raise FleetError("BAD_ARGUMENT", f"unknown snapshot trigger {trigger!r}")


def take(tree: WorkTree, db_path: str | os.PathLike[str], trigger: str, *, agents: list[str] = (),
         command: str | None = None, now: float | None = None, thin: bool = True) -> dict:
    """Snapshot `tree` into its shadow store; the snapshot's metadata, with `unchanged` true (and the newest
    kept snapshot's id) when nothing differs from it. `thin` false leaves the store's thinning to others (a
    process that may be abandoned mid-run must not leave git's gc running without the store's lock)."""
    settings = snapshot_settings()
    if not settings["enabled"]:
        raise FleetError("BAD_ARGUMENT", "snapshots are turned off ([snapshots] enabled = false)")
    valid_trigger(trigger)
    _refuse_sha256(tree)
    shadow = store_for(tree, db_path, create=True)
    with shadow.locked():
        made = take_locked(shadow, tree, db_path, settings, trigger, agents=agents, command=command, now=now)
    if thin and not made["unchanged"] and due(shadow, made["t"], settings["repo_budget_bytes"]):   # never mid-snapshot
        prune_store(shadow, settings, made["t"])
    return made


def take_locked(shadow: Shadow, tree: WorkTree, db_path: str | os.PathLike[str], settings: dict, trigger: str, *,
                agents: list[str] = (), command: str | None = None, now: float | None = None) -> dict:
    """`take` for a caller that already holds the store's lock (a restore snapshots the present first)."""
    now = time.time() if now is None else now
    agents = list(agents)
    entries = shadow.entries()
    last = entries[-1] if entries else None
    scan = _scan(shadow, tree, settings["max_file_bytes"], _load_cache(shadow))
    _copy_blobs(shadow, tree, scan.staged)
    index_sig = _signature(os.path.join(tree.gitdir, "index"))
    lines_key = hashlib.sha1(b"\n".join(sorted(scan.lines))).hexdigest()
    if last and index_sig is not None and last.get("index_sig") == index_sig and last.get("lines_key") == lines_key:
        index_tree, work_tree = last["index_tree"], last["tree"]    # same index, same files: same trees
    else:
        same_index = last is not None and index_sig is not None and last.get("index_sig") == index_sig
        index_tree, work_tree = _trees(shadow, tree, scan, last["index_tree"] if same_index else None)
    _save_cache(shadow, scan.seen)
    stash = stash_tips(tree.commondir)
    if last and (last["tree"], last["index_tree"], last["head"], last["branch"], last["stash"]) == \
            (work_tree, index_tree, scan.head, scan.branch, stash):
        return {**last, "unchanged": True, "skipped": scan.skipped}
    new_tips = [t for t in stash if not last or t not in last["stash"]]
    _copy_stash(shadow, tree, new_tips, scan.head)
    parents = []
    if index_tree is not None:
        parents.append(write_object(shadow.objects, b"commit", commit_body(index_tree, [], "index", now)))
    meta = {"worktree": tree.path, "at": iso(now), "t": now, "trigger": trigger, "agents": sorted(set(agents)),
            "command": command, "head": scan.head, "branch": scan.branch, "stash": stash, "tree": work_tree,
            "index_tree": index_tree, "files": scan.files, "bytes_added": scan.bytes_added,
            "skipped": scan.skipped, "unmerged": scan.unmerged, "index_sig": index_sig, "lines_key": lines_key}
    return _keep(shadow, tree, db_path, last, meta, parents)


def _keep(shadow: Shadow, tree: WorkTree, db_path: str | os.PathLike[str], last: dict | None, meta: dict,
          parents: list[str]) -> dict:
    """Compare a new snapshot with the last, write its commit and make it visible; record discarded work."""
    if last:
        meta["changed_files"], meta["discarded"] = discarded_between(shadow, last, meta)
    else:
        meta["changed_files"], meta["discarded"] = meta["files"], None
    # the commit says what it is on its own (the log can be rebuilt from the refs), and two snapshots of equal
    # content taken in one second still get their own ids
    message = f"fleetdeck snapshot ({meta['trigger']})\n\n" + json.dumps(
        {k: meta[k] for k in ("t", "trigger", "worktree", "head", "branch", "agents", "command")}, sort_keys=True)
    meta["id"] = write_object(shadow.objects, b"commit",
                              commit_body(meta["tree"], [*parents, *meta["stash"]], message, meta["t"]))
    shadow.add(meta)
    if meta["discarded"]:
        record_discarded(db_path, tree.path, meta, last["id"])
    return {**meta, "unchanged": False}


def take_vanished(tree: WorkTree, db_path: str | os.PathLike[str], trigger: str = "sweep",
                  now: float | None = None) -> dict | None:
    """A working tree gone from disk (`git worktree remove --force`, an `rm -rf`) whose newest snapshot held
    files: a last snapshot of nothing, so the uncommitted work it held is seen discarded (None: nothing to
    say, or the tree is still there)."""
    shadow = store_for(tree, db_path)
    if shadow is None or os.path.lexists(tree.path):
        return None
    with shadow.locked():
        entries = shadow.entries()
        last = entries[-1] if entries else None
        if last is None or last["tree"] == EMPTY_TREE:
            return None
        now = time.time() if now is None else now
        empty = write_object(shadow.objects, b"tree", b"")
        meta = {"worktree": tree.path, "at": iso(now), "t": now, "trigger": trigger, "agents": [],
                "command": None, "head": last["head"], "branch": last["branch"],
                "stash": [t for t in stash_tips(tree.commondir) if t in last["stash"]], "tree": empty,
                "index_tree": empty, "files": 0, "bytes_added": 0, "skipped": [], "unmerged": False,
                "index_sig": None, "lines_key": None, "vanished": True}
        return _keep(shadow, tree, db_path, last, meta, [])


# --- status, and the working tree's files ---------------------------------------------------------------

def _untracked_flag(tree: WorkTree) -> str:
    """All untracked files, one by one, unless the repository shows none (`status.showUntrackedFiles=no`,
    a dotfiles repo in $HOME: listing them would walk the whole home folder)."""
    for name in ("config", "config.worktree"):
        base = tree.commondir if name == "config" else tree.gitdir
        try:
            data = read_config_file(os.path.join(base, name))
        except ConfigError:
            continue
        if not data or b"untracked" not in data.lower():
            continue
        try:
            for section, sub, key, value in parse_config(data):
                if section == b"status" and sub is None and key == b"showuntrackedfiles" and value is not None \
                        and value.lower() in (b"no", b"false"):
                    return "--untracked-files=no"
        except ConfigError:
            continue
    return "--untracked-files=all"


def _scan(shadow: Shadow, tree: WorkTree, max_bytes: int, known: dict) -> _Scan:
    out = run_git(tree.path, ["status", "--porcelain=v2", "--branch", "-z", "--no-renames",
                              "--ignore-submodules=all", _untracked_flag(tree)], timeout=120.0).stdout
    scan = _Scan(known=known)
    for record in out.split(b"\0"):
        if not record:
            continue
        kind = record[:1]
        if kind == b"#":
            key, _, value = record[2:].partition(b" ")
            if key == b"branch.oid" and value != b"(initial)":
                scan.head = value.decode("ascii")
            elif key == b"branch.head" and value != b"(detached)":
                scan.branch = os.fsdecode(value)
        elif kind == b"1":
            fields = record.split(b" ", 8)
            xy, mode_index, index_sha, path = fields[1], fields[4], fields[7], fields[8]
            if xy[:1] != b"." and mode_index != b"160000" and index_sha != ZERO.encode():
                scan.staged.append(index_sha.decode("ascii"))
            if xy[1:2] != b"." and mode_index != b"160000":
                _work_entry(shadow, tree, path, scan, max_bytes)
        elif kind == b"u":
            fields = record.split(b" ", 10)
            scan.unmerged = True
            scan.staged += [s.decode("ascii") for s in fields[7:10] if s != ZERO.encode()]
            scan.lines.append(b"0 " + ZERO.encode() + b"\t" + fields[10])
            _work_entry(shadow, tree, fields[10], scan, max_bytes)
        elif kind == b"?":
            _work_entry(shadow, tree, record[2:], scan, max_bytes)
    return scan


def _work_entry(shadow: Shadow, tree: WorkTree, rel: bytes, scan: _Scan, max_bytes: int) -> None:
    """One working-tree path as it is on disk: a blob and its mode, a removal, or a listed skip."""
    path = os.path.join(os.fsencode(tree.path), rel)
    name = os.fsdecode(rel)
    try:
        if behind_link(os.fsencode(tree.path), rel, scan.folders):
            raise FileNotFoundError(path)
        st = os.lstat(path)
    except FileNotFoundError:
        scan.lines.append(b"0 " + ZERO.encode() + b"\t" + rel)
        scan.files += 1
        return
    except OSError as exc:
        _skip(scan, name, f"unreadable: {exc.strerror}")
        return
    if stat.S_ISLNK(st.st_mode):
        body, mode = os.readlink(path), b"120000"
    elif stat.S_ISREG(st.st_mode):
        if st.st_size > max_bytes:
            _skip(scan, name, f"larger than max_file_bytes ({st.st_size} bytes)")
            return
        mode = b"100755" if st.st_mode & 0o100 else b"100644"
        signature = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        cached = scan.known.get(name)
        if cached is not None and cached[:4] == signature and _has(shadow, cached[4]):
            scan.seen[name] = cached            # unchanged since the last snapshot: not read again
            scan.lines.append(mode + b" " + cached[4].encode() + b"\t" + rel)
            scan.files += 1
            return
        body = _read_regular(os.fsencode(tree.path), rel, max_bytes)
        if body is None:
            _skip(scan, name, "changed while it was read")
            return
    elif stat.S_ISDIR(st.st_mode):
        return          # an untracked repository of its own (it has its own snapshots) or an empty folder
    else:
        _skip(scan, name, "not a regular file or a link (FIFO, socket or device)")
        return
    before = len(body)
    sha, written = _store_blob(shadow, body)
    if mode != b"120000":
        scan.seen[name] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, sha]
    scan.bytes_added += before if written else 0
    scan.lines.append(mode + b" " + sha.encode() + b"\t" + rel)
    scan.files += 1


def _read_regular(root: bytes, rel: bytes, max_bytes: int) -> bytes | None:
    """A regular file's bytes, never following a link swapped in after the lstat (for the file or any folder
    on its way: each is opened below the one before with O_NOFOLLOW), never blocking on a FIFO."""
    cloexec = getattr(os, "O_CLOEXEC", 0)
    *folders, name = rel.split(b"/")
    try:
        parent = os.open(root, os.O_RDONLY | os.O_DIRECTORY | cloexec)
    except OSError:
        return None
    try:
        for part in folders:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | cloexec, dir_fd=parent)
            os.close(parent)
            parent = below
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | cloexec, dir_fd=parent)
    except OSError:
        return None
    finally:
        os.close(parent)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = fh.read(max_bytes + 1)
    return None if len(data) > max_bytes else data


def _has(shadow: Shadow, sha: str) -> bool:
    return (shadow.objects / sha[:2] / sha[2:]).exists()


def _store_blob(shadow: Shadow, body: bytes) -> tuple[str, bool]:
    sha = object_id(b"blob", body)
    if (shadow.objects / sha[:2] / sha[2:]).exists():
        return sha, False
    write_object(shadow.objects, b"blob", body)
    return sha, True


def _skip(scan: _Scan, path: str, reason: str) -> None:
    if len(scan.skipped) < MAX_SKIPPED:
        scan.skipped.append({"path": path, "reason": reason})


# --- objects copied from the repository ------------------------------------------------------------------

def _copy_blobs(shadow: Shadow, tree: WorkTree, shas: list[str]) -> None:
    """Staged blobs live only in the repository's store until a commit: once the index moves on, git may
    prune them, so the snapshot keeps its own copy."""
    missing = sorted({s for s in shas if not (shadow.objects / s[:2] / s[2:]).exists()})
    if missing:
        _copy_objects(shadow, tree, missing)


def _copy_stash(shadow: Shadow, tree: WorkTree, tips: list[str], head: str | None) -> None:
    """A stash's commits and the objects only they reach, so a dropped stash can be given back after the
    repository's gc pruned it."""
    if not tips:
        return
    listing = run_git(tree.path, ["rev-list", "--objects", *tips, "--not", *([head] if head else [])],
                      timeout=120.0).stdout.decode("ascii", "replace")
    shas = [line.split(" ", 1)[0] for line in listing.splitlines() if line]
    missing = [s for s in shas if not (shadow.objects / s[:2] / s[2:]).exists()]
    if missing:
        _copy_objects(shadow, tree, missing)


def _copy_objects(shadow: Shadow, tree: WorkTree, shas: list[str]) -> None:
    data = run_git(tree.path, ["cat-file", "--batch"], input_bytes=("\n".join(shas) + "\n").encode(),
                   timeout=120.0, max_bytes=2 * 1024 ** 3).stdout
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        header = data[pos:end].split(b" ")
        if len(header) != 3:        # "<sha> missing": nothing to copy
            pos = end + 1
            continue
        size = int(header[2])
        body = data[end + 1:end + 1 + size]
        write_object(shadow.objects, header[1], body)
        pos = end + 1 + size + 1


# --- the two trees ------------------------------------------------------------------------------------------

def _trees(shadow: Shadow, tree: WorkTree, scan: _Scan, known_index_tree: str | None) -> tuple[str | None, str]:
    """The index tree (None while a conflict leaves unmerged entries; `known_index_tree` when the index file
    is the one the last snapshot read) and the working tree's tree."""
    tmp = shadow.dir / f"index.{os.getpid()}.tmp"
    env = {"GIT_INDEX_FILE": str(tmp)}
    try:
        for copy in (_copy_index, _list_index):     # a copy git cannot read here (a split index): the entries
            try:
                copy(shadow, tree, tmp)
                index_tree = known_index_tree
                if index_tree is None and not scan.unmerged:
                    index_tree = shadow.git(["write-tree", "--missing-ok"], read_repo=False, env=env) \
                        .stdout.decode("ascii").strip()
                if scan.lines:
                    shadow.git(["update-index", "--index-info"], read_repo=False, env=env,
                               input_bytes=b"\n".join(scan.lines) + b"\n")
                work = shadow.git(["write-tree", "--missing-ok"], read_repo=False, env=env).stdout \
                    .decode("ascii").strip()
                return index_tree, work
            except GitError:
                if copy is _list_index:
                    raise
        raise AssertionError("unreachable")
    finally:
        for leftover in (tmp, Path(str(tmp) + ".lock")):
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass


def _copy_index(shadow: Shadow, tree: WorkTree, tmp: Path) -> None:
    """The repository's index file itself: its stat data and cache tree spare git re-hashing anything."""
    try:
        shutil.copyfile(os.path.join(tree.gitdir, "index"), tmp, follow_symlinks=False)
    except FileNotFoundError:           # no index yet (a new repository): an empty one
        tmp.unlink(missing_ok=True)


def _list_index(shadow: Shadow, tree: WorkTree, tmp: Path) -> None:
    """The index rebuilt from `ls-files --stage` (for an index whose copy git cannot read in the shadow
    store: a split index names its shared part in the repository's git dir)."""
    tmp.unlink(missing_ok=True)
    listing = run_git(tree.path, ["ls-files", "--stage", "-z"], timeout=120.0, max_bytes=1024 ** 3).stdout
    # `ls-files --stage` writes `mode sha stage\tpath`: one of the forms `update-index --index-info` reads
    shadow.git(["update-index", "-z", "--index-info"], read_repo=False, env={"GIT_INDEX_FILE": str(tmp)},
               input_bytes=listing)


def _signature(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _load_cache(shadow: Shadow) -> dict:
    try:
        value = json.loads((shadow.dir / STAT_CACHE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _save_cache(shadow: Shadow, seen: dict) -> None:
    tmp = shadow.dir / f"{STAT_CACHE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(seen, separators=(",", ":")), encoding="utf-8")
    os.replace(tmp, shadow.dir / STAT_CACHE)


# --- HEAD's neighbours ----------------------------------------------------------------------------------------

def stash_tips(commondir: str) -> list[str]:
    """Every stash entry's commit, newest first, from the stash's reflog (read as a bounded regular file)."""
    try:
        data = read_file(os.path.join(commondir, "logs", "refs", "stash"), MAX_STASH_LOG, "stash log")
    except BrokenRepo:
        return []
    if not data:
        return []
    tips = []
    for line in data.splitlines():
        fields = line.split(b" ", 2)
        if len(fields) >= 2 and len(fields[1]) == 40:
            tips.append(fields[1].decode("ascii", "replace"))
    return tips[::-1]


def _refuse_sha256(tree: WorkTree) -> None:
    try:
        fmt = read_repo_config([os.path.join(tree.commondir, "config")]).object_format
    except ConfigError as exc:
        raise FleetError("GIT_FAILED", f"cannot read the repository's config: {exc}") from None
    if fmt != "sha1":
        raise FleetError("BAD_ARGUMENT", f"snapshots need a sha1 repository; {tree.path} uses {fmt}")
