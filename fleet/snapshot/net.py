"""The watcher's part of the safety net: when snapshots are taken without anyone asking.

- A working tree with an agent present (working or open) is watched file by file — its own folders, not
  `.git` nor the folders git ignores, within WATCH_BUDGET folders for the whole fleet (the rest fall back to
  the sweeps, and `live_status()` says which) — so a snapshot follows every burst of edits: once edits pause
  for `pause_s`, and at least every `min_interval_s` while they go on (trigger `watch`).
- Every SWEEP_EVERY_S, a sweep snapshots each working tree the index shows with uncommitted work, and each
  one whose last snapshot held some (that is how a `reset --hard` that left it clean is seen; trigger
  `sweep`), and every linked worktree inside the roots (the index lists them under their repository). A
  snapshot equal to the last is not kept, so a quiet tree costs one `git status`. A tree whose last snapshot
  held work and that is gone (`git worktree remove --force`) gets a last snapshot of nothing: the work is
  seen discarded.

The watcher's host runs `SafetyNet.sweep` and `SafetyNet.tick` as periodic work (fleet/watch/service.py).
Each sweep writes `live_status()` to the index's meta (STATUS_KEY), so the dashboard, in another thread or
process, can say which trees are watched live and which fall back to the sweeps.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import watchfiles

from fleet.errors import FleetError
from fleet.git.run import GitError, run_git
from fleet.git.layout import common_dir
from fleet.git.files import BrokenRepo, read_file
from fleet.index.store import Index
from fleet.presence.store import read_rows
from fleet.timespec import iso
from fleet.repo.scope import RealRoots, real_roots, root_of
from fleet.snapshot.config import snapshot_settings
from fleet.snapshot.retention import prune_all
from fleet.snapshot.shadow import WorkTree, store_for
from fleet.snapshot.take import take, take_vanished
from fleet.snapshot.view import STATUS_KEY

log = logging.getLogger("fleetdeck.snapshots")

SWEEP_EVERY_S = 60.0
TICK_EVERY_S = 0.5
PRUNE_ALL_EVERY_S = 3600.0
WATCH_BUDGET = 20_000       # folders watched for live edits, fleet-wide
PRESENT = ("waiting", "working", "open")


def _ignored_dirs(path: str) -> set[str]:
    """The folders git ignores in a working tree (node_modules, build output...), as absolute paths."""
    try:
        out = run_git(path, ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                      timeout=20.0).stdout
    except GitError:
        return set()
    return {os.path.join(path, os.fsdecode(p).rstrip("/")) for p in out.split(b"\0") if p.endswith(b"/")}


def _folders(path: str, skip: set[str], limit: int) -> int | None:
    """How many folders a recursive watch of `path` costs (None when over `limit`)."""
    count = 0
    for top, dirs, _ in os.walk(path):
        dirs[:] = [d for d in dirs if d != ".git" and os.path.join(top, d) not in skip]
        count += 1
        if count > limit:
            return None
    return count


class LiveWatch:
    """A watchfiles thread over the working trees with an agent present; records when each was edited."""

    def __init__(self) -> None:
        self.trees: dict[str, WorkTree] = {}
        self.fallback: list[str] = []       # wanted, over the budget: left to the sweeps
        self._skip: dict[str, set[str]] = {}
        self._edits: dict[str, list[float]] = {}    # path -> [first edit of the burst, last edit]
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def want(self, trees: list[WorkTree]) -> None:
        """Watch exactly these trees (within the budget); restarts the thread when the set changed."""
        chosen, fallback, used = {}, [], 0
        for tree in sorted(trees, key=lambda t: t.path):
            skip = self._skip.get(tree.path) or _ignored_dirs(tree.path)
            cost = _folders(tree.path, skip, WATCH_BUDGET - used)
            if cost is None:
                fallback.append(tree.path)
                continue
            used += cost
            chosen[tree.path] = tree
            self._skip[tree.path] = skip
        self.fallback = fallback
        if set(chosen) == set(self.trees) and (self._thread is None) == (not chosen):
            return
        self.stop()
        self.trees = chosen
        if chosen:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, args=(list(chosen), self._stop), daemon=True,
                                            name="fleetdeck-live-edits")
            self._thread.start()

    def _keep(self, _change: watchfiles.Change, path: str) -> bool:
        parts = path.split(os.sep)
        if ".git" in parts:
            return False
        for root, skip in self._skip.items():
            if path.startswith(root + os.sep) and any(path == s or path.startswith(s + os.sep) for s in skip):
                return False
        return True

    def _run(self, paths: list[str], stop: threading.Event) -> None:
        try:
            for changes in watchfiles.watch(*paths, watch_filter=self._keep, stop_event=stop, debounce=200,
                                            step=50, raise_interrupt=False, ignore_permission_denied=True):
                now = time.monotonic()
                with self._lock:
                    for _change, changed in changes:
                        root = next((p for p in paths if changed.startswith(p + os.sep)), None)
                        if root is not None:
                            burst = self._edits.setdefault(root, [now, now])
                            burst[1] = now
        except Exception:           # a vanished folder or an inotify limit: the sweeps still cover them
            log.warning("live edit watch stopped", exc_info=True)

    def due(self, now: float, pause_s: float, min_interval_s: float) -> list[WorkTree]:
        """The trees whose edits paused for `pause_s`, or went on for `min_interval_s`: their bursts end."""
        out = []
        with self._lock:
            for path, (first, last) in list(self._edits.items()):
                if now - last >= pause_s or now - first >= min_interval_s:
                    del self._edits[path]
                    if path in self.trees:
                        out.append(self.trees[path])
        return out

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._stop = self._thread = None
        self.trees = {}


class SafetyNet:
    """Sweeps and live watching (see the module docstring); one per watcher."""

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.db_path = Path(db_path)
        self.live = LiveWatch()
        self._held_work: set[str] = set()       # trees whose last snapshot held uncommitted work
        self._seen: dict[str, WorkTree] = {}    # every tree a sweep listed (a gone one is no longer listed)
        self._agents: dict[str, list[str]] = {}
        self._pruned_at = 0.0
        self._settings: dict | None = None
        self.enabled = True

    def sweep(self, index: Index) -> int:
        """Snapshot every tree with uncommitted work now or at its last snapshot; refresh the live set."""
        try:
            settings = snapshot_settings()
        except FleetError as exc:
            log.warning("snapshots: %s", exc.message)
            return 0
        self._settings, self.enabled = settings, settings["enabled"]
        if not self.enabled:
            self.live.stop()
            index.set_meta(STATUS_KEY, self.live_status())
            return 0
        rows = [r for r in index.summaries() if r["bare"] is False]  # bare = 0, as stored
        agents: dict[str, list[str]] = {}
        for p in read_rows(index):
            if p["state"] in PRESENT:
                agents.setdefault(p["repo"], []).append(p["agent"])
        self._agents = agents
        trees = {r["path"]: WorkTree(r["path"], r["gitdir"], _common(r)) for r in rows}
        roots = real_roots(index.roots())
        linked = {t.path: t for r in rows for t in linked_worktrees(_common(r), roots)}
        trees = {**linked, **trees}
        self._seen.update(trees)
        for path in sorted(p for p in self._held_work if p not in trees or not os.path.isdir(p)):
            self._vanished(self._seen[path])        # the tree went, and its uncommitted work with it: say so
        self.live.want([trees[p] for p in agents if p in trees])
        index.set_meta(STATUS_KEY, self.live_status())
        taken = 0
        for row in rows:
            path = row["path"]
            dirty = any(row.get(k) for k in ("staged", "unstaged", "untracked", "conflicted"))
            if dirty or path in self._held_work or self._first_sight(trees[path]):
                taken += self._take(trees[path], "sweep")
        for tree in linked.values():        # not rows of the index: no dirty flags to go by, git status tells
            if trees[tree.path] is tree:
                taken += self._take(tree, "sweep")
        now = time.time()
        if now - self._pruned_at >= PRUNE_ALL_EVERY_S:
            self._pruned_at = now
            prune_all(self.db_path, now)
        return taken

    def tick(self, _index: Index) -> int:
        """Snapshot the live trees whose burst of edits is over."""
        settings = self._settings
        if not self.enabled or settings is None:
            return 0
        due = self.live.due(time.monotonic(), settings["pause_s"], settings["min_interval_s"])
        return sum(self._take(tree, "watch") for tree in due)

    def _first_sight(self, tree: WorkTree) -> bool:
        """A tree never snapshotted gets one baseline (so the first discard has something to compare)."""
        return store_for(tree, self.db_path) is None

    def _take(self, tree: WorkTree, trigger: str) -> int:
        try:
            made = take(tree, self.db_path, trigger, agents=self._agents.get(tree.path, []))
        except (FleetError, OSError) as exc:
            log.info("no snapshot of %s: %s", tree.path, getattr(exc, "message", exc))
            return 0
        if made["files"]:
            self._held_work.add(tree.path)
        else:
            self._held_work.discard(tree.path)
        return 0 if made["unchanged"] else 1

    def _vanished(self, tree: WorkTree) -> None:
        self._held_work.discard(tree.path)
        try:
            take_vanished(tree, self.db_path)
        except (FleetError, GitError, OSError) as exc:     # a whole repository gone: its objects too
            log.info("no last snapshot of the vanished %s: %s", tree.path, getattr(exc, "message", exc))

    def live_status(self) -> dict:
        """Whether the net is on, the trees watched live, those over the budget (left to the sweeps), when."""
        return {"enabled": self.enabled, "watched": sorted(self.live.trees), "fallback": self.live.fallback,
                "at": iso(time.time())}

    def close(self) -> None:
        self.live.stop()


def linked_worktrees(commondir: str, roots: RealRoots) -> list[WorkTree]:
    """A repository's linked worktrees inside the fleet's roots: each `<common dir>/worktrees/<id>/gitdir`
    names its `.git` file (read bounded, never through a link); one that resolves outside every root (the
    file may say anything) is left out, so no sweep reads beyond the fleet."""
    admin = os.path.join(commondir, "worktrees")
    try:
        names = sorted(os.listdir(admin))
    except OSError:
        return []
    out = []
    for name in names:
        gitdir = os.path.join(admin, name)
        try:
            data = read_file(os.path.join(gitdir, "gitdir"), 4096, "worktree gitdir")
        except BrokenRepo:
            continue
        if not data or b"\0" in data:
            continue
        path = os.path.realpath(os.path.dirname(os.fsdecode(data.strip())))
        if root_of(path, roots) is not None and os.path.isdir(path):
            out.append(WorkTree(path, gitdir, commondir))
    return out


def _common(row: dict) -> str:
    """The common dir of a stored repo row: its git dir, or where a linked worktree's `commondir` points."""
    return str(common_dir(Path(row["gitdir"])))
