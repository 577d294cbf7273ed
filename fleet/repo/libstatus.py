"""A working tree's status read in-process through libgit2 (pygit2), only where its answer is exactly git's.

`git status` is one process per working tree, and starting it is most of its cost on a small repository.
libgit2 answers in-process, but not like git everywhere (staged renames, intent-to-add, conflict kinds,
submodules, sparse checkouts, attributes and filters, split indexes, sha256, ...). So `repo_status` first
runs a strict eligibility check (`ineligible`, before libgit2 is asked, then `_after` on its answer) and
gives every repository that fails any part of it to `git status` (fleet/git/status.py); docs/performance.md
lists the reasons. The answer is the same `Status` git's porcelain v2 parses into, entries in git's order.

Hostile repositories: libgit2 runs nothing (no hooks, no fsmonitor, no filter other than its built-in
text/ident ones, which only attributes select, and a repository with attributes goes to git) and this
reader writes nothing (no index refresh is asked for; tests/test_libstatus.py checks `.git` byte for byte).
A FIFO named `.gitignore` would block libgit2 as it blocks git: the read runs under a SIGALRM deadline, so
only in a process's main thread (the scan's worker processes), and any other caller gets git and its timeout.
"""

from __future__ import annotations

import os
import signal
import stat
import struct
import threading
from typing import Callable, Iterator, NamedTuple, TypeVar

import pygit2

from fleet.git import files as gitfiles
from fleet.git.command import DEFAULT_TIMEOUT
from fleet.git.config import Entry
from fleet.git.neutralize import git_config_dir
from fleet.git.status import Status, StatusEntry, read_status

MAX_ENTRIES = 800            # index entries: above about this many, libgit2 costs more CPU than git (bench/bench_libstatus.py)
MAX_INDEX_BYTES = 1 << 20
TIMEOUT = DEFAULT_TIMEOUT    # git's own default read timeout (fleet/git/command.py)
SWITCH = "FLEETDECK_STATUS"  # `git` turns the in-process status off (benchmarks, tests); anything else: on

_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0", ""}
# Config keys that change what a status reports, with the only values under which libgit2 and git agree
# (an empty set: any value at all goes to git). Booleans are compared normalised.
_STATUS_KEYS: dict[str, set[str]] = {
    "core.autocrlf": {"false"}, "core.eol": set(), "core.attributesfile": set(),
    "core.ignorecase": {"false"}, "core.precomposeunicode": {"false"}, "core.symlinks": {"true"},
    "core.filemode": {"true"}, "core.trustctime": {"true"}, "core.checkstat": {"default"},
    "core.ignorestat": {"false"}, "core.sparsecheckout": {"false"}, "core.sparsecheckoutcone": set(),
    "core.splitindex": {"false"}, "core.worktree": set(), "core.bare": {"false"}, "index.sparse": {"false"},
    "status.showuntrackedfiles": {"normal"}, "status.renames": {"true", "false"},
    "diff.renames": {"true", "false"}, "core.repositoryformatversion": {"0", "1"},
}
_BOOLEANS = {"core.autocrlf", "core.ignorecase", "core.precomposeunicode", "core.symlinks", "core.filemode",
             "core.trustctime", "core.ignorestat", "core.sparsecheckout", "core.splitindex", "core.bare",
             "index.sparse", "status.renames", "diff.renames"}
_GITLINK = struct.pack(">I", 0o160000)
_LOCAL = pygit2.enums.ConfigLevel.LOCAL

_F = pygit2.enums.FileStatus
_INDEX_XY = ((_F.INDEX_NEW, "A"), (_F.INDEX_MODIFIED, "M"), (_F.INDEX_DELETED, "D"), (_F.INDEX_TYPECHANGE, "T"))
_WT_XY = ((_F.WT_MODIFIED, "M"), (_F.WT_DELETED, "D"), (_F.WT_TYPECHANGE, "T"))
_NOT_OURS = _F.WT_UNREADABLE | _F.INDEX_RENAMED | _F.WT_RENAMED | _F.IGNORED
# An unmerged path's XY from the stages the index holds for it (1: base, 2: ours, 3: theirs), as wt-status.c
_UNMERGED_XY = {0b001: "DD", 0b010: "AU", 0b011: "UD", 0b100: "UA", 0b101: "DU", 0b110: "AA", 0b111: "UU"}


