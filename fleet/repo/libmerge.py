"""The one merge prediction libgit2 can give in-process exactly as `git merge-tree` would: a certainly clean one.

A prediction is otherwise a throwaway repository and a `git merge-tree` process (fleet/git/mergetree.py),
about 3 ms of CPU. When the two commits have exactly one merge base, each side only adds or modifies files
(no deletion, no type change: without a deleted path there is no rename and no directory rename for ort to
find), the two sides touch no path in common and neither adds a path the other holds, or holds as a file
among its leading folders (a file/directory conflict), then ort resolves every path trivially, taking the one
side that changed it, before any content merge, attribute, merge driver or rename setting is looked at:
the merge is clean. `unsure` checks exactly that and names the first reason it cannot; every
other case goes to git, as before. docs/performance.md lists the reasons.

libgit2 reads only the objects, through a repository made of nothing but the object store (no config, refs,
`shallow`, grafts or replace refs: the throwaway git has none either), and only a store git in the throwaway
reads alike: no alternates, no commit-graph, no multi-pack-index, every loose object and pack a regular file
(the throwaway skips links, libgit2 follows them). The config git does read there, the person's and the
system's, must set nothing for merges (`_person_reason`). Reading writes and freshens nothing; it runs under
the status's SIGALRM deadline (`libstatus.bounded`), so only in a process's main thread.
"""

from __future__ import annotations

import os
import threading

import pygit2

from fleet.git.files import BrokenRepo
from fleet.git.config import ConfigError, parse, read_config_file
from fleet.git.neutralize import trusted_signature
from fleet.repo.libstatus import Ineligible, bounded, history_reason

SWITCH = "FLEETDECK_MERGE"   # `git` sends every prediction to git (benchmarks, tests); anything else: on
MAX_COMMITS = 1000           # commits walked per side past the merge base before git is asked instead
_HEX = frozenset("0123456789abcdef")
_D = pygit2.enums.DeltaStatus
_KIND = {0o100644: "file", 0o100755: "file", 0o120000: "link"}   # the modes a side may add or modify
_PERSON: dict[tuple, str | None] = {}   # the person's config files' signatures -> `_person_reason`


def unsure(commondir: str, ours: str, theirs: str) -> str | None:
    """Why merging `theirs` into `ours` (two shas) must be predicted by git, or None: it is certainly clean."""
    if os.environ.get(SWITCH) == "git":
        return "switched_off"
    if threading.current_thread() is not threading.main_thread():
        return "not_main_thread"
    if len(ours) != 40 or len(theirs) != 40 or not _HEX.issuperset(ours + theirs):
        return "not_sha1"
    try:
        reason = _person_reason() or _store_reason(commondir)
        if reason:
            return reason
        return bounded(lambda: _verdict(os.path.join(commondir, "objects"), ours, theirs))
    except Ineligible as exc:
        return exc.reason
    except (BrokenRepo, OSError):
        return "unreadable"


def _person_reason() -> str | None:
    """`person_config` when the config git reads in the throwaway (the person's and the system's) sets any
    `[merge]` or rename setting, includes another file, or is one git may refuse: git 2.39 aborts a merge-tree
    in a bare repository under `merge.renormalize` ("BUG: non-INDEX attr direction"), and dies on a bad value.
    Cached until one of the files changes."""
    key = trusted_signature()
    if key not in _PERSON:
        _PERSON.clear()
        _PERSON[key] = _read_person([path for path, *_ in key])
    return _PERSON[key]


def _read_person(files: list[str]) -> str | None:
    for path in files:
        try:
            data = read_config_file(path)
            entries = parse(data, path) if data else []
        except (ConfigError, BrokenRepo, OSError):
            return "person_config"
        for section, sub, name, _ in entries:
            if section in (b"include", b"includeif") or (section == b"merge" and sub is None) \
                    or (section == b"diff" and name in (b"renames", b"renamelimit")):
                return "person_config"
    return None


