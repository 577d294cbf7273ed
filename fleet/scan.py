"""Index the fleet: discover repositories under the roots, read each one, store the records.

A cold scan spends its time in `git status` and in Python reading git's files and writing SQLite. Threads
cannot spread the Python part over the cores (the GIL; worse, every SQLite call hands the GIL to a reader
thread and waits to get it back), so a scan forks a few worker processes that each read and store chunks of
the fleet, taking turns at the index's write lock. Where forking is unsafe (other threads are running in
this process) the same work runs on a thread pool instead.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

from fleet.discovery import Found, common_dir, discover, is_bare_repo, read_gitfile
from fleet.index import Index
from fleet.reader import read_repo

Progress = Callable[[int, int, str], None]
WRITE_BATCH = 64


def default_workers() -> int:
    return max(2, min(8, (os.cpu_count() or 2) + 1))


def chunk_size(total: int, workers: int) -> int:
    """Big enough to amortize a write transaction, small enough that every worker gets several."""
    return max(4, min(64, total // (workers * 4)))


def skip_patterns(index: Index) -> tuple[str, ...]:
    row = index.conn.execute("select value from meta where key = 'skip_patterns'").fetchone()
    return tuple(json.loads(row[0])) if row else ()


def set_skip_patterns(index: Index, patterns: list[str]) -> None:
    with index.write() as conn:
        conn.execute("insert or replace into meta (key, value) values ('skip_patterns', ?)",
                     (json.dumps(sorted(set(patterns))),))


def discover_all(index: Index, roots: list[str]) -> list[Found]:
    extra = skip_patterns(index)
    found: list[Found] = []
    seen: set[str] = set()
    for root in roots:
        if not os.path.isdir(root):
            continue
        for item in discover(root, extra_skip=extra):
            if item.path not in seen:
                seen.add(item.path)
                found.append(item)
    return found


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
    found = discover_all(index, targets)
    errors: list[dict] = []
    total = len(found)
    done = 0
    for chunk, chunk_errors in _read_and_store(index, found, workers or default_workers()):
        errors += chunk_errors
        done += len(chunk)
        if progress:
            progress(done, total, chunk[-1].path)
    present = {f.path for f in found}
    gone = [p for p in index.known_paths()
            if any(_inside(p, r) for r in targets) and p not in present and not os.path.exists(p)]
    index.mark_gone(gone)
    return {
        "roots": targets, "missing_roots": missing_roots, "repos": total, "errors": errors,
        "error_count": len(errors), "gone": gone, "elapsed_s": round(time.perf_counter() - started, 3),
    }


def _read_and_store(index: Index, found: list[Found], workers: int) -> Iterator[tuple[list[Found], list[dict]]]:
    """Read and store every repo; yields (chunk, its errors) as chunks complete."""
    size = chunk_size(len(found), workers)
    chunks = [found[i:i + size] for i in range(0, len(found), size)]
    if len(chunks) > 1 and threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        with multiprocessing.get_context("fork").Pool(workers, _worker_init, (str(index.path),)) as pool:
            for number, errors in pool.imap_unordered(_worker_chunk, enumerate(chunks)):
                yield chunks[number], errors
        return
    batch: list[tuple[Found, dict]] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        records = iter(pool.map(read_repo, found))
        for chunk in chunks:
            items = [(item, next(records)) for item in chunk]
            batch += items
            if len(batch) >= WRITE_BATCH or chunk is chunks[-1]:
                index.store_repos(batch)
                batch = []
            yield chunk, _errors(items)


_worker_index: Index | None = None


def _worker_init(db_path: str) -> None:
    global _worker_index
    _worker_index = Index(Path(db_path))


def _worker_chunk(task: tuple[int, list[Found]]) -> tuple[int, list[dict]]:
    """In a worker process: read one chunk of repos and store it; returns (chunk number, its errors)."""
    number, chunk = task
    items = [(item, read_repo(item)) for item in chunk]
    _worker_index.store_repos(items)
    return number, _errors(items)


def _errors(items: list[tuple[Found, dict]]) -> list[dict]:
    return [{"path": item.path, "error": record["error"]} for item, record in items if record.get("error")]


def _inside(path: str, root: str) -> bool:
    return Path(path).is_relative_to(root)


def found_for(path: str, root: str) -> Found | None:
    """Rebuild the discovery record for one known repository path (the watcher's entry point)."""
    folder = Path(path)
    dotgit = folder / ".git"
    if dotgit.is_dir():
        return Found(path, str(dotgit), str(common_dir(dotgit)), False, root)
    if dotgit.is_file():
        gitdir = read_gitfile(dotgit)
        if gitdir is not None and gitdir.is_dir():
            return Found(path, str(gitdir), str(common_dir(gitdir)), False, root)
        return None
    if is_bare_repo(folder):
        return Found(path, path, path, True, root)
    return None


def refresh_repo(index: Index, path: str) -> dict | None:
    """Re-read one known repository into the index; mark it gone if it vanished. Returns the new record."""
    row = index.conn.execute("select root from repos where path = ?", (path,)).fetchone()
    if row is None:
        return None
    found = found_for(path, row[0])
    if found is None:
        index.mark_gone([path])
        return None
    record = read_repo(found)
    index.store_repo(found, record)
    return record