class Ineligible(Exception):
    """This repository's status goes to git; `reason` is one of the codes docs/performance.md lists."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Timeout(Exception):
    pass


class Known(NamedTuple):
    """What the caller read from git's files just before (fleet.repo.record): HEAD, the ref the checked-out
    branch tracks (`fleet.git.files.upstream_ref`) with its sha, and the stash count. With them libgit2 is
    asked only for the working tree and, when the two tips differ, ahead/behind: its own reads of HEAD, the
    branch and its upstream (a handful of calls through pygit2) were a fifth of an in-process status.
    `config`: the entries of the repository's config file when the record's read has them plain
    (`fleet.git.config.Config.plain`), for `_config_reason`."""

    head: gitfiles.Head
    upstream_ref: str | None
    upstream_sha: str | None
    stashes: int
    config: list[Entry] | None = None


def repo_status(path: str, gitdir: str, commondir: str, known: Known | None = None) -> Status:
    """The status of the working tree `path` (git dir `gitdir`, common dir `commondir`): in-process when the
    repository is eligible, else `git status`. `Status.source` says which ("libgit2" or "git")."""
    try:
        return inprocess_status(path, gitdir, commondir, known)
    except Ineligible:
        return read_status(path, commondir)


def inprocess_status(path: str, gitdir: str, commondir: str, known: Known | None = None) -> Status:
    """libgit2's status as git's porcelain v2 would give it; raises Ineligible where it might not be."""
    reason = ineligible(path, gitdir, commondir)
    if reason:
        raise Ineligible(reason)
    return bounded(lambda: _read(path, gitdir, commondir, known))


def ineligible(path: str, gitdir: str, commondir: str) -> str | None:
    """Why this repository's status must come from git (checked before libgit2 reads anything), or None."""
    if os.environ.get(SWITCH) == "git":
        return "switched_off"
    if threading.current_thread() is not threading.main_thread():
        return "not_main_thread"
    try:   # paths as plain strings: os.path.join cost more than most of these lookups
        if not _git_finds(path, gitdir, commondir):
            return "layout"
        # git's per-worktree files are in the git dir (the index, HEAD, info/sparse-checkout), the shared
        # ones in the common dir (config, info/, shallow, the stash); for the main worktree both are `.git`
        if os.path.lexists(f"{gitdir}/info/sparse-checkout"):
            return "sparse_checkout"
        reason = history_reason(commondir)
        if reason:
            return reason
        # libgit2 reads a linked worktree's `shallow` from its git dir, git from the common dir: either is git's
        if gitdir != commondir and os.path.lexists(f"{gitdir}/shallow"):
            return "shallow"
        if os.path.lexists(f"{path}/.gitmodules"):
            return "submodules"
        for name in (f"{commondir}/info/attributes", "/etc/gitattributes", _global_attributes()):
            if os.path.lexists(name):
                return "attributes"
        return _index_reason(path, f"{gitdir}/index")
    except (gitfiles.BrokenRepo, OSError):
        return "unreadable"


def history_reason(commondir: str) -> str | None:
    """What in the common dir makes libgit2 see other objects or another history than git: `[extensions]`
    ("extensions": sha256, partial clone, worktree config, ...), `shallow` or `info/grafts` ("shallow"). The
    in-process merge verdict (fleet/repo/libmerge.py) asks it too. Raises BrokenRepo or OSError."""
    config = gitfiles.read_file(f"{commondir}/config", gitfiles.MAX_CONFIG_BYTES, "config") or b""
    if b"[extensions" in config.lower():
        return "extensions"
    for name in ("shallow", "info/grafts"):
        if os.path.lexists(f"{commondir}/{name}"):
            return "shallow"
    return None


def _git_finds(path: str, gitdir: str, commondir: str) -> bool:
    """Whether git, and libgit2 alike, find exactly `gitdir` and `commondir` from the working tree `path`:
    the main worktree's `.git` folder (both dirs), or a linked worktree's: `path/.git` a file naming `gitdir`,
    and `gitdir/commondir` naming `commondir` (relative to `gitdir`, as `git worktree add` writes it).
    Only the plain forms git writes are taken: git strips a pointer's line ends, libgit2 any trailing space,
    and libgit2 turns backslashes into slashes, so anything else (a relative or odd `.git` file, a missing
    `commondir`, a `--separate-git-dir` repository) is left to git. `_read` checks what libgit2 opened."""
    if gitdir == commondir:
        return os.path.normpath(gitdir) == os.path.join(os.path.normpath(path), ".git") and os.path.isdir(gitdir)
    if not os.path.isabs(gitdir) or os.path.normpath(gitdir) != gitdir:
        return False
    try:   # a `.git` folder, a link or a FIFO where git writes a file: git's
        pointer = gitfiles.read_file(f"{path}/.git", gitfiles.MAX_POINTER_BYTES, ".git file")
        common = gitfiles.read_file(f"{gitdir}/commondir", gitfiles.MAX_POINTER_BYTES, "commondir")
    except gitfiles.BrokenRepo:
        return False
    if pointer not in (b"gitdir: " + os.fsencode(gitdir), b"gitdir: " + os.fsencode(gitdir) + b"\n"):
        return False
    common = common[:-1] if common and common.endswith(b"\n") else common
    if not common or common != common.strip() or b"\\" in common or any(c in common for c in b"\0\n\r"):
        return False
    return os.path.realpath(os.path.join(gitdir, os.fsdecode(common))) == commondir


