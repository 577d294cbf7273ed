"""Index the fleet: discover repositories under the roots, read each one, store the records.

Every write of repo records goes through `ingest`: score (fleet.attention) -> read the new reflog lines
(`fleet.index.reflogs`) -> store with a new repo's events (one write transaction) -> record the other events (which asks git whether a move rewrote history, so it runs outside the transaction). The
scan, `refresh_repo` and the watcher call it; storage itself never runs git.

A cold scan spends its time in `git status` and in Python reading git's files and writing SQLite. Threads
cannot spread the Python part over the cores (the GIL; worse, every SQLite call hands the GIL to a reader
thread and waits to get it back), so a scan forks a few worker processes that each read and store chunks of
the fleet, taking turns at the index's write lock, which each holds only to write rows it prepared before
(reflog lines read and parsed, a new repo's events decided). Where forking is unsafe (other threads are
running in this process) the same work runs on a thread pool instead.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator

from fleet.git.layout import Found, found_at
from fleet.procinfo import die_with_parent
from fleet.index.discovery import iter_discover, tracked_fixture
from fleet.index.events import first_events, pruned_before, record_events, record_first_events
from fleet.index import reflogs
from fleet.index.store import Index, Prepared
from fleet.repo.record import make_prediction, read_repo
from fleet.repo.scope import OutOfScope, inside
from fleet.attention import attention

Progress = Callable[[int, int, str], None]
CHUNK = 24  # repos a worker reads, then stores in one transaction
SKIP_KEY = "skip_patterns"
HISTORY_DELAY_ENV = "FLEETDECK_HISTORY_DELAY_S"  # seconds each history chunk waits first (tests, demos)
PREDICTION_DELAY_ENV = "FLEETDECK_PREDICTION_DELAY_S"  # seconds each chunk of merge predictions waits first


def default_workers() -> int:
    return max(2, min(8, os.cpu_count() or 2))


def skip_patterns(index: Index) -> tuple[str, ...]:
    return tuple(index.meta(SKIP_KEY, ()))


def set_skip_patterns(index: Index, patterns: list[str]) -> None:
    index.set_meta(SKIP_KEY, sorted(set(patterns)))


def ingest(index: Index, items: list[tuple[Found, dict]], history: bool = True) -> list[int]:
    """Score, store (one write transaction) and turn new reflog lines into events; returns the repo ids.

    Everything but the writes happens before the write lock is taken: reading and parsing the new reflog
    lines and, for a repo the index does not hold yet (a cold scan's every repo), deciding its events, which
    are then written in the same transaction as its lines. Under the lock the index is checked to stand as it
    was read against (another process may have stored a repo meanwhile: its lines are read again, and its
    events left to `record_events`). The others' events are recorded after the store, since deciding them
    asks git. Without `history`, a readable repo the index does not hold yet is stored with its state alone
    and joins the history backlog: `ingest_history` reads its reflogs and events later, as this would have
    (one whose read failed is stored whole: what of its history is read depends on why, and they are few).
    """
    prepared = index.prepare([(found, record, attention(record)) for found, record in items])
    if not history:
        prepared = [p._replace(deferred=p.repo_id is None and p.record.get("error") is None) for p in prepared]
    prepared = reflogs.read(prepared)
    cut = pruned_before(index)
    firsts = {n: first_events(p.found.path, p.logs, cut) for n, p in enumerate(prepared)
              if p.repo_id is None and p.logs is not None and "branches" in p.record}
    recorded: set[int] = set()
    with index.write() as tx:
        prepared, reread = reflogs.recheck(index, prepared)
        stored = index.store_prepared(prepared)
        if pruned_before(index) == cut:   # else events were pruned since they were decided: record_events
            recorded = record_first_events(tx, stored, {n: e for n, e in firsts.items() if n not in reread})
    ids = [s.repo_id for s in stored]
    record_events(index, [(s.repo_id, s.prepared.found.path) for s in stored
                          if "branches" in s.prepared.record and s.prepared.logs is not None
                          and s.repo_id not in recorded])
    return ids


def _still_waiting(index: Index, repo_ids: list[int], backlog: dict) -> list[dict]:
    """The records of those of `repo_ids` still in `backlog` (a second pass's: history or predictions)."""
    waiting = set(backlog["ids"])
    return index.records_of([i for i in repo_ids if i in waiting])


def ingest_history(index: Index, repo_ids: list[int]) -> int:
    """Read the reflog history of repos in the history backlog and record their events, as a first read
    (`ingest` of a repo the index does not hold yet) would have; returns how many left the backlog. A repo
    gone or unreadable since leaves it with nothing read (its next full read stores what it has).
    `$FLEETDECK_HISTORY_DELAY_S` holds each call back that long first: the tests' (and a demo's) way to
    watch the pages while history is still being read, through the real path."""
    hold_back(HISTORY_DELAY_ENV)
    unread_yet = []
    for record in _still_waiting(index, repo_ids, index.history_backlog()):
        found = None if record["gone"] or record["error"] else found_at(record["path"], record["root"])
        if found is not None:  # read as a repo the index does not hold: every line, each once
            unread_yet.append(Prepared(found, record, {}, None, {}, None, None))
    prepared = [p._replace(repo_id=p.record["id"]) for p in reflogs.read(unread_yet)]
    cut = pruned_before(index)
    firsts = {n: first_events(p.found.path, p.logs, cut) for n, p in enumerate(prepared)}
    unread = sorted(set(repo_ids) - {p.repo_id for p in prepared})
    recorded: set[int] = set()
    with index.write() as tx:
        stored = index.store_history(prepared, unread)
        if pruned_before(index) == cut:   # else events were pruned since they were decided: record_events
            recorded = record_first_events(tx, stored, firsts)
    record_events(index, [(s.repo_id, s.prepared.found.path) for s in stored
                          if s.lines and s.repo_id not in recorded])
    return len(prepared) + len(unread)


def ingest_predictions(index: Index, repo_ids: list[int]) -> int:
    """Make the merge predictions of repos in the prediction backlog (stored by a cold start's state pass
    with `pending_prediction`) as their read would have (`fleet.repo.record.make_prediction`), and store each
    with the reasons it gives the record (one transaction); returns how many left the backlog. A repo gone,
    unreadable or out of its root since leaves it with nothing made (its next full read predicts); one stored
    again meanwhile keeps what that read stored. `$FLEETDECK_PREDICTION_DELAY_S` holds each call back that
    long first: the tests' way to look at the pages while predictions are still to come."""
    hold_back(PREDICTION_DELAY_ENV)
    made = []
    for record in _still_waiting(index, repo_ids, index.prediction_backlog()):
        pending = record["predicted_conflicts"]
        found = None if record["gone"] or not (pending or {}).get("pending") else found_at(record["path"], record["root"])
        if found is None or found.gitdir != record["gitdir"]:
            continue
        try:
            prediction = make_prediction(found, pending)
        except (OutOfScope, OSError):
            continue
        made.append((record["id"], json.dumps(pending, sort_keys=True), prediction,
                     attention({**record, "predicted_conflicts": prediction})))
    index.store_predictions(made, sorted(set(repo_ids) - {m[0] for m in made}))
    return len(set(repo_ids))


def hold_back(variable: str) -> None:
    """Wait as many seconds as `$variable` says (none when unset or not a number), or, when it says
    `SECONDS:PATH`, until PATH exists (SECONDS at most): the tests' way to look at the pages while history or
    a re-check is still running, through the real path; with a PATH the test lets the pass go on (it makes
    the file) as soon as it has looked, instead of waiting out a delay long enough for a loaded machine."""
    seconds, _, release = (os.environ.get(variable) or "").partition(":")
    try:
        wait = max(0.0, float(seconds or 0))
    except ValueError:
        return
    if not release:
        time.sleep(wait)
        return
    deadline = time.monotonic() + wait
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.02)


def discover_all(index: Index, roots: list[str]) -> list[Found]:
    return list(iter_discover_all(index, roots))


def iter_discover_all(index: Index, roots: list[str]) -> Iterator[Found]:
    """Every repo under every root, once (roots may nest), as the walks find them."""
    extra = skip_patterns(index)
    seen: set[str] = set()
    for root in roots:
        if not os.path.isdir(root):
            continue
        for item in iter_discover(root, extra_skip=extra):
            if item.path not in seen:
                seen.add(item.path)
                yield item


def scan(index: Index, roots: list[str] | None = None, progress: Progress | None = None,
         workers: int | None = None) -> dict:
    """Add `roots` (if given) and index every repository under the saved roots; return a summary."""
    started = time.perf_counter()
    if roots:
        for root in roots:
            index.add_root(root)
        targets = [os.path.realpath(r) for r in roots]
    else:
        targets = index.roots()
    missing_roots = [r for r in targets if not os.path.isdir(r)]
    found: list[Found] = []

    def discovered() -> Iterator[Found]:
        for item in iter_discover_all(index, targets):
            found.append(item)
            yield item

    errors: list[dict] = []
    done = 0
    for chunk, chunk_errors in _read_and_store(index, discovered(), workers or default_workers()):
        errors += chunk_errors
        done += len(chunk)
        if progress:
            progress(done, len(found), chunk[-1].path)
    present = {f.path for f in found}
    named = set(targets)
    # Gone: vanished from disk, or a bare repo now known to be files its enclosing repo tracks.
    gone = [p for p in index.known_paths()
            if any(inside(p, r) for r in targets) and p not in present
            and (not os.path.exists(p) or (p not in named and tracked_fixture(p)))]
    index.mark_gone(gone)
    return {
        "roots": targets, "missing_roots": missing_roots, "repos": len(found), "errors": errors,
        "error_count": len(errors), "gone": gone, "elapsed_s": round(time.perf_counter() - started, 3),
    }


def chunks(items: Iterable[Found]) -> Iterator[list[Found]]:
    chunk: list[Found] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _read_and_store(index: Index, found: Iterable[Found], workers: int) -> Iterator[tuple[list[Found], list[dict]]]:
    """Read and store every repo (`found` may still be growing: discovery streams in); yields (chunk, its
    errors) as chunks complete."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        numbered: dict[int, list[Found]] = {}

        def tasks() -> Iterator[tuple[int, list[Found]]]:
            for number, chunk in enumerate(chunks(found)):
                numbered[number] = chunk
                yield number, chunk

        context = multiprocessing.get_context("fork")
        with context.Pool(workers, _worker_init, (str(index.path), context.RLock(), os.getpid())) as pool:
            for number, errors in pool.imap_unordered(_worker_chunk, tasks()):
                yield numbered.pop(number), errors
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for chunk in chunks(found):
            items = list(zip(chunk, pool.map(read_repo, chunk)))
            ingest(index, items)
            yield chunk, _errors(items)


_worker_index: Index | None = None


def worker_index(db_path: str, write_lock: "multiprocessing.synchronize.RLock", parent: int) -> Index:
    """A worker process's index. The workers take turns at writing through one lock of their own: a worker
    waiting for it wakes as soon as the other is done, where SQLite's busy wait would sleep in steps of up to
    100 ms. A killed parent takes its workers with it."""
    die_with_parent(parent)
    index = Index(Path(db_path))
    index.lock = write_lock
    return index


def _worker_init(db_path: str, write_lock: "multiprocessing.synchronize.RLock", parent: int) -> None:
    global _worker_index
    _worker_index = worker_index(db_path, write_lock, parent)


def _worker_chunk(task: tuple[int, list[Found]]) -> tuple[int, list[dict]]:
    """In a worker process: read one chunk of repos and store it; returns (chunk number, its errors)."""
    number, chunk = task
    items = [(item, read_repo(item)) for item in chunk]
    ingest(_worker_index, items)
    return number, _errors(items)


def _errors(items: list[tuple[Found, dict]]) -> list[dict]:
    return [{"path": item.path, "error": record["error"]} for item, record in items if record.get("error")]


def refresh_repo(index: Index, path: str) -> dict | None:
    """Re-read one known repository into the index (its merge prediction kept while its two commits are the
    same); mark it gone if it vanished. Returns the new record."""
    known = index.row_at(path)
    if known is None:
        return None
    found = found_at(path, known["root"])
    if found is None:
        index.mark_gone([path])
        return None
    record = read_repo(found, known["predicted_conflicts"])
    ingest(index, [(found, record)])
    return record
