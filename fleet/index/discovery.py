"""Find git repositories under the fleet's roots.

A walk with `os.scandir` that never follows symlinked folders (a symlinked `.git` included), never descends
into a `.git` directory or a bare repository, and skips dependency/build folders. Linked worktrees and
submodules (`.git` *files*) are attached to the repository that owns them instead of being counted twice.
A `.git` file may point anywhere: such a repository is still listed, and reading it checks its scope.
A bare repository whose files the enclosing working tree tracks (test fixtures kept in a project) is data,
not a repository of the fleet: it is skipped unless a root names it. Nested independent repositories stay.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterator

from fleet.git.layout import Found, common_dir, is_bare_repo, read_gitfile
from fleet.git.run import GitError, run_git

DEFAULT_SKIP = (
    "node_modules", ".venv", "venv", ".tox", "vendor", "target", "dist", "build", ".cache",
    "__pycache__", ".mypy_cache", ".pytest_cache", ".gradle", ".terraform",
)


def tracked_by(work_tree: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """True when the repository whose working tree is `work_tree` tracks `path`'s HEAD file: a bare
    repository kept as files of a project. One `git ls-files` of a single literal path (a few ms), run only
    for a bare repository found inside a working tree, which is rare."""
    rel = os.path.relpath(path, work_tree)
    try:
        result = run_git(work_tree, ["ls-files", "-z", "--", f":(literal){rel}/HEAD"], timeout=10, max_bytes=65536)
    except GitError:
        return False
    return bool(result.stdout)


def enclosing_work_tree(path: str | os.PathLike[str]) -> str | None:
    """The nearest folder above `path` holding a `.git` (directory or file), or None."""
    for parent in Path(os.path.normpath(path)).parents:
        if os.path.lexists(os.path.join(parent, ".git")):
            return str(parent)
    return None


def tracked_fixture(path: str | os.PathLike[str]) -> bool:
    """A bare repository that its enclosing working tree tracks as files (what discovery skips)."""
    outer = enclosing_work_tree(path)
    return outer is not None and is_bare_repo(Path(path)) and tracked_by(outer, path)


def _skipped(name: str, rel: str, names: frozenset[str], patterns: tuple[str, ...]) -> bool:
    if name in names:
        return True
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(rel, p) for p in patterns)


def discover(root: str | os.PathLike[str], skip: tuple[str, ...] = DEFAULT_SKIP,
             extra_skip: tuple[str, ...] = ()) -> list[Found]:
    """Every repository under `root`, at any depth, in path order."""
    return sorted(iter_discover(root, skip, extra_skip), key=lambda f: f.path)


def iter_discover(root: str | os.PathLike[str], skip: tuple[str, ...] = DEFAULT_SKIP,
                  extra_skip: tuple[str, ...] = ()) -> Iterator[Found]:
    """Repositories under `root` as the walk finds them (a scan starts reading before the walk ends);
    `.git` files come last, once it is known whether the repo that owns them is in the fleet."""
    root_path = os.path.realpath(root)  # plain strings below: a Path per folder costs more than the walk
    names = frozenset(skip)
    patterns = tuple(extra_skip)
    owned: set[str] = set()
    gitfile_repos: list[Found] = []
    # (folder, the nearest working tree above or at it): a bare repo inside a working tree may be its data.
    stack: list[tuple[str, str | None]] = [(root_path, enclosing_work_tree(root_path))]
    while stack:
        folder, outer = stack.pop()
        if folder == root_path and is_bare_repo(folder):
            yield Found(folder, folder, folder, True, root_path)
            continue
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        if any(entry.name == ".git" for entry in entries):
            outer = folder
        subdirs: list[str] = []
        for entry in entries:
            if entry.name == ".git":
                dotgit = Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    item = Found(folder, entry.path, str(common_dir(dotgit)), False, root_path)
                    owned.add(os.path.normpath(item.commondir))
                    yield item
                elif entry.is_file(follow_symlinks=False):
                    gitdir = read_gitfile(dotgit)
                    if gitdir is not None:
                        gitfile_repos.append(Found(folder, str(gitdir), str(common_dir(gitdir)), False, root_path))
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            rel = os.path.relpath(entry.path, root_path) if patterns else entry.name
            if _skipped(entry.name, rel, names, patterns):
                continue
            sub = entry.path
            if is_bare_repo(sub):
                if outer is not None and tracked_by(outer, sub):
                    continue
                owned.add(os.path.normpath(sub))
                yield Found(sub, sub, sub, True, root_path)
                continue
            subdirs.append(sub)
        stack.extend((sub, outer) for sub in sorted(subdirs, reverse=True))
    for item in gitfile_repos:
        if not _owned_elsewhere(item, owned):
            yield item


def _owned_elsewhere(item: Found, owned: set[str]) -> bool:
    """True for a linked worktree or submodule whose owning repository is already in the fleet."""
    if os.path.normpath(item.commondir) in owned and item.commondir != item.gitdir:
        return True
    gitdir = Path(item.gitdir)
    # Submodule git dirs live in <owner>/.git/modules/<name>[/modules/<name>...].
    for parent in gitdir.parents:
        if parent.name == "modules" and os.path.normpath(parent.parent) in owned:
            return True
    return False
