"""The sweeps: what the watcher re-reads without a file event, and which repos came and went under the roots.

Working-tree edits never touch `.git`, so no event announces them: recently active repos are re-read often
(`active_repos`) and every repo now and then. New repos are found by a slower discovery walk, and repos that
vanished from disk are marked gone (their rows and history stay).
"""

from __future__ import annotations

import os
import time

from fleet.git.layout import Found
from fleet.index.scan import discover_all
from fleet.index.store import Index
from fleet.timespec import iso
from fleet.repo.scope import inside


def known_repos(index: Index, roots: list[str]) -> list[tuple[str, str]]:
    """(path, git dir) of the repos under `roots` that are not gone, most recently active first."""
    return [(p, g) for p, g in index.git_dirs() if any(inside(p, r) for r in roots)]


def active_repos(index: Index, window_s: float, limit: int) -> list[str]:
    """The repos active in the last `window_s` seconds, most recent first, at most `limit` (the cap keeps a
    freshly cloned fleet, where everything is "recent", from turning this into a constant full sweep)."""
    return index.recently_active(iso(time.time() - window_s), limit)


def discover_changes(index: Index, roots: list[str]) -> tuple[list[Found], list[str]]:
    """Walk the roots: (repos found that the index does not know, known repos gone from disk — now marked)."""
    found = discover_all(index, roots)
    present = {f.path for f in found}
    known = [p for p, _g in known_repos(index, roots)]
    gone = [p for p in known if p not in present and not os.path.exists(p)]
    index.mark_gone(gone)
    known_set = set(known)
    return [f for f in found if f.path not in known_set], gone
