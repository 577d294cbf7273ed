"""Re-check known repositories in bulk: read every one again, store only the ones that changed.

A watcher starting over an index that already holds the fleet (and `serve --no-watch`) must re-read every
repo: anything may have happened while nobody watched. Done repo by repo on the host's threads, that costs
more than a cold scan (the host's interpreter lock, one transaction per repo). So it takes the scan's batch
path: chunks of `CHUNK` repos, each read and stored in a worker process in one transaction. The workers are
spawned, never forked: the host runs threads (the server, the notifiers) and a fork would copy their locks.

Most repos of a quiet fleet are as the index left them. The index holds, with each record, the watch mark
taken just before the read it came from (`fleet.git.mark`: the stat state of everything in its git dirs
the record is read from). A repo whose mark has not moved had nothing in its git dirs changed since: only
its working trees may have, so only they are read again (`fleet.repo.record.read_work_trees`: its `git
status`, and its linked worktrees' and submodules' when it has them, through the full read's own parts)
and compared with the stored fields. A difference, a moved or missing mark (an index stored by an older
fleetdeck), a stored error, a config that includes other files or an `index.lock` sends the repo to the
full read. A repo found as stored has its `scanned_at` and mark moved only if nobody stored it meanwhile
(its row's generation unchanged), so a record another process stored from an older state never gets a
newer mark.

A repo the index has never seen (discovery's, a cold start's every repo) is stored with its state alone,
in the history backlog; its reflog history and events follow (`history_in_worker`, `ingest_history`) once
every repo's state is in, so a never-seen fleet's queue is complete first. A diverged one's merge prediction
(a `git merge-tree` into a throwaway, the state read's costliest part) follows too, first in that pass
(`predictions_in_worker`, `ingest_predictions`): until then its record says the prediction is still to come.

A full read's merge prediction, the costliest read, is kept when its two commits are the ones it was made
for (`fleet.repo.record.predict_merge`). A repo whose fresh record matches the stored one — every column,
every child row (branches, worktrees, submodules, stashes, remotes), its reasons and the size of every
reflog file (so no new reflog line waits) — is not stored again: only its `scanned_at` and mark move, in
one statement per chunk, and the index's generation stays put, so no surface re-renders for nothing. The
comparison runs over the stored row's own columns, so a column the record does not hold counts as a change
(stored again: the safe way to be wrong).

Each repo's mark comes back with the chunk (`Checked.marks`): a watcher whose watch set was not up yet
when the repo was read compares it again once the watch is up, so a change made in between is not lost.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, NamedTuple

from fleet.git.layout import Found, found_at, repo_name
from fleet.index.scan import hold_back, ingest, ingest_history, ingest_predictions, worker_index
from fleet.index.store import Index
from fleet.repo.record import read_repo, read_work_trees
from fleet.timespec import iso
from fleet.attention import attention
from fleet.git.mark import walked, watch_mark

Entry = Found | str  # a repo found by discovery (not in the index yet), or a known repo's path

# Stored columns that are the store's bookkeeping (or compared separately), not fields read from disk.
_BOOKKEEPING = frozenset({"id", "name", "scanned_at", "first_seen", "gone", "gone_at", "score", "reasons",
                          "generation"})
_CHILDREN = ("branches", "worktrees", "submodules", "stash_list", "remotes")


def entry_paths(chunk: list[Entry]) -> list[str]:
    return [e.path if isinstance(e, Found) else e for e in chunk]


class Checked(NamedTuple):
    """One re-checked chunk: every path in it, the ids whose stored state changed (stored again or marked
    gone), how many were found as stored (`quick`: the paths of those found so by their working trees
    alone), and per repo read its git dir, common dir and the watch mark taken before the read."""

    paths: list[str]
    changed: list[int]
    unchanged: int
    marks: dict[str, tuple[str, str, bytes]]
    quick: list[str]


RECHECK_DELAY_ENV = "FLEETDECK_RECHECK_DELAY_S"  # seconds each re-check chunk waits first (tests)


def recheck_chunk(index: Index, chunk: list[Entry]) -> Checked:
    """Read every repo of `chunk` again (only its working trees when its mark has not moved); store those
    that changed (one transaction), mark the vanished ones gone, and only move `scanned_at` (and the mark)
    for the others. `$FLEETDECK_RECHECK_DELAY_S` holds each chunk back that long first: the tests' way to
    look at the pages while a re-check runs, through the real path, however fast the machine reads."""
    hold_back(RECHECK_DELAY_ENV)
    paths = entry_paths(chunk)
    stored_at = index.records(paths)  # one batch of queries for the chunk, not a handful per repo
    ids = [r["id"] for r in stored_at.values()]
    reflog_files = index.reflog_files(ids)
    stored_marks = index.watch_marks(ids)
    found: list[Found] = []
    gone: list[str] = []
    for entry in chunk:
        if isinstance(entry, Found):
            found.append(entry)
            continue
        stored = stored_at.get(entry)
        again = found_at(entry, stored["root"]) if stored is not None else None
        if again is None:
            gone.append(entry)
        else:
            found.append(again)
    changed: list[tuple[Found, dict]] = []
    reads: list[tuple[str, int, int, bytes]] = []
    marks: dict[str, tuple[str, str, bytes]] = {}
    quick: list[str] = []
    for item in found:
        seen_by = walked()  # what the mark's walk lists and stats, the read takes from it
        mark = watch_mark(item.gitdir, item.commondir, seen_by)
        marks[item.path] = (item.gitdir, item.commondir, mark)
        stored = stored_at.get(item.path)
        if stored is not None and mark and stored_marks.get(stored["id"]) == mark:
            at = iso(time.time())
            if work_trees_as_stored(stored, item, read_work_trees(item, stored, seen_by)):
                reads.append((at, stored["id"], stored["generation"], mark))
                quick.append(item.path)
                continue
        # a repo never seen: its merge prediction follows too (`predictions_in_worker`)
        record = read_repo(item, stored and stored["predicted_conflicts"], mark, predict=stored is not None,
                           seen_by=seen_by)
        same = stored_as_read(stored, item, record, reflog_files.get(stored["id"], {}) if stored else {})
        if same is None:
            changed.append((item, record))
        else:
            reads.append((record["scanned_at"], same, stored["generation"], mark))
    stored_ids = ingest(index, changed, history=False) if changed else []  # new repos: history behind
    index.mark_read(reads)
    if gone:
        index.mark_gone(gone)
        stored_ids += index.ids_of(gone)
    return Checked(paths, stored_ids, len(reads), marks, quick)


def work_trees_as_stored(stored: dict, found: Found, fresh: dict | None) -> bool:
    """Whether `fresh` (`read_work_trees` of a repo whose mark has not moved) finds `stored` as it is: every
    field it read again, and the reasons the radar gives for the record they make (some depend on the time)."""
    if fresh is None or stored["gone"] or stored["error"] or stored["path"] != found.path \
            or stored["gitdir"] != found.gitdir or stored["name"] != repo_name(found.path, found.root):
        return False
    for key, value in fresh.items():
        same = _same_rows(stored[key], value) if key in _CHILDREN else _plain(value) == stored[key]
        if not same:
            return False
    return stored["reasons"] == _plain(attention(stored))


def stored_as_read(stored: dict | None, found: Found, record: dict,
                   reflog_files: dict[str, tuple[int, int]]) -> int | None:
    """The repo's id when the index already holds exactly `record` as `stored` (`Index.records`, with
    `reflog_files` its {ref: (inode, size)} rows, `Index.reflog_files`; see the module docstring), else None."""
    if "branches" not in record:  # an unreadable repo: stored again, as a scan would
        return None
    if stored is None or stored["gone"] or stored["path"] != found.path:
        return None
    if stored["name"] != repo_name(found.path, found.root) or stored["reasons"] != _plain(attention(record)):
        return None
    for col, value in stored.items():
        if col not in _BOOKKEEPING and col not in _CHILDREN and _plain(record.get(col)) != value:
            return None
    for key in _CHILDREN:
        if not _same_rows(stored[key], record.get(key) or []):
            return None
    if reflog_files != {ref: (inode, size) for ref, _path, inode, size, _mtime in record["reflog_files"]}:
        return None
    return stored["id"]


def _same_rows(stored: list[dict], fresh: list[dict]) -> bool:
    """The same rows, in any order, compared on the stored rows' columns."""
    if len(stored) != len(fresh):
        return False
    if not stored:
        return True
    keys = list(stored[0])

    def canon(rows: list[dict]) -> list[str]:
        return sorted(json.dumps([_bool_as_int(_plain(row.get(k))) for k in keys]) for row in rows)

    return canon(stored) == canon(fresh)


