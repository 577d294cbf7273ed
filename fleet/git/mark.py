"""A repo's watch mark: the stat state of everything in its git dirs that its index record is read from.

The index stores each repo's mark with its record, taken just before the read that produced it (every
ingest: the scan, the watcher's refreshes, the start-up re-check: `fleet.repo.record.read_repo`). git
replaces the files it rewrites (a lock file renamed over them: a new inode) and appends to the others (a
new size), so a mark equal to the stored one means nothing in those git dirs changed since the record was
read: only the working trees may have (`fleet.index.recheck`). The watcher uses the same marks to tell
whether a repo read before its watch was up changed in between.

Kept apart from the watch set (no watchfiles import) and below the readers: every read takes a mark.
"""

from __future__ import annotations

import hashlib
import os
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from fleet.git.layout import common_dir

# Entries of a git dir whose change may change the repo's record: the watch set routes their events, the
# mark covers them (folders among them with everything under them: refs/, logs/, worktrees/<id>/,
# rebase-merge/ ...).
INTERESTING = frozenset({
    "HEAD", "index", "packed-refs", "FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "MERGE_MSG", "CHERRY_PICK_HEAD",
    "REVERT_HEAD", "REBASE_HEAD", "BISECT_LOG", "BISECT_START", "config", "config.worktree", "shallow",
    "rebase-merge", "rebase-apply", "sequencer", "refs", "logs", "worktrees", "locked", "gitdir", "reftable",
})
IGNORED_SUFFIXES = (".lock",)  # git's lock files; no ref name may end in .lock (a branch `x.new` may)
MAX_DEPTH = 32  # ref names nest (refs/heads/a/b/c); deeper than this is not a ref
_NAME = attrgetter("name")


class Walked(NamedTuple):
    """What the mark's walk saw, for a read right behind it to list and stat from instead of asking the
    file system again (`fleet.git.files.read_refs`, `fleet.repo.record.reflog_stats`): every folder it listed
    under an INTERESTING entry, by path, with all its entries (`.lock` ones too: the mark skips them, a
    reader may not), the stat (not following links) of every file it stat'ed, by path, and the names of every
    entry of each git dir it listed (so a reader need not look for what was not there: `fleet.git.files.absent`).
    What it lists is the state the mark vouches for; a folder it did not list (past MAX_DEPTH, unreadable) is not
    in it."""

    folders: dict[str, list[os.DirEntry]]
    files: dict[str, os.stat_result]
    names: dict[str, frozenset[str]]


def walked() -> Walked:
    return Walked({}, {}, {})


def watch_mark(gitdir: str, commondir: str | None = None, seen_by: Walked | None = None) -> bytes:
    """The mark of the repo whose git dir is `gitdir` (its common dir found from it when not given): a
    digest of (path, inode, size, mtime) of every file among the INTERESTING entries of its git dir and
    common dir, folders walked. b"" when the git dir is gone (asked only when it cannot be listed: a stat
    fewer for every mark). `seen_by` collects what the walk saw."""
    seen: list[str] = []
    if not _stat_entries(gitdir, INTERESTING, seen, MAX_DEPTH, seen_by) and not os.path.isdir(gitdir):
        return b""
    common = str(common_dir(Path(gitdir))) if commondir is None else commondir
    if common != gitdir:
        _stat_entries(common, INTERESTING, seen, MAX_DEPTH, seen_by)
    return hashlib.blake2b("\n".join(seen).encode("utf-8", "surrogateescape"), digest_size=16).digest()


def _stat_entries(folder: str, names: frozenset[str] | None, out: list[str], depth: int,
                  seen_by: Walked | None = None) -> bool:
    """Append a line per entry of `folder` (only `names` when given): a folder's path (and, `depth` levels
    down, its entries), a file's path, inode, size and mtime. In the order the folder lists them: an
    unchanged folder lists its entries in the same order (a changed one changes the mark anyway). False when
    `folder` cannot be listed."""
    try:
        with os.scandir(folder) as listing:
            every = list(listing)
    except OSError:
        out.append(folder + "\0?")
        return False
    files = None
    if seen_by is not None:
        files = seen_by.files
        if names is None:
            seen_by.folders[folder] = every
        else:
            seen_by.names[folder] = frozenset(map(_NAME, every))
    for entry in every:
        name = entry.name
        if (names is not None and name not in names) or name.endswith(IGNORED_SUFFIXES):
            continue
        path = entry.path
        if entry.is_symlink():   # git follows it, the mark would not (git-new-workdir): never vouch for it
            out.append(f"{path}\0symlink\0{os.urandom(8).hex()}")
            continue
        # Not a link: is_dir() and stat() answer as with follow_symlinks=False, without a keyword to parse
        if entry.is_dir():
            out.append(path)
            if depth:
                _stat_entries(path, None, out, depth - 1, seen_by)
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if files is not None:
            files[path] = st
        out.append(f"{path}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}")
    return True


def moved(marks: list[tuple[str, tuple[str, str, bytes]]]) -> list[str]:
    """The repos of `marks` ((path, (git dir, common dir, mark taken before its read))) whose mark has moved
    since."""
    return [path for path, (gitdir, commondir, mark) in marks if watch_mark(gitdir, commondir) != mark]
