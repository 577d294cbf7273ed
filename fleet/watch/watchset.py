"""The watch set: which dirs are watched for which repo, the notifiers watching them, and events routed back.

Per repo (a handful of inotify watches instead of ~270 for a whole `.git`): its git dir non-recursively
(HEAD, index, packed-refs, MERGE_HEAD, rebase-*, ...), its `worktrees/` dir and each linked worktree's own
git dir non-recursively, and `refs/` + `logs/` recursively. Two notifiers cover every repo watched by
inotify (one non-recursive, one recursive); repos inotify cannot hold are covered by two polling notifiers.

When inotify runs out of watches or instances, the repos that fit keep live events and only the rest are
polled (most recently active repos first in line for inotify); the count that fitted is remembered, so
later rebuilds do not thrash. Polling compares mtimes in whole seconds: a second change to a file within
the same second is only seen by the next sweep.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fleet.git.layout import common_dir
from fleet.git.mark import IGNORED_SUFFIXES, INTERESTING, MAX_DEPTH
from fleet.watch.notifier import POLL_DELAY_MS, Deliver, Notifier, open_notifier, out_of_watches

log = logging.getLogger("fleetdeck.watcher")

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


Owner = dict[str, tuple[str, str]]  # watched dir -> (repo, kind: "top", "wtlist" or "tree")


def _owners(watched: dict[str, RepoWatch]) -> Owner:
    owner: Owner = {}
    for repo, rw in watched.items():
        for path, kind in rw.top:
            owner.setdefault(path, (repo, kind))
        for path in rw.trees:
            owner.setdefault(path, (repo, "tree"))
    return owner


def _paths(owner: Owner, repos: set[str]) -> dict[bool, list[str]]:
    """{recursive: sorted dirs} for the dirs owned by `repos`."""
    return {False: sorted(p for p, (r, k) in owner.items() if k != "tree" and r in repos),
            True: sorted(p for p, (r, k) in owner.items() if k == "tree" and r in repos)}


class WatchSet:
    """The watched repos and their notifiers. `apply()` runs in a worker thread; `route()` on the event loop.

    `deliver` receives every batch of changes, from the notifiers' threads.
    """

    def __init__(self, deliver: Deliver, force_polling: bool = False) -> None:
        self._deliver = deliver
        self.force_polling = force_polling
        self._watched: dict[str, RepoWatch] = {}
        self._owner: Owner = {}
        self._polled: frozenset[str] = frozenset()
        self._notifiers: dict[tuple[bool, bool], Notifier] = {}  # (polling, recursive) -> notifier
        self._inotify_cap: int | None = 0 if force_polling else None  # repos inotify can hold, once it ran out
        self._closed = False  # closed: a rebuild still running on its thread starts nothing that stays

    # --- what is watched ---------------------------------------------------------------------------------

    def repos(self) -> list[str]:
        """The watched repos."""
        return list(self._watched)

    def watch_of(self, repo: str) -> RepoWatch | None:
        """The dirs watched for `repo`, None when it is not watched."""
        return self._watched.get(repo)

    def polled(self) -> list[str]:
        """The watched repos that are polled rather than watched by inotify."""
        return sorted(self._polled)

    @property
    def mode(self) -> str:
        """`inotify` while every repo has live events, `polling` when any is polled (or polling is forced)."""
        return "polling" if self._polled or self.force_polling else "inotify"

    def path_count(self) -> int:
        return sum(len(n.paths) for n in self._notifiers.values())

    def route(self, path: str) -> str | None:
        """The repo a changed path belongs to, or None when the change cannot matter (locks, objects, ...)."""
        if path.endswith(IGNORED_SUFFIXES):
            return None
        owner = self._owner
        hit = owner.get(path)
        if hit:
            return hit[0]
        parent, name = os.path.split(path)
        hit = owner.get(parent)
        if hit:
            return hit[0] if hit[1] != "top" or name in INTERESTING else None
        for _ in range(MAX_DEPTH):
            parent, rest = os.path.split(parent)
            if not rest:
                return None
            hit = owner.get(parent)
            if hit:
                return hit[0] if hit[1] == "tree" else None
        return None

    # --- changing it ---------------------------------------------------------------------------------------

    def apply(self, watched: dict[str, RepoWatch]) -> tuple[bool, bool]:
        """Watch exactly `watched` (in priority order for inotify: most active first). A notifier is replaced
        only when its paths changed, the new one started before the old one closes (no gap).

        Returns (changed: some notifier was replaced, gap: inotify ran short and watches had to be freed
        before new ones could be added, so events may have been missed and the repos need a sweep).
        """
        owner = _owners(watched)
        self._owner = {**self._owner, **owner}  # route events for old and new dirs while notifiers change
        order = list(watched)
        cap = len(order) if self._inotify_cap is None else min(self._inotify_cap, len(order))
        changed = gap = False
        while True:
            live = set(order[:cap])
            try:
                changed |= self._replace(False, _paths(owner, live))
                break
            except OSError as exc:
                if not out_of_watches(exc):
                    raise
                if self._close(polling=False):
                    gap = True  # free the old watches, then try the same set again
                    continue
                cap //= 2
                log.warning("inotify is exhausted (%s): falling back to polling every %d ms for %d of %d repos "
                            "(the most recently active keep live events); raise fs.inotify.max_user_watches / "
                            "max_user_instances to get live events back", exc, POLL_DELAY_MS, len(order) - cap,
                            len(order))
                self._inotify_cap = cap
        polled = frozenset(order[cap:])
        changed |= self._replace(True, _paths(owner, set(polled)))
        self._watched, self._owner, self._polled = dict(watched), owner, polled
        return changed, gap

    def _replace(self, polling: bool, wanted: dict[bool, list[str]]) -> bool:
        """Start a notifier for each changed path list, then close the old one. On failure, nothing of this
        call stays running (the notifiers it replaced do)."""
        started: dict[tuple[bool, bool], Notifier | None] = {}
        try:
            for recursive, paths in wanted.items():
                key = (polling, recursive)
                old = self._notifiers.get(key)
                if (old.paths if old is not None else []) == paths:
                    continue
                started[key] = open_notifier(paths, recursive, polling, self._deliver) if paths else None
        except BaseException:
            self._close_all(started.values())
            raise
        if self._closed:  # the watcher stopped while these started
            self._close_all(started.values())
            return False
        for key, new in started.items():
            old = self._notifiers.pop(key, None)
            if new is not None:
                self._notifiers[key] = new
            if old is not None:
                old.close()
        return bool(started)

    def _close(self, polling: bool) -> bool:
        """Close the inotify (polling=False) or polling notifiers; whether there were any."""
        keys = [k for k in self._notifiers if k[0] == polling]
        for key in keys:
            self._notifiers.pop(key).close()
        return bool(keys)

    def close(self) -> None:
        # Swapped out first: a rebuild running in another thread may still add to the dict while this closes.
        self._closed = True
        notifiers, self._notifiers = self._notifiers, {}
        self._close_all(notifiers.values())

    @staticmethod
    def _close_all(notifiers: Iterable[Notifier | None]) -> None:
        """Close notifiers side by side: every watch is asked to end, then each is waited for."""
        live = [n for n in notifiers if n is not None]
        for notifier in live:
            notifier.stop()
        for notifier in live:
            notifier.close()
