"""One working tree's shadow store: a bare git repository in fleetdeck's data folder (0700) that holds its
snapshots and borrows the repository's objects read-only.

Layout of `<data dir>/snapshots/<key>/`:
- `objects/`, `refs/snapshots/<id>`: the snapshots, one commit each, kept alive by their own ref;
- `worktree`: the working tree's path (the key is a hash of it); `borrows`: the repository's object folder;
- `log.jsonl`: one line of metadata per snapshot, appended after its ref exists (the fast listing);
- `lock`: held while a snapshot is taken, pruned or restored, so two processes never interleave.

The repository's object directory is never written: fleetdeck writes blobs and commits itself
(fleet/snapshot/objects.py) and git writes trees with no alternate in sight. Reads name the repository's
objects as an alternate through the environment (`GIT_ALTERNATE_OBJECT_DIRECTORIES`), so unchanged files
cost nothing and nothing git reads is ever freshened.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from fleet.errors import FleetError
from fleet.git.command import UNGUARDED
from fleet.git.run import GitResult, run_git
from fleet.snapshot.config import snapshot_settings

LOCK_TIMEOUT = 30.0
_NAME = re.compile(r"[^A-Za-z0-9._-]+")



def snapshots_root(db_path: str | os.PathLike[str]) -> Path:
    """Where every shadow store lives: `[snapshots] dir`, else `snapshots/` beside the index."""
    configured = snapshot_settings().get("dir")
    return Path(os.path.expanduser(configured)) if configured else Path(db_path).parent / "snapshots"


def store_key(worktree: str) -> str:
    """A folder name for a working tree: readable, and unique by a hash of its real path."""
    name = _NAME.sub("-", os.path.basename(worktree.rstrip("/")) or "root")[:40]
    return f"{name}-{hashlib.sha256(worktree.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"


@dataclass(frozen=True)
class Shadow:
    """A working tree's shadow store and the repository objects it may read."""

    dir: Path
    worktree: str
    repo_objects: str

    @property
    def objects(self) -> Path:
        return self.dir / "objects"

    def git(self, args: list[str], *, read_repo: bool = True, input_bytes: bytes | None = None,
            env: dict[str, str] | None = None, ok_codes: tuple[int, ...] = (0,),
            max_bytes: int = 256 * 1024 * 1024) -> GitResult:
        """git in the shadow store; `read_repo` lets it read the repository's objects (never for a write)."""
        extra = {"GIT_DIR": str(self.dir)}
        if read_repo:
            extra["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = self.repo_objects
        if env:
            extra.update(env)
        return run_git(self.dir, args, input_bytes=input_bytes, extra_env=extra, ok_codes=ok_codes,
                       max_bytes=max_bytes, mode=UNGUARDED, timeout=120.0)

    @contextlib.contextmanager
    def locked(self, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
        """The store's lock (a second process waits for the first, up to `timeout`)."""
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise FleetError("TIMEOUT", f"the snapshot store of {self.worktree} is busy") from None
                    time.sleep(0.02)
            yield
        finally:
            os.close(fd)

    # --- the snapshots' list ---------------------------------------------------------------------------

    def ref_path(self, snapshot_id: str) -> Path:
        return self.dir / "refs" / "snapshots" / snapshot_id

    def add(self, meta: dict) -> None:
        """Make a snapshot visible: its ref (atomically), then its line in the log."""
        ref = self.ref_path(meta["id"])
        tmp = ref.with_name(f".{meta['id']}.tmp")
        tmp.write_text(meta["id"] + "\n", encoding="ascii")
        os.replace(tmp, ref)
        with open(self.dir / "log.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(meta, separators=(",", ":"), sort_keys=True) + "\n")

    def entries(self) -> list[dict]:
        """Every kept snapshot's metadata, oldest first (a log line whose ref is gone was pruned, or its
        process died before the ref: never listed)."""
        try:
            lines = (self.dir / "log.jsonl").read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        kept = set(os.listdir(self.dir / "refs" / "snapshots"))
        out = []
        for line in lines:
            try:
                meta = json.loads(line)
            except ValueError:          # a line cut by a crash mid-write
                continue
            if isinstance(meta, dict) and meta.get("id") in kept:
                out.append(meta)
        return out

    def rewrite_log(self, kept: list[dict]) -> None:
        tmp = self.dir / "log.jsonl.tmp"
        tmp.write_text("".join(json.dumps(m, separators=(",", ":"), sort_keys=True) + "\n" for m in kept),
                       encoding="utf-8")
        os.replace(tmp, self.dir / "log.jsonl")

    def find(self, snapshot_id: str) -> dict:
        """A snapshot by its id or a unique prefix of at least 4 characters."""
        if not isinstance(snapshot_id, str) or not re.fullmatch(r"[0-9a-f]{4,40}", snapshot_id):
            raise FleetError("BAD_ARGUMENT", "a snapshot id is 4 to 40 hex digits")
        hits = list({m["id"]: m for m in self.entries() if m["id"].startswith(snapshot_id)}.values())
        if not hits:
            raise FleetError("NOT_FOUND", f"no snapshot {snapshot_id} of {self.worktree}")
        if len(hits) > 1:
            raise FleetError("BAD_ARGUMENT", f"snapshot id {snapshot_id} is ambiguous: give more digits")
        return hits[0]


@dataclass(frozen=True)
class WorkTree:
    """The working tree a snapshot is of: its path, its own git dir (the index, HEAD) and the common dir
    (objects, refs, the stash)."""

    path: str
    gitdir: str
    commondir: str


def store_for(tree: WorkTree, db_path: str | os.PathLike[str], *, create: bool = False) -> Shadow | None:
    """The shadow store of `tree` (None when it has none and `create` is false)."""
    return open_shadow(snapshots_root(db_path), tree.path, os.path.join(tree.commondir, "objects"),
                       create=create)


def open_shadow(root: Path, worktree: str, repo_objects: str, *, create: bool = True) -> Shadow | None:
    """The shadow store of `worktree`, made (bare, no template, 0700) on first use."""
    folder = root / store_key(worktree)
    shadow = Shadow(folder, worktree, repo_objects)
    if (folder / "HEAD").exists():
        return shadow
    if not create:
        return None
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    folder.mkdir(mode=0o700, exist_ok=True)
    for sub in ("objects/info", "objects/pack", "refs/snapshots", "refs/heads", "refs/tags"):
        (folder / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
                                   "\tlogAllRefUpdates = false\n[gc]\n\tauto = 0\n\tpackRefs = false\n", encoding="ascii")
    (folder / "worktree").write_text(worktree + "\n", encoding="utf-8", errors="surrogateescape")
    (folder / "borrows").write_text(repo_objects + "\n", encoding="utf-8", errors="surrogateescape")
    (folder / "HEAD").write_text("ref: refs/heads/main\n", encoding="ascii")
    return shadow


def shadows(root: Path) -> list[Shadow]:
    """Every shadow store under `root` (for budgets across the fleet), with the objects each borrows."""
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir()):
        try:
            worktree = (folder / "worktree").read_text(encoding="utf-8", errors="surrogateescape").strip()
            borrows = (folder / "borrows").read_text(encoding="utf-8", errors="surrogateescape").strip()
        except OSError:
            continue
        out.append(Shadow(folder, worktree, borrows))
    return out
