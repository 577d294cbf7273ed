"""The live watcher: keeps the index fresh while people and agents work, and is the index's only writer.

What it watches (watchfiles/inotify, a handful of watches a repo instead of ~270 for a whole `.git`):
each repo's git dir non-recursively (HEAD, index, packed-refs, MERGE_HEAD, rebase-*, ...), its `worktrees/`
dir and each linked worktree's own git dir non-recursively, and `refs/` + `logs/` recursively. Any event
means "re-read this repo" (debounced per repo) through `fleet.index.scan.refresh_repo`, which also appends reflog
lines and turns them into events. Working-tree edits never touch `.git`, so a periodic sweep re-reads
recently active repos often and every repo now and then; a slower discovery sweep finds new repos under the
roots and marks vanished ones gone.

Robustness: paths are checked before watching and the watch set is rebuilt (new notifier first, old one
closed after, so nothing is missed) whenever a repo's set changes; a missing path never stops the watcher.
When inotify runs out of watches or instances the watcher switches to polling, logs it and says so in the
index (polling compares mtimes in whole seconds: a second change to a file within the same second is only
seen by the next sweep) (`meta` key `watcher`: {pid, started_at, mode, heartbeat_at, repos, watches, paths, backlog, ...}).
One watcher per index: an fcntl lock on `<db>.watcher.lock`.

Extension point: `register_periodic(fn, every_s)` for periodic work (agent presence, ...) that should run
wherever a watcher runs (`fleetdeck watch`, `fleetdeck serve`).
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import inspect
import logging
import os
import signal
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from watchfiles._rust_notify import RustNotify

from fleet.index.discovery import Found, common_dir
from fleet.errors import FleetError
from fleet.index.freshness import WATCHER_KEY
from fleet.index.pool import IndexPool
from fleet.index.store import Index
from fleet.repo.record import iso, read_repo
from fleet.repo.scope import inside
from fleet.index.scan import discover_all, ingest, refresh_repo

log = logging.getLogger("fleetdeck.watcher")

# Entries of a git dir whose change means the repo's state may have changed.
INTERESTING = frozenset({
    "HEAD", "index", "packed-refs", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD",
    "BISECT_LOG", "config", "rebase-merge", "rebase-apply", "sequencer", "refs", "logs", "worktrees", "locked",
    "gitdir",
})
IGNORED_SUFFIXES = (".lock", ".new")
STEP_MS = 20          # quiet period before watchfiles hands over a batch
DEBOUNCE_MS = 1600    # upper bound on one batch
POLL_DELAY_MS = 300   # polling fallback interval
MAX_ROUTE_DEPTH = 32  # ref names nest (refs/heads/a/b/c); deeper than this is not a ref

OnChange = Callable[[list[int]], "Awaitable[None] | None"]


# --- periodic hooks ---------------------------------------------------------------------------------------

@dataclass
class Periodic:
    fn: Callable[[Index], object]
    every_s: float
    name: str
    next_at: float = 0.0
    running: bool = field(default=False)


_periodic: list[Periodic] = []


def register_periodic(fn: Callable[[Index], object], every_s: float, name: str | None = None) -> Callable:
    """Run `fn(index)` every `every_s` seconds wherever a watcher runs (`fleetdeck watch`, `serve`).

    `fn` runs in a worker thread with an `Index` of its own; a run still going is never overlapped by the
    next one; an exception is logged and the hook keeps its schedule. Returns `fn` (usable at import time).
    """
    if every_s <= 0:
        raise ValueError("every_s must be positive")
    _periodic.append(Periodic(fn, float(every_s), name or getattr(fn, "__qualname__", repr(fn))))
    return fn


# --- what to watch -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RepoWatch:
    """One repo's watched dirs: `top` non-recursive (kind "top" or "wtlist"), `trees` recursive."""

    top: tuple[tuple[str, str], ...]
    trees: tuple[str, ...]


def repo_watch(gitdir: str) -> RepoWatch | None:
    """The dirs to watch for a repo whose git dir is `gitdir` (None when it is gone)."""
    git = Path(gitdir)
    if not git.is_dir():
        return None
    common = common_dir(git)
    top: list[tuple[str, str]] = [(str(git), "top")]
    if common != git and common.is_dir():
        top.append((str(common), "top"))
    worktrees = common / "worktrees"
    if worktrees.is_dir():
        top.append((str(worktrees), "wtlist"))
        try:
            top += [(e.path, "top") for e in sorted(os.scandir(worktrees), key=lambda e: e.name)
                    if e.is_dir(follow_symlinks=False)]
        except OSError:
            pass
    trees = tuple(str(common / d) for d in ("refs", "logs") if (common / d).is_dir())
    return RepoWatch(tuple(top), trees)


