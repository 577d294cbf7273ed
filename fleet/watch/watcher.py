"""The live watcher: keeps the index fresh while people and agents work, and is the index's only writer.

It composes the watch package's parts on one asyncio loop:
- `watchset.WatchSet`: the dirs watched per repo, their notifiers (`notifier.Notifier`, watchfiles), the
  per-repo fallback to polling when inotify runs out, and the routing of a changed path to its repo;
- `schedule.RefreshQueue`: which repo to re-read next (events debounced per repo, sweeps with a spare worker);
- `sweeps`: the active-repo and full sweeps (working-tree edits never touch `.git`), discovery of new repos
  and marking vanished ones gone;
- `periodic`: work its host wants run beside it (agent presence).
A re-read goes through `fleet.index.scan.refresh_repo` / `ingest` (read, score, store, turn new reflog lines
into events) on a worker thread with that thread's handle from one `IndexPool`.

The watch set is rebuilt (new notifier first, old one closed after, so nothing is missed) whenever a repo's
set changes; a missing path never stops the watcher. Its state is written to the index's meta (key
`watcher`: {pid, started_at, mode (`starting` until the watch set is built), heartbeat_at, repos, polled,
watches, paths, backlog, roots, stopped_at, reverify, live_at}) every few seconds; `status()` is that record. One
watcher per index: an fcntl lock on `<db>.watcher.lock`.

A watcher that starts over an index that already holds the fleet re-checks every repo (the index may have
missed anything done while no watcher ran) through the scan's batch path (`fleet.index.recheck`: chunks read
and stored in spawned worker processes, off this process's interpreter lock; a repo whose watch mark has not
moved has only its working trees read again, and only the repos that changed are stored again). The repos the
index knows are re-read at once, discovery beside that; the repos discovery adds join the re-check (first in
line), the ones it finds vanished are marked gone. The watch set is built once every repo is read (on a cold
start, once the passes behind the state are done too): built beside the re-check it cost the re-check more
than it saved (its build holds this process's interpreter lock for half a second at 1,000 repos, and every
file the re-check's git opens under a watched dir is an event to read), and beside a cold start's history
pass it took a core from the workers reading it. Every repo read before the watch set was up carries the mark taken before its read
(`fleet.git.mark`); once the watch is up, a repo whose mark moved is read again, so a change made in
between is not lost, and only then is the watcher live (`live_at`). The re-check is finished when every repo
was read. Its progress is part of the record (`reverify`: {total, done, figures_from, started_at,
finished_at}; `total` grows by the repos discovery adds), written per chunk (at most every
PROGRESS_EVERY_S), so a dashboard served at once from the last known state can say how far the re-check is
and how old its figures are. A repo the index has never seen is stored with its state alone; once every
repo is read, the re-check's workers make the diverged ones' merge predictions (handed to them first) and
read those repos' reflog history and events (`_behind_state`, both handed over before the watch set is
built; both counted in `backlog`), so a never-seen fleet's queue is complete first. On a cold start (`cold`,
fleet.watch.coldstart) the workers were forked, and handed the fleet, before the host loaded: the watcher
takes them over and starts at once. `claim()` takes the lock and records the re-check as due before any work
starts; `on_rechecked` is called once the start-up work is over (re-check, watch set, marks: the host builds
what can wait until then). With `once` (`serve --no-watch`) the watcher re-checks the fleet and stops: no watch set, no
sweeps, its record's mode `once`.
"""

from __future__ import annotations

import asyncio
import fcntl
import inspect
import logging
import os
import signal
import threading
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Awaitable, Callable, Sequence

import watchfiles

from fleet.git.layout import Found
from fleet.index.freshness import WATCHER_KEY, freshness
from fleet.index.pool import IndexPool
from fleet.index.recheck import (Checked, Entry, entry_paths, history_in_worker, in_worker, predictions_in_worker,
                                 process_pool, recheck_chunk, release_pool)
from fleet.index.scan import CHUNK, chunks, default_workers, ingest, ingest_history, ingest_predictions, refresh_repo
from fleet.index.store import Index
from fleet.repo.record import read_repo
from fleet.timespec import iso
from fleet.watch.coldstart import ColdStart, take_lock
from fleet.watch.notifier import inotify_watch_count
from fleet.watch.periodic import Periodic, PeriodicSchedule
from fleet.watch.schedule import RefreshQueue
from fleet.watch.sweeps import active_repos, discover_changes, known_repos
from fleet.git.mark import moved
from fleet.watch.watchset import RepoWatch, WatchSet, repo_watch