def _store_reason(commondir: str) -> str | None:
    """What in the repository makes libgit2 read other history or other objects than the throwaway git."""
    reason = history_reason(commondir)
    if reason:
        return reason
    objects = f"{commondir}/objects"
    for name in ("info/alternates", "info/commit-graph", "info/commit-graphs", "pack/multi-pack-index"):
        if os.path.lexists(f"{objects}/{name}"):
            return "object_store"
    folders = []
    with os.scandir(objects) as top:
        for entry in top:
            if entry.name == "pack" or (len(entry.name) == 2 and _HEX.issuperset(entry.name)):
                if entry.is_symlink():
                    return "object_store"
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry)
    for folder in folders:
        suffixes = (".pack", ".idx") if folder.name == "pack" else None
        with os.scandir(folder.path) as inner:
            # git in the throwaway skips a loose object or pack that is not a regular file; libgit2 follows it
            if any(not e.is_file(follow_symlinks=False)
                   and (e.name.endswith(suffixes) if suffixes else len(e.name) == 38) for e in inner):
                return "object_store"
    return None


def _verdict(objects: str, ours: str, theirs: str) -> None:
    """Raises Ineligible unless the merge is certainly clean (see the module's docstring)."""
    repo = pygit2.Repository()
    try:
        repo.set_odb(pygit2.Odb(objects))
        a, b = pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)
        one, two = repo[a], repo[b]
        if not (isinstance(one, pygit2.Commit) and isinstance(two, pygit2.Commit)):
            raise Ineligible("not_commits")
        base = repo.merge_base(a, b)
        if base is None:
            raise Ineligible("no_merge_base")
        if not _sole_base(repo, a, b, base):
            raise Ineligible("merge_bases")
        base_tree = repo[base].tree
        ours_changed, ours_added = _changes(base_tree, one.tree)
        theirs_changed, theirs_added = _changes(base_tree, two.tree)
        if not ours_changed.isdisjoint(theirs_changed):
            raise Ineligible("same_path")
        if _collides(ours_added, two.tree) or _collides(theirs_added, one.tree):
            raise Ineligible("file_directory")
    except (pygit2.GitError, KeyError, ValueError, OSError, UnicodeError):
        raise Ineligible("libgit2_error") from None
    finally:
        repo.free()


def _sole_base(repo: pygit2.Repository, a: pygit2.Oid, b: pygit2.Oid, base: pygit2.Oid) -> bool:
    """Whether `base` is the only merge base of `a` and `b`: no commit reachable from both is outside `base`'s
    history. A walk that keeps some of `base`'s ancestors in (date skew) only sends the merge to git."""
    sides = []
    for tip in (a, b):
        walker = repo.walk(tip, pygit2.enums.SortMode.NONE)
        walker.hide(base)
        seen = set()
        for commit in walker:
            seen.add(commit.id)
            if len(seen) > MAX_COMMITS:
                raise Ineligible("long_history")
        sides.append(seen)
    return sides[0].isdisjoint(sides[1])


def _changes(base: pygit2.Tree, side: pygit2.Tree) -> tuple[set[str], list[str]]:
    """The paths `side` changes from `base` and those it adds; Ineligible for a deletion, a type change, or
    a submodule, a path that is not UTF-8 or an odd mode on either end."""
    changed: set[str] = set()
    added: list[str] = []
    for delta in base.diff_to_tree(side).deltas:
        new = delta.new_file
        if delta.status == _D.ADDED:
            added.append(new.path)
        elif delta.status != _D.MODIFIED:
            raise Ineligible("deletion" if delta.status == _D.DELETED else "change_kind")
        kind = _KIND.get(new.mode)
        if kind is None or (delta.status == _D.MODIFIED and _KIND.get(delta.old_file.mode) != kind):
            raise Ineligible("change_kind")   # a gitlink, a file made a link, or a mode git would not write
        if new.raw_path.decode("utf-8") != new.path:
            raise Ineligible("path_encoding")
        changed.add(new.path)
    return changed, added


def _collides(added: list[str], other: pygit2.Tree) -> bool:
    """Whether the other side's tree holds any of `added` (as anything), or holds one of their leading
    folders as something other than a folder."""
    for path in added:
        if _entry(other, path) is not None:
            return True
        cut = path.find("/")
        while cut > 0:
            entry = _entry(other, path[:cut])
            if entry is not None and entry.type_str != "tree":
                return True
            cut = path.find("/", cut + 1)
    return False


def _entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    try:
        return tree[path]
    except KeyError:
        return None