class _Notifier:
    """One watchfiles RustNotify (one inotify instance, or a poller) read by its own thread."""

    def __init__(self, paths: list[str], recursive: bool, polling: bool,
                 deliver: Callable[[set[tuple[int, str]]], None]) -> None:
        self.paths = paths
        self._rust = _open_rust(paths, recursive, polling)
        self._stop = threading.Event()
        self._deliver = deliver
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"fleetdeck-notify-{'tree' if recursive else 'top'}")
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                got = self._rust.watch(DEBOUNCE_MS, STEP_MS, 500, self._stop)
            except Exception:  # a notifier failing must not take the watcher down: the sweeps still run
                log.exception("file notifications stopped")
                return
            if isinstance(got, set) and got:
                self._deliver(got)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._rust.close()


def _open_rust(paths: list[str], recursive: bool, polling: bool) -> RustNotify:
    """RustNotify over the paths that exist and are readable; a path vanishing meanwhile is retried.

    `ignore_permission_denied` stays False: with True, watchfiles also swallows "OS file watch limit
    reached" and silently watches only part of the tree (observed with watchfiles 1.3).
    """
    for _attempt in range(5):
        live = [p for p in paths if os.access(p, os.R_OK | os.X_OK)]
        try:
            return RustNotify(live, False, polling, POLL_DELAY_MS, recursive, False)
        except (FileNotFoundError, PermissionError):
            continue
    raise FleetError("BAD_PATH", "watched paths keep disappearing while the watch set is built")


def out_of_watches(exc: BaseException) -> bool:
    """inotify ran out of watches (ENOSPC, "OS file watch limit reached") or instances (EMFILE)."""
    text = str(exc)
    return isinstance(exc, OSError) and (
        "watch limit" in text or "Too many open files" in text or exc.errno in (errno.ENOSPC, errno.EMFILE))


def inotify_watch_count(pid: int | str = "self") -> int:
    """inotify watches held by a process: the `inotify wd:` lines of its inotify fds in /proc/PID/fdinfo."""
    total = 0
    base = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(base)
    except OSError:
        return 0
    for fd in fds:
        try:
            with open(f"{base}/{fd}", encoding="ascii", errors="replace") as fh:
                total += sum(1 for line in fh if line.startswith("inotify wd:"))
        except OSError:
            continue
    return total


# --- the watcher ---------------------------------------------------------------------------------------------