def _bool_as_int(value: object) -> object:
    return int(value) if isinstance(value, bool) else value


def _plain(value: object) -> object:
    """`value` as it comes back from the index's JSON columns (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value)) if isinstance(value, (list, tuple, dict)) else value


# --- worker processes ---------------------------------------------------------------------------------------

_worker_index: Index | None = None


def process_pool(db_path: str | Path, workers: int, fork: bool = False) -> ProcessPoolExecutor:
    """Worker processes, each with its own handle on the index, for `in_worker` and `history_in_worker`.
    They are started at once (a spawned worker spends a good half second importing), so they get ready while
    the caller does its own preparation. `fork`: forked instead (no import at all), for a caller that has
    started no thread yet (`fleet.watch.coldstart.begin`, before the web stack loads); what the caller made
    until then is frozen out of the collector first, so the workers' collections never walk it (the
    sequence `gc.freeze`'s documentation gives for a fork)."""
    context = multiprocessing.get_context("fork" if fork else "spawn")
    if fork:
        gc.freeze()
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init,
                               initargs=(str(db_path), context.RLock(), os.getpid()))
    for _ in range(workers):
        pool.submit(int)  # a no-op: each submit with no idle worker starts one
    return pool


def release_pool(pool: ProcessPoolExecutor) -> None:
    """Shut `pool` down without waiting for its workers: a thread waits for them instead, holding the pool. A
    spawned worker still starting unpickles the pool's write lock by name; were the pool dropped at once (as
    `shutdown(wait=False)` and the last reference going do), the lock's semaphore would be unlinked under it and
    the worker die with a FileNotFoundError traceback on the person's terminal. (The pool cancels what has not
    started either way: its own manager thread does that.)"""
    threading.Thread(target=pool.shutdown, kwargs={"wait": True, "cancel_futures": True},
                     name="fleetdeck-pool-release", daemon=True).start()