def _global_attributes() -> str:
    return os.path.join(git_config_dir(), "attributes")


def _index_reason(path: str, index_path: str) -> str | None:
    """What in the index file makes it git's: its version, size, gitlinks, attributes, odd `.gitignore`s."""
    try:
        data = gitfiles.read_file(index_path, MAX_INDEX_BYTES, "index")
    except gitfiles.BrokenRepo as exc:
        return "too_large" if "larger than" in str(exc) else "unreadable"
    if data is None:
        return None   # no index yet (a new repository): libgit2 reads it as empty, as git does
    if len(data) < 12 or data[:4] != b"DIRC":
        return "unreadable"
    version, entries = struct.unpack(">II", data[4:12])
    if version != 2:
        return "index_version"   # 3: intent-to-add or skip-worktree entries; 4: not read here
    if entries > MAX_ENTRIES:
        return "too_large"
    # Byte searches, not a parse: a false hit (a file of exactly 57,344 bytes) only sends the repo to git.
    if _GITLINK in data:
        return "submodules"
    if b".gitattributes\0" in data:
        return "attributes"
    for rel in _paths_ending(data, b".gitignore"):
        if not _regular(os.path.join(path, rel)):
            return "ignore_file"   # git reads no symlinked .gitignore in the tree; libgit2 follows it
    return None


def _paths_ending(data: bytes, name: bytes) -> Iterator[str]:
    """Index v2 entry paths that end in `/name` or are `name` (an entry: 62 bytes, then its path, NUL)."""
    at = data.find(name + b"\0", 12)
    while at >= 0:
        end = at + len(name)
        for start in range(at, max(12 + 62, end - 4096) - 1, -1):
            if (struct.unpack_from(">H", data, start - 2)[0] & 0xFFF) == end - start and \
                    (start == at or data[at - 1:at] == b"/"):
                yield os.fsdecode(data[start:end])
                break
        at = data.find(name + b"\0", end)


def _regular(full: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(full).st_mode)
    except FileNotFoundError:
        return True   # not there: neither reads it
    except OSError:
        return False


def _on_alarm(signum: int, frame: object) -> None:
    raise _Timeout()


_T = TypeVar("_T")


def bounded(read: Callable[[], _T]) -> _T:
    """`read()` under a SIGALRM deadline (a blocking open in libgit2 fails with EINTR and returns): Ineligible
    ("timeout") past it, Ineligible ("alarm_in_use") when the process's alarm is someone else's. The in-process
    merge verdict (fleet/repo/libmerge.py) reads under it too."""
    if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, signal.SIG_IGN, None) or \
            signal.getitimer(signal.ITIMER_REAL)[0]:
        raise Ineligible("alarm_in_use")
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
        try:
            return read()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        raise Ineligible("timeout") from None
    finally:
        signal.signal(signal.SIGALRM, previous)


_SEARCH: list[tuple[str, str]] = []


def _follow_home() -> None:
    """Point libgit2 at the global config and XDG folder git would read now: libgit2 fixes them when it is
    loaded, git looks at HOME and XDG_CONFIG_HOME each time (fleet/git/run.py passes both on)."""
    home, xdg = os.environ.get("HOME", ""), git_config_dir()
    if _SEARCH != [(home, xdg)]:
        pygit2.settings.search_path[pygit2.enums.ConfigLevel.GLOBAL] = home
        pygit2.settings.search_path[pygit2.enums.ConfigLevel.XDG] = xdg
        _SEARCH[:] = [(home, xdg)]


