"""A cold start: a never-seen fleet's state read before the host loads anything else.

`serve` over an index that holds none of the fleet's repos has no last known state to show first, and every
second before the queue is complete is a second the person waits. So, before the web stack is imported
(seconds of CPU on the cores the reads need), `begin` takes the watcher's lock, forks the re-check's worker
processes (no thread runs yet, so a fork is safe, and a forked worker imports nothing) and starts a
discovery thread that hands them chunks as it finds repos, and returns once every worker has its first one
(the host's next step, importing the web stack, holds the interpreter lock in long stretches: found beside
it, the second worker's first chunk reached it ~20 ms later). The workers store each repo's state alone
(`fleet.index.recheck`: a repo the index has never seen joins the history backlog); the watcher the host
starts later takes the lock, the pool and the chunks over (`Watcher(cold=...)`) and, once every repo's
state is in, has the same workers read the history behind it.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from fleet.errors import FleetError
from fleet.git.layout import Found
from fleet.index.recheck import in_worker, process_pool, release_pool
from fleet.index.scan import chunks, default_workers, iter_discover_all
from fleet.index.store import Index, open_index
from fleet.watch.sweeps import known_repos


# How long `begin` waits for every worker to have its first chunk before the host goes on (discovery finds
# that many repos in milliseconds; a bound for a root whose first repos lie deep in a large tree).
FIRST_CHUNKS_WAIT_S = 0.1


@dataclass
class ColdStart:
    """The work a cold start began: its workers, the lock it holds for the watcher, and `chunks`, which
    resolves (discovery done) to every chunk handed to the workers with the future of its result."""

    pool: ProcessPoolExecutor
    lockfile: int
    chunks: Future = field(default_factory=Future)
    taken: bool = False  # a watcher took the pool and the lock over (it closes them)

    def abandon(self) -> None:
        """The host stops before a watcher took this over (a refused `--host`, a port in use): drop the
        chunks not started, let the workers finish the ones they hold, release the lock."""
        release_pool(self.pool)
        fcntl.flock(self.lockfile, fcntl.LOCK_UN)
        os.close(self.lockfile)


def take_lock(db_path: str | os.PathLike[str]) -> int:
    """Take the index's watcher lock (`<db>.watcher.lock`, fcntl) for this process; its descriptor. FleetError
    CONFLICT when another watcher holds it."""
    path = f"{os.fspath(db_path)}.watcher.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise FleetError("CONFLICT", f"another watcher (pid {holder}) is already writing to {db_path}") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def begin(db_path: str | os.PathLike[str]) -> ColdStart | None:
    """Start reading the fleet under the saved roots when the index holds none of its repos; None when it
    does (a warm start: the watcher re-checks behind the first page), when there are no roots, or when
    another watcher holds the index (it keeps it fresh)."""
    with open_index(db_path) as index:
        roots = index.roots()
        if not roots or known_repos(index, roots):
            return None
    try:
        lockfile = take_lock(db_path)
    except FleetError:
        return None
    fork = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    workers = default_workers()
    cold = ColdStart(process_pool(db_path, workers, fork=fork), lockfile)
    started = threading.Event()  # every worker has a chunk, or discovery is over

    def discover() -> None:
        handed: list[tuple[list[Found], Future]] = []
        try:
            with Index(index.path) as own:
                for chunk in chunks(iter_discover_all(own, roots)):
                    handed.append((chunk, cold.pool.submit(in_worker, chunk)))
                    if len(handed) == workers:
                        started.set()
            cold.chunks.set_result(handed)
        except BaseException as exc:  # the watcher's re-check reports it
            cold.chunks.set_exception(exc)
        finally:
            started.set()

    threading.Thread(target=discover, name="fleetdeck-cold-discovery", daemon=True).start()
    started.wait(FIRST_CHUNKS_WAIT_S)
    return cold
