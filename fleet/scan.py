"""Index the fleet: discover repositories under the roots, read each one, store the records.

Reading is subprocess-bound (git status), so a small thread pool keeps both cores busy while the calling
thread, the only writer, stores each record as it arrives.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from fleet.discovery import Found, common_dir, discover, is_bare_repo, read_gitfile
from fleet.index import Index
from fleet.reader import read_repo

Progress = Callable[[int, int, str], None]
WRITE_BATCH = 64


def default_workers() -> int:
    return max(2, min(8, (os.cpu_count() or 2) * 2))


def skip_patterns(index: Index) -> tuple[str, ...]:
    row = index.db.conn.execute("select value from meta where key = 'skip_patterns'").fetchone()
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
    batch: list[tuple[Found, dict]] = []
    with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
        for item, record in zip(found, pool.map(read_repo, found)):
            batch.append((item, record))
            if record.get("error"):
                errors.append({"path": item.path, "error": record["error"]})
            done += 1
            if len(batch) >= WRITE_BATCH or done == total:
                index.store_repos(batch)
                batch = []
            if progress:
                progress(done, total, item.path)
    present = {f.path for f in found}
    gone = [p for p in index.known_paths()
            if any(_inside(p, r) for r in targets) and p not in present and not os.path.exists(p)]
    index.mark_gone(gone)
    return {
        "roots": targets, "missing_roots": missing_roots, "repos": total, "errors": errors,
        "error_count": len(errors), "gone": gone, "elapsed_s": round(time.perf_counter() - started, 3),
    }


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
    row = index.db.conn.execute("select root from repos where path = ?", (path,)).fetchone()
    if row is None:
        return None
    found = found_for(path, row[0])
    if found is None:
        index.mark_gone([path])
        return None
    record = read_repo(found)
    index.store_repo(found, record)
    return record