class Watcher:
    """Watch the fleet under `roots` (saved roots when None) and keep `index` fresh until stopped.

    `on_change(repo_ids)` (sync or async) is called on the event loop after repos were re-read. Timings are
    keyword arguments so tests and the benchmark can shorten them.
    """

    def __init__(self, index: Index, roots: list[str] | None = None, *, on_change: OnChange | None = None,
                 force_polling: bool = False, workers: int = 2, quiet_s: float = 0.03, max_delay_s: float = 0.3,
                 active_sweep_s: float = 10.0, active_window_s: float = 3600.0, active_limit: int = 50,
                 full_sweep_s: float = 300.0,
                 discovery_s: float = 60.0, heartbeat_s: float = 5.0, rebuild_delay_s: float = 0.2) -> None:
        self.index = index
        self.roots = [os.path.realpath(r) for r in roots] if roots else None
        self.on_change = on_change
        self.polling = force_polling
        self.workers = max(2, workers)
        self.quiet_s, self.max_delay_s = quiet_s, max_delay_s
        self.active_sweep_s, self.active_window_s, self.active_limit = active_sweep_s, active_window_s, active_limit
        self.full_sweep_s, self.discovery_s = full_sweep_s, discovery_s
        self.heartbeat_s, self.rebuild_delay_s = heartbeat_s, rebuild_delay_s
        self.started_at = time.time()
        self._indexes: IndexPool | None = None
        self._watched: dict[str, RepoWatch] = {}
        self._owner: dict[str, tuple[str, str]] = {}
        self._notifiers: dict[bool, _Notifier | None] = {False: None, True: None}
        self._due: dict[str, list[float]] = {}
        self._sweep: deque[str] = deque()
        self._queued: set[str] = set()
        self._inflight: set[str] = set()
        self._sweeping = 0
        self._new: dict[str, Found] = {}
        self._tasks: set[asyncio.Task] = set()
        self._rebuild_wanted = asyncio.Event()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lockfile: int | None = None

    # --- public entry points ------------------------------------------------------------------------------

    def run_forever(self) -> None:
        """Run in the foreground until SIGINT or SIGTERM (the CLI's `fleetdeck watch`)."""
        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await self.run(stop)

        asyncio.run(main())

    async def run(self, stop: asyncio.Event) -> None:
        """Watch until `stop` is set; raises FleetError CONFLICT when another watcher holds this index."""
        self._take_lock()
        self._loop = asyncio.get_running_loop()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="fleetdeck-refresh")
        self._indexes = IndexPool(self.index.path)
        work = asyncio.ensure_future(self._serve())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            done, _ = await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                work.result()
        finally:
            for task in (work, stopper):
                task.cancel()
            await asyncio.gather(work, stopper, return_exceptions=True)
            await self._shutdown()

    def status(self) -> dict:
        """What the dashboard shows about the watcher (also written to `meta` as the heartbeat)."""
        return {
            "pid": os.getpid(), "started_at": iso(self.started_at), "mode": "polling" if self.polling else "inotify",
            "heartbeat_at": iso(time.time()), "repos": len(self._watched),
            "watches": 0 if self.polling else inotify_watch_count(),
            "paths": sum(len(n.paths) for n in self._notifiers.values() if n),
            "backlog": len(self._due) + len(self._sweep) + len(self._inflight),
            "roots": self._roots(), "stopped_at": None,
        }

    # --- lifecycle -------------------------------------------------------------------------------------------

    def _take_lock(self) -> None:
        path = str(self.index.path) + ".watcher.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise FleetError("CONFLICT", f"another watcher (pid {holder}) is already writing to {self.index.path}") \
                from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lockfile = fd

    async def _serve(self) -> None:
        if self.roots:
            for root in self.roots:
                self.index.add_root(root)
        await self._discover(initial=True)
        await self._rebuild()
        self._enqueue([p for p in self._watched if p not in self._new])  # catch up on unwatched time
        self._write_meta(self.status())
        log.info("watching %d repositories (%s)", len(self._watched), "polling" if self.polling else "inotify")
        async with asyncio.TaskGroup() as group:
            group.create_task(self._schedule())
            group.create_task(self._rebuild_loop())
            group.create_task(self._every(self.active_sweep_s, self._sweep_active))
            group.create_task(self._every(self.full_sweep_s, self._sweep_all))
            group.create_task(self._every(self.discovery_s, self._discover))
            group.create_task(self._every(self.heartbeat_s, self._heartbeat))
            group.create_task(self._run_periodic())

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        notifiers = [n for n in self._notifiers.values() if n]
        self._notifiers = {False: None, True: None}
        pool = self._pool
        await asyncio.to_thread(lambda: ([n.close() for n in notifiers],
                                         pool.shutdown(wait=True, cancel_futures=True) if pool else None))
        final = dict(self.status(), stopped_at=iso(time.time()), backlog=0)
        await asyncio.to_thread(self._write_meta, final)
        if self._indexes is not None:
            self._indexes.close()
        if self._lockfile is not None:
            fcntl.flock(self._lockfile, fcntl.LOCK_UN)
            os.close(self._lockfile)
            self._lockfile = None
        log.info("watcher stopped")

    def _thread_index(self) -> Index:
        return self._indexes.get()

    def _write_meta(self, value: dict) -> None:
        self._thread_index().set_meta(WATCHER_KEY, value)

    async def _every(self, seconds: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await job()
            except Exception:
                log.exception("watcher job %s failed", job.__name__)

    async def _heartbeat(self) -> None:
        await asyncio.to_thread(lambda: self._write_meta(self.status()))

    # --- events -> refreshes ---------------------------------------------------------------------------------

    def _deliver(self, changes: set[tuple[int, str]]) -> None:
        """Called from a notifier thread: hand the batch to the event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._on_changes, changes)
            except RuntimeError:
                pass  # the loop is shutting down

    def _on_changes(self, changes: set[tuple[int, str]]) -> None:
        now = time.monotonic()
        for _change, path in changes:
            repo = self.route(path)
            if repo is None:
                continue
            slot = self._due.get(repo)
            if slot is None:
                self._due[repo] = [now, now]
            else:
                slot[1] = now
        self._wake.set()

    def route(self, path: str) -> str | None:
        """The repo a changed path belongs to, or None when the change cannot matter (locks, objects, ...)."""
        if path.endswith(IGNORED_SUFFIXES):
            return None
        hit = self._owner.get(path)
        if hit:
            return hit[0]
        parent, name = os.path.split(path)
        hit = self._owner.get(parent)
        if hit:
            return hit[0] if hit[1] != "top" or name in INTERESTING else None
        for _ in range(MAX_ROUTE_DEPTH):
            parent, rest = os.path.split(parent)
            if not rest:
                return None
            hit = self._owner.get(parent)
            if hit:
                return hit[0] if hit[1] == "tree" else None
        return None

    async def _schedule(self) -> None:
        """Start due refreshes: watched events first (debounced per repo), sweeps only with a worker to spare."""
        while True:
            self._wake.clear()
            now = time.monotonic()
            next_at: float | None = None
            for repo, (first, last) in list(self._due.items()):
                at = min(first + self.max_delay_s, last + self.quiet_s)
                if repo in self._inflight:
                    continue
                if at <= now and len(self._inflight) < self.workers:
                    del self._due[repo]
                    self._start(repo, sweep=False)
                elif at > now:
                    next_at = at if next_at is None else min(next_at, at)
            while self._sweep and self._sweeping < self.workers - 1 and len(self._inflight) < self.workers - 1:
                repo = self._sweep.popleft()
                self._queued.discard(repo)
                if repo not in self._inflight and repo not in self._due:
                    self._start(repo, sweep=True)
            timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass

    def _start(self, repo: str, sweep: bool) -> None:
        self._inflight.add(repo)
        self._sweeping += sweep
        task = asyncio.ensure_future(self._refresh_task(repo, sweep))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh_task(self, repo: str, sweep: bool) -> None:
        try:
            ids, watch_changed = await self._loop.run_in_executor(self._pool, self._refresh, repo)
        except Exception:
            log.exception("could not re-read %s", repo)
            return
        finally:
            self._inflight.discard(repo)
            self._sweeping -= sweep
            self._wake.set()
        if watch_changed:
            self._rebuild_wanted.set()
        if ids:
            await self._notify(ids)

    def _refresh(self, repo: str) -> tuple[list[int], bool]:
        """Re-read one repo (a worker thread). Returns (changed repo ids, whether its watch set changed)."""
        index = self._thread_index()
        found = self._new.pop(repo, None)
        if found is not None:
            [repo_id] = ingest(index, [(found, read_repo(found))])
            gitdir = found.gitdir
        else:
            refresh_repo(index, repo)
            row = index.conn.execute("select id, gitdir, gone from repos where path = ?", (repo,)).fetchone()
            if row is None:
                return [], False
            repo_id, gitdir, gone = row
            if gone:
                return [repo_id], repo in self._watched
        return [repo_id], repo_watch(gitdir) != self._watched.get(repo)

    async def _notify(self, ids: list[int]) -> None:
        if self.on_change is None:
            return
        try:
            result = self.on_change(ids)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("on_change callback failed")

    def _enqueue(self, repos: list[str]) -> None:
        for repo in repos:
            if repo not in self._queued:
                self._queued.add(repo)
                self._sweep.append(repo)
        self._wake.set()

    # --- sweeps -------------------------------------------------------------------------------------------------

    def _roots(self) -> list[str]:
        return self.roots if self.roots else self.index.roots()

    def _known(self, index: Index) -> list[tuple[str, str]]:
        """(path, gitdir) of the repos in scope that are not gone."""
        roots = self._roots()
        return [(p, g) for p, g in index.conn.execute("select path, gitdir from repos where gone = 0")
                if any(inside(p, r) for r in roots)]

    async def _sweep_active(self) -> None:
        """Re-read the most recently active repos (working-tree edits never touch .git); the cap keeps a
        freshly cloned fleet, where everything is "recent", from turning this into a constant full sweep."""
        cutoff = iso(time.time() - self.active_window_s)
        rows = self.index.conn.execute(
            "select path from repos where gone = 0 and last_activity >= ? order by last_activity desc limit ?",
            (cutoff, self.active_limit)).fetchall()
        self._enqueue([p for (p,) in rows if p in self._watched])

    async def _sweep_all(self) -> None:
        self._enqueue(list(self._watched))

    async def _discover(self, initial: bool = False) -> None:
        """Find repos created under the roots and mark vanished ones gone."""
        new, gone = await asyncio.to_thread(self._discover_sync)
        now = time.monotonic()
        for found in new:
            self._new[found.path] = found
            self._due.setdefault(found.path, [now, now])
        if gone:
            ids = [r[0] for r in self.index.conn.execute(
                f"select id from repos where path in ({', '.join('?' * len(gone))})", gone)]
            await self._notify(ids)
        if (new or gone) and not initial:
            self._rebuild_wanted.set()
        self._wake.set()

    def _discover_sync(self) -> tuple[list[Found], list[str]]:
        index = self._thread_index()
        roots = self._roots()
        found = discover_all(index, roots)
        present = {f.path for f in found}
        known = [p for p, _g in self._known(index)]
        gone = [p for p in known if p not in present and not os.path.exists(p)]
        index.mark_gone(gone)
        known_set = set(known)
        return [f for f in found if f.path not in known_set], gone

    # --- the watch set ----------------------------------------------------------------------------------------

    async def _rebuild_loop(self) -> None:
        while True:
            await self._rebuild_wanted.wait()
            await asyncio.sleep(self.rebuild_delay_s)
            self._rebuild_wanted.clear()
            try:
                await self._rebuild()
            except Exception:
                log.exception("could not rebuild the watch set")

    async def _rebuild(self) -> None:
        """Recompute every repo's watch set; replace a notifier only when its paths changed."""
        watched = await asyncio.to_thread(self._compute_watch_set)
        for path, found in list(self._new.items()):  # found but not read yet: watch them already
            rw = repo_watch(found.gitdir)
            if rw:
                watched[path] = rw
        owner: dict[str, tuple[str, str]] = {}
        for repo, rw in watched.items():
            for path, kind in rw.top:
                owner.setdefault(path, (repo, kind))
            for path in rw.trees:
                owner.setdefault(path, (repo, "tree"))
        top = sorted(p for p, (_r, k) in owner.items() if k != "tree")
        trees = sorted(p for p, (_r, k) in owner.items() if k == "tree")
        was_polling = self.polling
        replaced = await asyncio.to_thread(self._replace_notifiers, {False: top, True: trees})
        if self.polling and not was_polling:
            # inotify ran out part-way: move the other notifier to polling too (and free its watches)
            replaced = await asyncio.to_thread(self._replace_notifiers, {False: top, True: trees}, True)
        self._owner, self._watched = owner, watched
        if replaced:
            self._write_meta_soon()

    def _write_meta_soon(self) -> None:
        task = asyncio.ensure_future(self._heartbeat())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _compute_watch_set(self) -> dict[str, RepoWatch]:
        watched = {}
        for path, gitdir in self._known(self._thread_index()):
            rw = repo_watch(gitdir) if gitdir else None
            if rw:
                watched[path] = rw
        return watched

    def _replace_notifiers(self, wanted: dict[bool, list[str]], force: bool = False) -> bool:
        """Start a notifier for each changed path list, then close the old one (overlap: no gap)."""
        replaced = False
        for recursive, paths in wanted.items():
            old = self._notifiers[recursive]
            if old is not None and old.paths == paths and not force:
                continue
            new = self._new_notifier(paths, recursive) if paths else None
            self._notifiers[recursive] = new
            if old is not None:
                old.close()
            replaced = True
        return replaced

    def _new_notifier(self, paths: list[str], recursive: bool) -> _Notifier:
        if not self.polling:
            try:
                return _Notifier(paths, recursive, False, self._deliver)
            except OSError as exc:
                if not out_of_watches(exc):
                    raise
                self.polling = True
                log.warning("inotify is exhausted (%s): falling back to polling every %d ms; raise "
                            "fs.inotify.max_user_watches / max_user_instances to get live events back",
                            exc, POLL_DELAY_MS)
        return _Notifier(paths, recursive, True, self._deliver)

    # --- periodic hooks ----------------------------------------------------------------------------------------

    async def _run_periodic(self) -> None:
        while True:
            now = time.monotonic()
            for hook in list(_periodic):
                if not hook.running and now >= hook.next_at:
                    hook.running = True
                    hook.next_at = now + hook.every_s
                    task = asyncio.ensure_future(self._run_hook(hook))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            await asyncio.sleep(0.25)

    async def _run_hook(self, hook: Periodic) -> None:
        try:
            await asyncio.to_thread(lambda: hook.fn(self._thread_index()))
        except Exception:
            log.exception("periodic hook %s failed", hook.name)
        finally:
            hook.running = False
