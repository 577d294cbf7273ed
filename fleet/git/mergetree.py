"""`git merge-tree --write-tree` that writes nothing, freshens nothing and runs nothing from the repository.

merge-tree computes a merge in an object database and writes the merged blobs and trees there. Pointing it
at the repository would (1) add objects, (2) *freshen* objects it finds already present — git `utime`s the
loose file or the whole `.pack` (object-file.c `freshen_packed_object` / `check_and_freshen_*`), resetting
gc's clock; through an alternate object directory too, so `GIT_OBJECT_DIRECTORY=<tmp>` with the repository
as an alternate still touches it — and (3) read the repository's config, whose `merge.<x>.driver` git would
run (an empty override still runs an empty command, with temp files in the work tree).

So the merge runs in a throwaway bare repository with none of the repository's config and no alternates,
whose object store shadows the real one: every pack is a symlink beside an empty `.mtimes` marker, which
makes git treat it as a cruft pack — readable, never freshened; the loose objects are copied into one pack
of the throwaway's own (fleet/git/loosepack.py; `git pack-objects` for a set too large for memory; git would
`utime` the target of a symlink or hard link, so they cannot be linked); the commit-graph is linked for
speed. Objects merge-tree writes land in the throwaway, removed right after. The cost is a directory listing
and a read of the loose objects, paid only when a branch has diverged from its upstream (the scan) or when
an agent asks for a preflight.

Because the repository's config is not read, the prediction uses git's built-in merge for every path and
the person's global/system merge settings; a repository's own merge driver never runs.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from typing import Iterator

from fleet.git.command import UNGUARDED
from fleet.git.files import is_sha
from fleet.git.loosepack import TooLarge, write_file, write_pack
from fleet.git.neutralize import guard_for
from fleet.git.run import GitError, GitResult, run_git

MAX_ALTERNATE_DEPTH = 5
_HEX = frozenset("0123456789abcdef")


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
    with scratch_repo(worktree, commondir, timeout=timeout) as gitdir:
        return run_git(gitdir, ["merge-tree", "--write-tree", *args], ok_codes=(0, 1), timeout=timeout,
                       mode=UNGUARDED)


@contextlib.contextmanager
def scratch_repo(worktree: str, commondir: str | os.PathLike[str], *, timeout: float = 20.0) -> Iterator[str]:
    """The throwaway repository (its git dir) over a shadow of the repository's objects, removed on exit:
    for a caller that runs several steps there (the write side's rebase preflight replays commit by commit)."""
    config = guard_for(worktree).config
    object_format = config.object_format if config else "sha1"
    with tempfile.TemporaryDirectory(prefix="fleetdeck-mt-", dir=_scratch_parent()) as scratch:
        gitdir = _throwaway_repo(scratch, object_format)
        shadow_objects(os.path.join(os.fspath(commondir), "objects"), gitdir, object_format=object_format,
                       timeout=timeout)
        yield gitdir


def _scratch_parent() -> str | None:
    """Where throwaway repositories go: the temp dir the person chose (TMPDIR), else the RAM-backed /dev/shm
    when there is one (making and deleting a throwaway there costs a fifth of what it does on a journaling
    disk), else the system's temp dir (None)."""
    if not os.environ.get("TMPDIR") and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return "/dev/shm"
    return None


def _throwaway_repo(scratch: str, object_format: str) -> str:
    gitdir = scratch + "/repo.git"
    for sub in ("", "/refs", "/objects", "/objects/pack", "/objects/info"):
        os.mkdir(gitdir + sub)
    write_file(gitdir + "/HEAD", (b"ref: refs/heads/main\n",))
    config = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
    if object_format != "sha1":
        config = (f"[core]\n\trepositoryformatversion = 1\n\tbare = true\n"
                  f"[extensions]\n\tobjectformat = {object_format}\n")
    write_file(gitdir + "/config", (config.encode("ascii"),))
    return gitdir


def shadow_objects(objects: str, gitdir: str, *, object_format: str = "sha1", timeout: float = 20.0) -> None:
    """Fill the throwaway `gitdir`'s object store so git reads every object of `objects` (and its alternates)
    but can freshen none of them: the loose objects packed into a pack of its own, cruft-marked pack links,
    the commit-graph linked. It has no alternates."""
    into = os.path.join(gitdir, "objects")
    hexsz = 64 if object_format == "sha256" else 40
    odbs = _object_dirs(objects)
    loose: dict[str, str] = {}
    for odb in odbs:
        for oid, path in _loose_files(odb, hexsz):
            loose.setdefault(oid, path)
    try:
        write_pack(sorted(loose.items()), os.path.join(into, "pack"), hash_name=object_format)
    except TooLarge:
        _pack_loose(gitdir, odbs, sorted(loose), timeout)
    seen_packs: set[str] = set()
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
            write_file(os.path.join(into, "pack", base + ".mtimes"), ())
    for graph in ("commit-graph", "commit-graphs"):
        source = os.path.join(objects, "info", graph)
        if os.path.exists(source):
            os.symlink(source, os.path.join(into, "info", graph))


def _pack_loose(gitdir: str, odbs: list[str], oids: list[str], timeout: float) -> None:
    """The loose objects `oids` packed by `git pack-objects` (for a set too large to hold in memory), read
    (never written, never freshened) through alternates given to this one process only: nothing run there
    later can reach the repository's loose files."""
    run_git(gitdir, ["pack-objects", "-q", "--window=0", "--depth=0", "--compression=1",
                     os.path.join(gitdir, "objects", "pack", "loose")],
            input_bytes="".join(oid + "\n" for oid in oids).encode("ascii"), timeout=timeout, max_bytes=1 << 20,
            mode=UNGUARDED,
            extra_env={"GIT_ALTERNATE_OBJECT_DIRECTORIES": ":".join(_alternate_entry(os.path.abspath(odb))
                                                                    for odb in odbs),
                       # glibc hands zlib's deflate state back to the kernel after every object and faults
                       # it in again for the next: half of pack-objects' time, unless the heap keeps it
                       "MALLOC_TRIM_THRESHOLD_": str(64 << 20)})


def _alternate_entry(path: str) -> str:
    """One entry of GIT_ALTERNATE_OBJECT_DIRECTORIES naming the absolute `path`: C-quoted, as git reads it,
    when it holds the separator or a newline."""
    if ":" not in path and "\n" not in path:
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _loose_files(odb: str, hexsz: int) -> list[tuple[str, str]]:
    """(id, file) of each loose object of `odb` that is a regular file (git would follow a link anywhere)."""
    try:
        top = os.scandir(odb)
    except OSError:
        return []
    with top:
        fanouts = [(e.name, e.path) for e in top if len(e.name) == 2 and _HEX.issuperset(e.name) and e.is_dir()]
    found: list[tuple[str, str]] = []
    for fanout, path in fanouts:
        try:
            entries = os.scandir(path)
        except OSError:
            continue
        with entries:
            found += [(fanout + e.name, e.path) for e in entries
                      if len(e.name) == hexsz - 2 and _HEX.issuperset(e.name) and e.is_file(follow_symlinks=False)]
    return found


def _object_dirs(objects: str) -> list[str]:
    """The object dir and, depth-first, the alternates it lists (as git reads objects/info/alternates)."""
    found: list[str] = []
    seen: set[tuple[int, int]] = set()   # (device, inode): one stat where a real path costs one per component

    def visit(path: str, depth: int) -> None:
        if depth > MAX_ALTERNATE_DEPTH:
            return
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
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