def _worker_init(db_path: str, write_lock: "multiprocessing.synchronize.RLock", parent: int) -> None:
    """The history pass's transactions collided often: the workers take turns at writing as the scan's do. A
    worker forked while its host's start-up paused the collector (`fleet.cli.serve`) runs with it again."""
    global _worker_index
    gc.enable()
    _worker_index = worker_index(db_path, write_lock, parent)


def in_worker(chunk: list[Entry]) -> Checked:
    """`recheck_chunk` in a worker process of `process_pool`."""
    return recheck_chunk(_worker_index, chunk)


def predictions_in_worker(parts: list[list[int]]) -> int:
    """`ingest_predictions` of each part in turn, in a worker process of `process_pool` (`_each`). A worker
    handed its whole share at once needs nothing more from the process that started it, whose threads that
    feed a pool wait for its interpreter lock (held for most of a second while a watch set is built)."""
    return _each(ingest_predictions, parts)


def history_in_worker(parts: list[list[int]]) -> int:
    """`ingest_history` of each part in turn (one transaction each), in a worker process of `process_pool`: a
    share handed over at once, as `predictions_in_worker`'s."""
    return _each(ingest_history, parts)


def _each(ingest_part: Callable[[Index, list[int]], int], parts: list[list[int]]) -> int:
    """`ingest_part` of every part, a failing one not stopping the others (its error raised once all ran)."""
    done, failed = 0, None
    for ids in parts:
        try:
            done += ingest_part(_worker_index, ids)
        except Exception as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    return done
