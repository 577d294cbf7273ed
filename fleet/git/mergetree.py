"""`git merge-tree --write-tree` that writes nothing, freshens nothing and runs nothing from the repository.

merge-tree computes a merge in an object database and writes the merged blobs and trees there. Pointing it
at the repository would (1) add objects, (2) *freshen* objects it finds already present — git `utime`s the
loose file or the whole `.pack` (object-file.c `freshen_packed_object` / `check_and_freshen_*`), resetting
gc's clock — and (3) read the repository's config, whose `merge.<x>.driver` git would run (an empty
override still runs an empty command, with temp files in the work tree).

So the merge runs in a throwaway bare repository with none of the repository's config, whose object store
is a shadow of the real one: every pack is a symlink beside an empty `.mtimes` marker, which makes git treat
it as a cruft pack — readable, never freshened; loose objects are read from copies (git would `utime` a
symlink's or hard link's target), kept per repository for the life of the process and topped up with the
objects that appeared since; the commit-graph is linked for speed. Objects merge-tree writes land in the
shadow, removed right after. The cost is a directory listing (plus copying new loose objects), paid only
when a branch has diverged from its upstream (the scan) or when an agent asks for a preflight.

Because the repository's config is not read, the prediction uses git's built-in merge for every path and
the person's global/system merge settings; a repository's own merge driver never runs.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from typing import Iterator

from fleet.git.files import is_sha
from fleet.git.neutralize import guard_for
from fleet.git.run import GitError, GitResult, run_git

MAX_ALTERNATE_DEPTH = 5


def merge_tree(worktree: str, commondir: str | os.PathLike[str], args: list[str], *,
               timeout: float = 20.0) -> GitResult:
    """`git merge-tree --write-tree <args>` (exit 0 clean, 1 conflicts); revisions given by name are resolved
    in the repository first, the merge itself runs in the throwaway repository."""
    named = [a for a in args if not a.startswith("-") and not is_sha(a)]
    if named:
        shas = run_git(worktree, ["rev-parse", *(f"{r}^{{commit}}" for r in named)],
                       timeout=timeout).stdout.decode("ascii", "replace").split()
        if len(shas) != len(named):
            raise GitError("GIT_FAILED", f"cannot resolve {' '.join(named)}", args=args)
        resolved = dict(zip(named, shas))
        args = [resolved.get(a, a) for a in args]
    with scratch_repo(worktree, commondir) as gitdir:
        return run_git(gitdir, ["merge-tree", "--write-tree", *args], ok_codes=(0, 1), timeout=timeout)


@contextlib.contextmanager
def scratch_repo(worktree: str, commondir: str | os.PathLike[str]) -> Iterator[str]:
    """The throwaway repository (its git dir) over a shadow of the repository's objects, removed on exit:
    for a caller that runs several steps there (the write side's rebase preflight replays commit by commit)."""
    config = guard_for(worktree).config
    with tempfile.TemporaryDirectory(prefix="fleetdeck-mt-") as scratch:
        gitdir = _throwaway_repo(scratch, config.object_format if config else "sha1")
        shadow_objects(os.path.join(os.fspath(commondir), "objects"), os.path.join(gitdir, "objects"))
        yield gitdir


def _throwaway_repo(scratch: str, object_format: str) -> str:
    gitdir = os.path.join(scratch, "repo.git")
    for sub in ("refs", "objects/pack", "objects/info"):
        os.makedirs(os.path.join(gitdir, sub))
    with open(os.path.join(gitdir, "HEAD"), "w", encoding="ascii") as fh:
        fh.write("ref: refs/heads/main\n")
    config = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
    if object_format != "sha1":
        config = (f"[core]\n\trepositoryformatversion = 1\n\tbare = true\n"
                  f"[extensions]\n\tobjectformat = {object_format}\n")
    with open(os.path.join(gitdir, "config"), "w", encoding="ascii") as fh:
        fh.write(config)
    return gitdir


def shadow_objects(objects: str, into: str) -> None:
    """Fill the object dir `into` so git reads every object of `objects` (and its alternates) but can
    freshen none of them: cruft-marked pack links, an alternate holding copies of the loose objects, the
    commit-graph linked."""
    seen_packs: set[str] = set()
    odbs = _object_dirs(objects)
    for odb in odbs:
        pack_dir = os.path.join(odb, "pack")
        for name in _names(pack_dir):
            if not name.endswith(".pack") or name in seen_packs:
                continue
            base = name[:-5]
            if not (_regular(os.path.join(pack_dir, name)) and _regular(os.path.join(pack_dir, base + ".idx"))):
                continue
            seen_packs.add(name)
            for ext in (".pack", ".idx"):
                os.symlink(os.path.join(pack_dir, base + ext), os.path.join(into, "pack", base + ext))
            open(os.path.join(into, "pack", base + ".mtimes"), "wb").close()
    for graph in ("commit-graph", "commit-graphs"):
        source = os.path.join(objects, "info", graph)
        if os.path.exists(source):
            os.symlink(source, os.path.join(into, "info", graph))
    with open(os.path.join(into, "info", "alternates"), "w", encoding="utf-8") as fh:
        fh.write(_LOOSE.mirror(objects, odbs) + "\n")


class _LooseMirrors:
    """Per repository, a folder of copies of its loose objects, kept for the life of the process and brought
    up to date before each merge (a listing, plus a copy of each object not seen before). git may freshen
    the copies; the repository's own files are never opened for writing."""

    def __init__(self) -> None:
        self._root: str | None = None
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def root(self) -> str:
        """The process's mirror folder, removed at exit. Made before a fork too (the scan forks workers that
        are terminated, not exited), so workers share the parent's folder and leave nothing behind."""
        if self._root is None:
            self._root = tempfile.mkdtemp(prefix="fleetdeck-loose-")
            atexit.register(shutil.rmtree, self._root, True)
        return self._root

    def mirror(self, objects: str, odbs: list[str]) -> str:
        with self._lock:
            root = self.root()
            key = hashlib.sha256(os.fsencode(os.path.realpath(objects))).hexdigest()[:24]
            lock = self._locks.setdefault(key, threading.Lock())
        target = os.path.join(root, key)
        with lock:
            for odb in odbs:
                _copy_loose(odb, target)
        return target


def _copy_loose(odb: str, target: str) -> None:
    """Copy the loose objects of `odb` not yet in `target` (one listing of each side's fan-out folder). The
    caller holds this mirror's lock, so a copy is written in place: no other writer, no reader meanwhile."""
    os.makedirs(target, exist_ok=True)
    have_dirs = set(_names(target))
    for fanout in _names(odb):
        if len(fanout) != 2 or not all(c in "0123456789abcdef" for c in fanout):
            continue
        src_dir, dst_dir = os.path.join(odb, fanout), os.path.join(target, fanout)
        have = set(_names(dst_dir)) if fanout in have_dirs else ()
        for name in _names(src_dir):
            if name in have or name.startswith("tmp"):
                continue
            if fanout not in have_dirs:
                os.mkdir(dst_dir)
                have_dirs.add(fanout)
            _copy_object(os.path.join(src_dir, name), os.path.join(dst_dir, name))


def _copy_object(src: str, dst: str) -> None:
    """One loose object copied (a regular file only, never followed through a link); a copy cut short is
    removed, so the mirror never holds part of an object."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # gone since the listing (pruned, packed): git reads it from wherever it went
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        try:
            out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:  # copied meanwhile by another process sharing the mirror
            return
        try:
            while chunk := os.read(fd, max(st.st_size + 1, 1 << 16)):
                os.write(out, chunk)
        except BaseException:
            os.close(out)
            os.unlink(dst)
            raise
        os.close(out)
    finally:
        os.close(fd)


_LOOSE = _LooseMirrors()
os.register_at_fork(before=_LOOSE.root)


def _object_dirs(objects: str) -> list[str]:
    """The object dir and, depth-first, the alternates it lists (as git reads objects/info/alternates)."""
    found: list[str] = []
    seen: set[str] = set()

    def visit(path: str, depth: int) -> None:
        real = os.path.realpath(path)
        if real in seen or depth > MAX_ALTERNATE_DEPTH or not os.path.isdir(real):
            return
        seen.add(real)
        found.append(path)
        listing = os.path.join(path, "info", "alternates")
        if not _regular(listing):
            return
        with open(listing, "rb") as fh:
            lines = fh.read(64 * 1024).splitlines()
        for line in lines:
            line = line.strip()
            if line and not line.startswith(b"#"):
                visit(os.path.join(path, os.fsdecode(line)), depth + 1)

    visit(objects, 0)
    return found


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _regular(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode)