def _read(path: str, gitdir: str, commondir: str, known: Known | None = None) -> Status:
    _follow_home()
    try:
        repo = pygit2.Repository(path, pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    except (pygit2.GitError, KeyError, ValueError):
        raise Ineligible("libgit2_error") from None
    try:
        # the git dir and the work tree git finds (`_git_finds`): libgit2 takes a linked worktree's from the
        # pointer back in its git dir (`gitdir`), which git does not read for a status
        if os.path.normpath(repo.path) != os.path.normpath(gitdir) or repo.is_bare \
                or os.path.normpath(repo.workdir) != os.path.normpath(path):
            raise Ineligible("layout")
        reason, local = _config_reason(repo.config, known.config if known is not None else None)
        if reason:
            raise Ineligible(reason)
        status = (_known_head(repo, known) if local and _vouches(known) else None) or _head(repo)
        status.entries = _entries(repo.status(untracked_files="normal"), path, repo)
    except pygit2.GitError as exc:   # a split or sparse index: "unsupported mandatory extension"
        raise Ineligible("index_extension" if "extension" in str(exc) else "libgit2_error") from None
    except (KeyError, ValueError, OSError):
        raise Ineligible("libgit2_error") from None
    finally:
        repo.free()
    status.stash = known.stashes if known is not None else _stash_count(commondir)
    status.source = "libgit2"
    return status


def _vouches(known: Known | None) -> bool:
    """Whether `known` answers HEAD as git would: a branch under `refs/heads/` or a detached commit, and the
    upstream's tip when one is set. An unborn branch, a symbolic ref's chain or an upstream whose ref the
    files do not give (gone, or itself symbolic) are left to libgit2's own reads (`_head`)."""
    return known is not None and known.head.sha is not None \
        and (known.head.ref is None or known.head.ref.startswith("refs/heads/")) \
        and (known.upstream_ref is None or known.upstream_sha is not None)


def _known_head(repo: pygit2.Repository, known: Known) -> Status | None:
    """`_head`'s answer from what the caller read (`_vouches` says it can; the branch and upstream settings
    are all in the repository's config): libgit2 checks that the branch and the upstream are refs to those
    very commits and counts ahead/behind. None when they are not (a loose symbolic ref over a packed one)."""
    status = Status(oid=known.head.sha)
    if known.head.ref is None:
        return status
    if not _points_at(repo, known.head.ref, known.head.sha):
        return None
    status.head = known.head.ref[len("refs/heads/"):]
    if known.upstream_ref is None:
        return status
    if not _points_at(repo, known.upstream_ref, known.upstream_sha):
        return None
    status.upstream = known.upstream_ref.removeprefix("refs/remotes/").removeprefix("refs/heads/")
    if known.upstream_sha == known.head.sha:
        status.ahead, status.behind = 0, 0
    else:
        status.ahead, status.behind = repo.ahead_behind(pygit2.Oid(hex=known.head.sha),
                                                        pygit2.Oid(hex=known.upstream_sha))
    return status


def _config_reason(config: pygit2.Config, own: list[Entry] | None = None) -> tuple[str | None, bool]:
    """`config:<key>` for the first key (from any config file libgit2 and git read) that is git's to apply;
    and whether every `branch.*` and `remote.*` key is the repository's own (its config and what that
    includes: all `fleet.git.files.upstream_ref` reads).

    `own`, the entries of the repository's config file read plain (`fleet.git.config.Config.plain`: it
    includes none), stands for libgit2's entries of that level: they come after the person's and the system's
    files, and no level follows it in a repository eligible so far (a worktree config needs `[extensions]`).
    The walk through pygit2, an object per entry, stops there: it was the costliest part of this check."""
    seen: dict[str, str | None] = {}
    local = True
    for entry in config:
        if own is not None and entry.level == _LOCAL:
            break
        name = entry.name.lower()
        if name.startswith(("branch.", "remote.")):
            local = local and entry.level == _LOCAL
        elif name.startswith("extensions."):
            return "extensions", local   # from a file the config includes: git's, as in the config itself
        elif name in _STATUS_KEYS:
            seen[name] = entry.value   # later files win, as in git
    for section, sub, key, value in own or ():
        # named and decoded strictly, as pygit2 gives libgit2's entries: a subsection or a value read here
        # that is not UTF-8 fails the check alike (libgit2_error)
        name = b".".join((section, key) if sub is None else (section, sub, key)).decode("utf-8").lower()
        if name.startswith("extensions."):
            return "extensions", local
        if name in _STATUS_KEYS:
            seen[name] = None if value is None else value.decode("utf-8")
    for name, value in seen.items():
        value = (value if value is not None else "true").strip().lower()
        if name in _BOOLEANS:
            value = "true" if value in _TRUE else "false" if value in _FALSE else value
        if value not in _STATUS_KEYS[name]:
            return f"config:{name}", local
    return None, local


def _head(repo: pygit2.Repository) -> Status:
    """branch.oid / branch.head / upstream / ahead-behind as `git status --branch` gives them."""
    head = repo.references.get("HEAD")
    if head is None:
        raise Ineligible("head")
    status = Status()
    if head.type == pygit2.enums.ReferenceType.SYMBOLIC:
        target = head.target
        if not target.startswith("refs/heads/"):
            raise Ineligible("head")
        branch = repo.references.get(target)
        if branch is not None and branch.type != pygit2.enums.ReferenceType.DIRECT:
            raise Ineligible("head")   # a branch that links to another ref: git names the ref at the end
        status.head = target[len("refs/heads/"):]
        if repo.head_is_unborn:
            return status
    status.oid = str(repo.head.target)
    if status.head is None:
        return status
    branch = repo.branches.local.get(status.head)
    if branch is None:
        return status
    try:
        upstream = branch.upstream_name
    except KeyError:
        return status   # no upstream configured
    status.upstream = upstream.removeprefix("refs/remotes/").removeprefix("refs/heads/")
    theirs = repo.references.get(upstream)
    if theirs is not None:
        status.ahead, status.behind = repo.ahead_behind(repo.head.target, theirs.resolve().target)
    return status


def _points_at(repo: pygit2.Repository, name: str, sha: str) -> bool:
    ref = repo.references.get(name)
    return ref is not None and ref.type == pygit2.enums.ReferenceType.DIRECT and str(ref.target) == sha


def _entries(found: dict[str, int], path: str, repo: pygit2.Repository) -> list[StatusEntry]:
    """Porcelain v2's entries from libgit2's flags in git's order: changed paths, then unmerged ones, then
    untracked ones, each in path order."""
    changed, untracked, unmerged, added, deleted = [], [], [], False, False
    for rel, flags in found.items():
        if flags & _NOT_OURS:
            raise Ineligible("libgit2_flags")
        if not rel.isascii() and not _utf8(rel):
            raise Ineligible("path_encoding")   # git's parse turns such bytes into U+FFFD
        if flags & _F.CONFLICTED:
            if flags != _F.CONFLICTED:
                raise Ineligible("conflicts")
            unmerged.append(rel)
            continue
        if flags & _F.WT_NEW:
            # untracked; or also a staged deletion, the file left in the tree (`git rm --cached`): git lists both
            if flags != _F.WT_NEW and flags != _F.WT_NEW | _F.INDEX_DELETED:
                raise Ineligible("libgit2_flags")
            base = rel.rstrip("/").rsplit("/", 1)[-1]
            if base == ".gitattributes":
                raise Ineligible("attributes")
            if base == ".gitignore" and not _regular(os.path.join(path, rel)):
                raise Ineligible("ignore_file")
            if rel[-1:] == "/" and rel[:-1] in found:
                raise Ineligible("file_became_dir")   # git lists no untracked folder named as an index entry
            untracked.append(StatusEntry("?", "??", rel))
            if flags == _F.WT_NEW:
                continue
        x = next((c for flag, c in _INDEX_XY if flags & flag), ".")
        y = next((c for flag, c in _WT_XY if flags & flag), ".")
        added |= x == "A"
        deleted |= x == "D"
        changed.append(StatusEntry("1", x + y, rel))
    if added and deleted:
        raise Ineligible("renames")   # git may pair them as a staged rename
    conflicts = _unmerged(unmerged, repo.index) if unmerged else []
    key = lambda e: e.path.encode("utf-8", "surrogateescape")  # noqa: E731  (git's byte order)
    return sorted(changed, key=key) + sorted(conflicts, key=key) + sorted(untracked, key=key)


def _unmerged(paths: list[str], index: pygit2.Index) -> list[StatusEntry]:
    """Porcelain v2's `u` entries of the paths libgit2 calls conflicted: each one's XY from the stages the
    index holds for it (modes and object ids are not kept: fleet.git.status). Unless the index's unmerged
    paths are exactly those, the tree is git's."""
    kinds: dict[str, str] = {}
    for stages in index.conflicts or ():
        named = {entry.path for entry in stages if entry is not None}
        mask = sum(bit for bit, entry in zip((1, 2, 4), stages) if entry is not None)
        if len(named) != 1 or mask not in _UNMERGED_XY:
            raise Ineligible("conflicts")
        kinds[named.pop()] = _UNMERGED_XY[mask]
    if len(kinds) != len(paths) or any(rel not in kinds for rel in paths):
        raise Ineligible("conflicts")
    return [StatusEntry("u", kinds[rel], rel) for rel in paths]


def _utf8(text: str) -> bool:
    """False for a path pygit2 decoded with surrogate escapes (bytes that are not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _stash_count(commondir: str) -> int:
    """refs/stash is shared by every worktree: its reflog is in the common dir."""
    data, _, _ = gitfiles.read_reflog(os.path.join(commondir, "logs", "refs", "stash"))
    return len(gitfiles.parse_reflog(data))