log = logging.getLogger("fleetdeck.watcher")

OnChange = Callable[[list[int]], "Awaitable[None] | None"]

PROGRESS_EVERY_S = 0.5  # how often the re-check's progress reaches the index's meta while it runs
WATCH_COUNT_EVERY_S = 5.0  # how often the record's `watches` is counted again (/proc: ~50 ms at 15,000)


class Watcher:
    """Watch the fleet under `roots` (saved roots when None) and keep `index` fresh until stopped.

    `on_change(repo_ids)` (sync or async) is called on the event loop after repos were re-read; `periodic`
    hooks run beside the watcher. With `once` it re-checks the fleet and stops (see the module docstring).
    Timings are keyword arguments so tests and the benchmark can shorten them.
    """

    def __init__(self, index: Index, roots: list[str] | None = None, *, on_change: OnChange | None = None,
                 periodic: Sequence[Periodic] = (), force_polling: bool = False, workers: int = 2,
                 quiet_s: float = 0.03, max_delay_s: float = 0.3, active_sweep_s: float = 10.0,
                 active_window_s: float = 3600.0, active_limit: int = 50, full_sweep_s: float = 300.0,
                 discovery_s: float = 60.0, heartbeat_s: float = 5.0, rebuild_delay_s: float = 0.2,
                 once: bool = False, on_rechecked: Callable[[], None] | None = None,
                 cold: ColdStart | None = None) -> None:
        self.index = index
        self.roots = [os.path.realpath(r) for r in roots] if roots else None
        self.on_change = on_change
        self.workers = max(2, workers)
        self.active_sweep_s, self.active_window_s, self.active_limit = active_sweep_s, active_window_s, active_limit
        self.full_sweep_s, self.discovery_s = full_sweep_s, discovery_s
        self.heartbeat_s, self.rebuild_delay_s = heartbeat_s, rebuild_delay_s
        self.once = once
        self.on_rechecked = on_rechecked
        self.started_at = time.time()
        self._watch = WatchSet(self._deliver, force_polling)
        self._queue = RefreshQueue(self.workers, quiet_s, max_delay_s)
        self._periodic = PeriodicSchedule(list(periodic))
        self._new: dict[str, Found] = {}  # found by discovery, not read yet
        self._tasks: set[asyncio.Task] = set()
        self._rebuild_wanted = asyncio.Event()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._pool: IndexPool | None = None
        self._lockfile: int | None = None
        self._reverify: dict | None = None  # the start-up re-check's progress (see the module docstring)
        self._recheck_pool: ProcessPoolExecutor | None = None
        self._early: dict[str, tuple[str, str, bytes]] = {}  # read before the watch set was up: git dirs, mark
        self._read_all = asyncio.Event()  # the re-check has read every repo (the first watch set waits for it)
        self._up = asyncio.Event()  # the first watch set is up and the early reads are checked
        self._behind_done = asyncio.Event()  # the passes behind the state (predictions, history) are done
        self._live_at: str | None = None  # when that was (ISO): from then on no change is missed
        self._watches: tuple[int, float] | None = None  # (inotify watches, when counted)
        self._progress_at = 0.0
        self._meta_lock = threading.Lock()
        self._started = False  # the watch set is built: until then the record's mode is `starting`
        self._history_left = 0  # repos of the history backlog its pass has still to read
        self._predictions_left = 0  # repos of the prediction backlog its pass has still to predict
        self._cold = cold  # a cold start begun before the host loaded (fleet.watch.coldstart)
        if cold is not None:
            self._recheck_pool, self._lockfile, cold.taken = cold.pool, cold.lockfile, True

    # --- public: running it -------------------------------------------------------------------------------

    def run_forever(self) -> None:
        """Run in the foreground until SIGINT or SIGTERM (the CLI's `fleetdeck watch`)."""
        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await self.run(stop)

        asyncio.run(main())

    def claim(self) -> None:
        """Take this index's watcher lock (FleetError CONFLICT when another watcher holds it), add the roots,
        and record that the fleet's repos are about to be re-checked, with the time the index's figures are
        from. Quick (no repository is read): a host serving the index at once calls it before it serves, so
        its first page already shows the re-check; `run` calls it when the host did not."""
        if self._reverify is not None:
            return
        if self._lockfile is None:  # (a cold start took it already)
            self._take_lock()
        for root in self.roots or ():
            self.index.add_root(root)
        known = known_repos(self.index, self._roots())
        self._reverify = {"total": len(known), "done": 0, "figures_from": freshness(self.index)["indexed_at"],
                          "started_at": iso(time.time()), "finished_at": None}
        self._write_status(self.index)

    async def run(self, stop: asyncio.Event, after: Callable[[], Awaitable[object]] | None = None) -> None:
        """Watch until `stop` is set, starting the work once `after()` returns (when given); raises FleetError
        CONFLICT when another watcher holds this index."""
        self.claim()
        self._loop = asyncio.get_running_loop()
        self._workers = ThreadPoolExecutor(self.workers, thread_name_prefix="fleetdeck-refresh")
        self._pool = IndexPool(self.index.path)
        work = asyncio.ensure_future(self._serve(after))
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

    # --- public: what it is doing ----------------------------------------------------------------------------

    def status(self) -> dict:
        """What the dashboard shows about the watcher (also written to the index's meta as the heartbeat)."""
        return {
            "pid": os.getpid(), "started_at": iso(self.started_at),
            "mode": "once" if self.once else self._watch.mode if self._started else "starting",
            "heartbeat_at": iso(time.time()), "repos": len(self._watch.repos()), "polled": len(self._watch.polled()),
            "watches": self._watch_count(), "paths": self._watch.path_count(), "backlog": self._backlog(),
            "roots": self._roots(), "stopped_at": None,
            "reverify": dict(self._reverify) if self._reverify else None, "live_at": self._live_at,
        }

    def _watch_count(self) -> int:
        """The process's inotify watches, counted again when the watch set changed or WATCH_COUNT_EVERY_S
        passed (the progress of a re-check is written far more often than that)."""
        now = time.monotonic()
        counted = self._watches
        if counted is None or now - counted[1] >= WATCH_COUNT_EVERY_S:
            counted = self._watches = (inotify_watch_count(), now)
        return counted[0]

    def _backlog(self) -> int:
        """Re-reads waiting or running: the queue's, the repos the re-check has still to read or, read
        before the watch set was up, still to check against their marks, and those whose history its second
        pass has still to read."""
        check = self._reverify
        unread = check["total"] - check["done"] if check and not check["finished_at"] else 0
        return (self._queue.backlog() + max(0, unread) + len(self._early) + self._history_left
                + self._predictions_left)

    def watched_repos(self) -> list[str]:
        """The repos being watched (by inotify or polling)."""
        return self._watch.repos()

    def polled_repos(self) -> list[str]:
        """The watched repos that are polled because inotify could not hold them (or polling was forced)."""
        return self._watch.polled()

    def watch_of(self, repo: str) -> RepoWatch | None:
        """The dirs watched for the repo at `repo`, None when it is not watched."""
        return self._watch.watch_of(repo)

    def periodic_hooks(self) -> list[Periodic]:
        """The periodic work running beside this watcher."""
        return list(self._periodic.hooks)

    # --- lifecycle -------------------------------------------------------------------------------------------

    def _take_lock(self) -> None:
        self._lockfile = take_lock(self.index.path)

    async def _serve(self, after: Callable[[], Awaitable[object]] | None) -> None:
        cold: list[tuple[list[Found], Future]] = []
        if self._cold is not None:  # a cold start's chunks are being read already: no waiting for the host
            cold = await asyncio.wrap_future(self._cold.chunks)
        elif after is not None:
            await after()
        roots = self._roots()
        read = {item.path for chunk, _ in cold for item in chunk}
        known = await asyncio.to_thread(lambda: [p for p, _g in known_repos(self._pool.get(), roots)
                                                 if p not in read])
        self._reverify.update(total=len(known) + len(read), done=0)
        # The known repos are re-read at once, discovery beside that; the watch set once every repo is read.
        discovered: asyncio.Future[list[Found]] = self._loop.create_future()
        recheck = asyncio.ensure_future(self._recheck(known, discovered, cold))
        try:
            # A cold start's own walk just found the fleet: walking the roots again now would take CPU from the
            # reads of every repo's state; it runs once they are in, for what came since.
            discovered.set_result([] if cold else await self._discover(initial=True))
            if not self.once:
                await self._read_all.wait()
                if cold:
                    # and once the passes behind the state are done too: the walk and the watch set's build
                    # (most of a second of this process's CPU at 1,000 repos) would take a core from the
                    # workers reading every repo's history; what changes meanwhile is caught by the marks
                    await self._behind_done.wait()
                    await self._discover(skip=read)
                await self._rebuild(initial=True)
            self._started = True  # before `_watch_up` records the watcher live: that record names the mode
            if not self.once:
                await self._watch_up()
            await asyncio.to_thread(self._write_status)
            if self.once:
                beat = asyncio.ensure_future(self._every(self.heartbeat_s, self._heartbeat))
                try:
                    await recheck
                finally:
                    beat.cancel()
                return
            log.info("watching %d repositories (%s)", len(self._watch.repos()), self._watch.mode)
            async with asyncio.TaskGroup() as group:
                group.create_task(_joined(recheck))
                group.create_task(self._schedule())
                group.create_task(self._rebuild_loop())
                group.create_task(self._every(self.active_sweep_s, self._sweep_active))
                group.create_task(self._every(self.full_sweep_s, self._sweep_all))
                group.create_task(self._every(self.discovery_s, self._discover))
                group.create_task(self._every(self.heartbeat_s, self._heartbeat))
                group.create_task(self._run_periodic())
        finally:
            if not recheck.done():
                recheck.cancel()
                await asyncio.gather(recheck, return_exceptions=True)

    async def _shutdown(self) -> None:
        await asyncio.to_thread(self._watch.close)  # first: nothing else is heard, whatever is still running
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._close_recheck_pool_now()  # when stopped before the re-check began
        workers = self._workers
        await asyncio.to_thread(lambda: (workers.shutdown(wait=True, cancel_futures=True) if workers else None,
                                         self._periodic.close()))
        await asyncio.to_thread(self._write_status, None, {"stopped_at": iso(time.time()), "backlog": 0})
        if self._pool is not None:
            self._pool.close()
        if self._lockfile is not None:
            fcntl.flock(self._lockfile, fcntl.LOCK_UN)
            os.close(self._lockfile)
            self._lockfile = None
        log.info("watcher stopped")

    def _write_status(self, index: Index | None = None, final: dict | None = None) -> None:
        """Write `status()` (updated with `final`) to the meta record; one writer at a time, so a status
        computed earlier never lands after a newer one."""
        with self._meta_lock:
            (index or self._pool.get()).set_meta(WATCHER_KEY, {**self.status(), **(final or {})})

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, seconds: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await job()
            except Exception:
                log.exception("watcher job %s failed", job.__name__)

    async def _heartbeat(self) -> None:
        await asyncio.to_thread(self._write_status)

    def _verified(self, count: int) -> None:
        """`count` more repos re-checked (progress written every PROGRESS_EVERY_S at most, and when all are)."""
        self._reverify["done"] += count
        now = time.monotonic()
        if now - self._progress_at < PROGRESS_EVERY_S and self._reverify["done"] < self._reverify["total"]:
            return
        self._progress_at = now
        self._spawn(self._heartbeat())

    # --- the start-up re-check ---------------------------------------------------------------------------------

    async def _recheck(self, known: list[str], discovered: Awaitable[list[Found]],
                       cold: list[tuple[list[Found], Future]] = ()) -> None:
        """Re-read the `known` repos in chunks, and the repos `discovered` adds (first in line once found):
        in worker processes, or on this process's refresh threads when the known fleet fits one chunk
        (spawning workers would cost more than it saves); progress per chunk; `cold`: chunks a cold start
        has handed the workers already. The re-check is finished once every repo is read; then the history
        of the repos it read for the first time (`_behind_state`). Its workers stay until the watch set is
        up, to check the marks (`_watch_up`)."""
        if self._recheck_pool is None and len(known) > CHUNK:
            self._recheck_pool = process_pool(self.index.path, default_workers())
        pool = self._recheck_pool
        waiting: deque[list[Entry]] = deque(chunks(known))
        all_in = asyncio.Event()  # discovery's repos are in `waiting`
        unchanged = quick = 0

        async def add_discovered() -> None:
            new = await discovered
            self._reverify["total"] += len(new)
            waiting.extendleft(reversed(list(chunks(new))))
            all_in.set()
            if new:
                self._spawn(self._heartbeat())  # the progress's total grew

        async def lane() -> None:
            nonlocal unchanged, quick
            while waiting or not all_in.is_set():
                if not waiting:
                    await all_in.wait()
                    continue
                chunk = waiting.popleft()
                run = (asyncio.wrap_future(pool.submit(in_worker, chunk)) if pool is not None
                       else self._loop.run_in_executor(self._workers, self._recheck_here, chunk))
                checked = await self._rechecked(chunk, run)
                unchanged += checked.unchanged if checked else 0
                quick += len(checked.quick) if checked else 0

        lanes = 2 * default_workers() if pool is not None else self.workers
        try:
            try:
                await asyncio.gather(add_discovered(), *(lane() for _ in range(lanes)),
                                     *(self._rechecked(chunk, asyncio.wrap_future(run)) for chunk, run in cold))
                # Handed to the workers before the watch set is built: its build holds this process's
                # interpreter lock for most of a second at 1,000 repos, and the backlogs asked for beside it
                # waited that long while the workers had nothing to do.
                behind = await self._behind_state(pool)
            finally:
                self._read_all.set()  # (the watch set is then built from what the re-check stored)
            self._reverify["finished_at"] = iso(time.time())
            self._spawn(self._heartbeat())
            log.info("re-checked %d repositories: %d as the index had them (%d by their working trees alone)",
                     self._reverify["done"], unchanged, quick)
            await behind
            self._behind_done.set()
            if not self.once:
                await self._up.wait()
        finally:
            self._behind_done.set()  # (failed or stopped: nothing more to wait for)
            if asyncio.current_task().cancelling():  # stopping: its workers exit on their own
                self._close_recheck_pool_now()
            else:
                await self._close_recheck_pool()  # its workers' exit takes a moment: after the start-up work
        if self.on_rechecked is not None:
            self.on_rechecked()

    async def _behind_state(self, pool: ProcessPoolExecutor | None) -> Awaitable[None]:
        """Hand the passes behind the state to the workers, now and in this order: the merge predictions of
        the diverged repos stored with their state alone (`fleet.index.scan.ingest_predictions`; they move the
        queue), in parts spread over the workers (a prediction takes milliseconds), then those repos' reflog
        history and events (`fleet.index.scan.ingest_history`) in chunks; returns what waits for both. Each
        part stored moves the count the pages show (`fleet.index.freshness`), a prediction's re-ranks its
        repos (`on_change`)."""
        predicting, history = await asyncio.to_thread(self._backlogs)
        self._predictions_left, self._history_left = len(predicting), len(history)
        size = min(CHUNK, -(-len(predicting) // (2 * default_workers()))) or 1

        async def predicted(ids: list[int]) -> None:
            self._predictions_left -= len(ids)
            await self._notify(ids)

        async def read(ids: list[int]) -> None:
            self._history_left -= len(ids)

        return asyncio.gather(
            self._hand_out(pool, predictions_in_worker, ingest_predictions, predicting, size, predicted,
                           "predict the merges"),
            self._hand_out(pool, history_in_worker, ingest_history, history, CHUNK, read, "read the history"))

    def _backlogs(self) -> tuple[list[int], list[int]]:
        index = self._pool.get()
        return index.prediction_backlog()["ids"], index.history_backlog()["ids"]

    def _hand_out(self, pool: ProcessPoolExecutor | None, in_worker_: Callable[[list[list[int]]], int],
                  here: Callable[[Index, list[int]], int], ids: list[int], size: int,
                  done: Callable[[list[int]], Awaitable[None]], what: str) -> Awaitable[None]:
        """Submit `ids` now, in parts of `size` (each stored on its own: the pages' counts move per part): to
        the workers as one share each (the parts dealt out in turn; this process's threads that feed a pool
        wait for its interpreter lock while the watch set is built, and a worker would wait with them), else
        part by part to the refresh threads. Returns what waits for them, calling `done` with the ids of each
        share or part as it ends (failed or not) and beating the heart."""
        parts = [ids[n:n + size] for n in range(0, len(ids), size)]
        if pool is not None:
            shares = [parts[k::default_workers()] for k in range(min(default_workers(), len(parts)))]
            runs = [([i for part in share for i in part], asyncio.wrap_future(pool.submit(in_worker_, share)))
                    for share in shares]
        else:
            runs = [(part, self._loop.run_in_executor(self._workers, lambda part=part: here(self._pool.get(), part)))
                    for part in parts]

        async def wait(done_ids: list[int], running: asyncio.Future) -> None:
            try:
                await running
            except Exception:
                log.exception("could not %s of %d repositories, from id %d", what, len(done_ids), done_ids[0])
            await done(done_ids)
            self._spawn(self._heartbeat())  # the pages' count moved

        return asyncio.gather(*(wait(done_ids, running) for done_ids, running in runs))

    async def _close_recheck_pool(self) -> None:
        pool, self._recheck_pool = self._recheck_pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True, cancel_futures=True)

    def _close_recheck_pool_now(self) -> None:
        """Close the re-check's workers without waiting for them to exit: a stopping watcher never waits on a
        worker process (each exits once its pool is shut down, and with the process that started it)."""
        pool, self._recheck_pool = self._recheck_pool, None
        if pool is not None:
            release_pool(pool)

    def _recheck_here(self, chunk: list[Entry]) -> Checked:
        return recheck_chunk(self._pool.get(), chunk)

    async def _rechecked(self, chunk: list[Entry], run: Awaitable[Checked]) -> Checked | None:
        """Wait for one chunk; then its progress, its changed repos to `on_change`, and its repos' marks kept
        to be checked once the watch set is up (`_watch_up`)."""
        paths = entry_paths(chunk)
        try:
            checked = await run
        except Exception:
            log.exception("could not re-check %d repositories in a worker; reading them here", len(chunk))
            try:
                checked = await self._loop.run_in_executor(self._workers, self._recheck_here, chunk)
            except Exception:
                log.exception("could not re-check %d repositories, from %s", len(chunk), paths[0])
                checked = None
        for path in paths:
            self._new.pop(path, None)
        if checked and not self.once:
            self._early.update(checked.marks)
        self._verified(len(paths))
        if checked and checked.changed:
            await self._notify(checked.changed)
        return checked

    async def _watch_up(self) -> None:
        """The watch set is up: from now on every change in a repo's git files is an event. The repos read
        before that (the re-check's) are read once more when their git files changed since their read (their
        mark moved): on the re-check's workers, which are still there for this, or on a thread. Then the
        watcher is live (`live_at`)."""
        early, pool = list(self._early.items()), self._recheck_pool
        changed: list[str] | None = None
        if pool is not None and len(early) > CHUNK:
            parts = [early[n::default_workers()] for n in range(default_workers())]
            try:
                found = await asyncio.gather(*(asyncio.wrap_future(pool.submit(moved, part)) for part in parts))
                changed = [path for part in found for path in part]
            except Exception:
                log.exception("could not check the re-check's marks in its workers; checking them here")
        if changed is None:
            changed = await asyncio.to_thread(moved, early)
        now = time.monotonic()
        for path in changed:
            self._queue.add(path, now)
        self._early = {}
        self._live_at = iso(time.time())
        self._up.set()
        self._wake.set()
        self._spawn(self._heartbeat())

    # --- events -> refreshes ---------------------------------------------------------------------------------

    def _deliver(self, changes: set[tuple[watchfiles.Change, str]]) -> None:
        """Called from a notifier thread: hand the batch to the event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._on_changes, changes)
            except RuntimeError:
                pass  # the loop is shutting down

    def _on_changes(self, changes: set[tuple[watchfiles.Change, str]]) -> None:
        now = time.monotonic()
        for _change, path in changes:
            repo = self._watch.route(path)
            if repo is not None:
                self._queue.touch(repo, now)
        self._wake.set()

    async def _schedule(self) -> None:
        """Start due re-reads as the queue hands them out; sleep until the next is due or something changes."""
        while True:
            self._wake.clear()
            starts, next_at = self._queue.take(time.monotonic())
            for repo, sweep in starts:
                self._spawn(self._refresh_task(repo, sweep))
            timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass

    async def _refresh_task(self, repo: str, sweep: bool) -> None:
        try:
            ids, watch_changed = await self._loop.run_in_executor(self._workers, self._refresh, repo)
        except Exception:
            log.exception("could not re-read %s", repo)
            return
        finally:
            self._queue.finish(repo, sweep)
            self._wake.set()
        if watch_changed:
            self._rebuild_wanted.set()
        if ids:
            await self._notify(ids)

    def _refresh(self, repo: str) -> tuple[list[int], bool]:
        """Re-read one repo (a worker thread). Returns (changed repo ids, whether its watch set changed)."""
        index = self._pool.get()
        found = self._new.pop(repo, None)
        if found is not None:
            [repo_id] = ingest(index, [(found, read_repo(found))])
            gitdir = found.gitdir
        else:
            refresh_repo(index, repo)
            state = index.state_of(repo)
            if state is None:
                return [], False
            repo_id, gitdir, gone = state
            if gone:
                return [repo_id], self._watch.watch_of(repo) is not None
        return [repo_id], repo_watch(gitdir) != self._watch.watch_of(repo)

    async def _notify(self, ids: list[int]) -> None:
        if self.on_change is None:
            return
        try:
            result = self.on_change(ids)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("on_change callback failed")

    # --- sweeps -------------------------------------------------------------------------------------------------

    def _roots(self) -> list[str]:
        if self.roots:
            return self.roots
        return (self._pool.get() if self._pool else self.index).roots()

    async def _sweep_active(self) -> None:
        paths = await asyncio.to_thread(
            lambda: active_repos(self._pool.get(), self.active_window_s, self.active_limit))
        self._queue.sweep([p for p in paths if self._watch.watch_of(p) is not None])
        self._wake.set()

    async def _sweep_all(self) -> None:
        self._queue.sweep(self._watch.repos())
        self._wake.set()

    async def _discover(self, initial: bool = False, skip: set[str] = frozenset()) -> list[Found]:
        """Find repos created under the roots and mark vanished ones gone; returns the new ones (the first
        time, the re-check reads them; later, the queue), but for those in `skip` (a cold start reads them)."""
        roots = self._roots()
        new, gone = await asyncio.to_thread(lambda: discover_changes(self._pool.get(), roots))
        new = [found for found in new if found.path not in skip]
        now = time.monotonic()
        for found in new:
            self._new[found.path] = found
            if not initial:  # the first ones are read by the re-check
                self._queue.add(found.path, now)
        if gone:
            await self._notify(await asyncio.to_thread(lambda: self._pool.get().ids_of(gone)))
        if (new or gone) and not initial:
            self._rebuild_wanted.set()
        self._wake.set()
        return new

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

    async def _rebuild(self, initial: bool = False) -> None:
        """Recompute every repo's watch set and apply it (new repos first in line for inotify)."""
        changed, gap = await asyncio.to_thread(self._apply_watch_set)
        if changed:
            self._watches = None
        # inotify watches had to be freed before new ones were added: events may have been missed (after the
        # first build, the re-check that follows reads every repo anyway)
        if gap and not initial:
            self._queue.sweep(self._watch.repos())
            self._wake.set()
        if changed:
            self._spawn(self._heartbeat())

    def _apply_watch_set(self) -> tuple[bool, bool]:
        watched: dict[str, RepoWatch] = {}
        for path, found in list(self._new.items()):  # found but not read yet: watch them already
            rw = repo_watch(found.gitdir)
            if rw:
                watched[path] = rw
        for path, gitdir in known_repos(self._pool.get(), self._roots()):
            rw = repo_watch(gitdir) if gitdir and path not in watched else None
            if rw:
                watched[path] = rw
        return self._watch.apply(watched)

    # --- periodic hooks ----------------------------------------------------------------------------------------

    async def _run_periodic(self) -> None:
        while True:
            for i in self._periodic.due(time.monotonic()):
                self._spawn(self._run_hook(i))
            await asyncio.sleep(0.25)

    async def _run_hook(self, i: int) -> None:
        hook = self._periodic.hooks[i]
        try:
            await asyncio.to_thread(lambda: hook.fn(self._pool.get()))
        except Exception:
            log.exception("periodic hook %s failed", hook.name)
        finally:
            self._periodic.done(i)


async def _joined(future: asyncio.Future) -> None:
    """Wait for a task started elsewhere (to run it inside a TaskGroup: its failure stops the group)."""
    await future
