"""Which repositories and files a caller may name.

Everything an agent passes is untrusted: a repo argument must resolve (symlinks included) to a directory
inside a fleet root and a file argument must stay inside its repo (a revision is checked by
`fleet.git.revs.check_rev`: never readable by git as an option). A repository is in scope only when everything
git would read for it lies inside the roots too: its git dir, its common dir (a `.git` file or a linked
worktree may point anywhere) and the work tree `core.worktree` makes git use.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Sequence

from dulwich.config import ConfigFile

from fleet.errors import FleetError
from fleet.git import files as gitfiles
from fleet.git.config import read_config
from fleet.git.layout import Found

MAX_PATH_CHARS = 4096


class OutOfScope(gitfiles.BrokenRepo):
    """Git would read this repository (its git dir, common dir or work tree) outside the fleet roots."""


def inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether `path` is `folder` or lies below it, component-wise (`/a/bc` is not inside `/a/b`).

    Lexical: callers pass canonical paths (os.path.realpath) when symlinks must not count.
    """
    try:
        folder = os.fspath(folder)
        return os.path.commonpath([os.fspath(path), folder]) == os.path.normpath(folder)
    except ValueError:  # one relative and one absolute, or different drives
        return False


def _inside_real(real: str, real_folder: str) -> bool:
    """`inside` for two paths os.path.realpath gave (absolute, no `.`, `..`, doubled or trailing `/`): a
    prefix test, where commonpath's splitting of both was the costliest part of a repo's scope check."""
    return real == real_folder or real.startswith(real_folder.rstrip("/") + "/")


class RealRoots(tuple):
    """Fleet roots already resolved (os.path.realpath) for one request: the scope checks below resolve any
    other list of roots themselves, so a caller making several checks resolves them once."""


def real_roots(roots: Sequence[str]) -> RealRoots:
    return roots if type(roots) is RealRoots else RealRoots(os.path.realpath(r) for r in roots)


def root_of(path: str, roots: Sequence[str]) -> str | None:
    """The innermost of `roots` (resolved) that holds `path` (already resolved), or None."""
    holding = [r for r in real_roots(roots) if inside(path, r)]
    return max(holding, key=len) if holding else None


def dirs_escape(found: Found, roots: Sequence[str]) -> str | None:
    """Why git would read this repository's git dir or common dir outside `roots`, or None."""
    resolved = real_roots(roots)
    dirs = [("git dir", os.path.realpath(found.gitdir))]
    if found.commondir != found.gitdir:   # one dir (most repos): its second check would repeat the first
        dirs.append(("common git dir", os.path.realpath(found.commondir)))
    for what, real in dirs:
        if not any(_inside_real(real, r) for r in resolved):
            return f"its {what} lies outside the fleet roots: not read"
    return None


def work_tree_escape(found: Found, cfg: ConfigFile, roots: Sequence[str]) -> str | None:
    """Why git would use a work tree outside `roots` for this repository (`core.worktree`), or None."""
    if found.bare:
        return None
    work_tree = gitfiles.configured_work_tree(cfg, found.gitdir, found.commondir)
    if work_tree is not None and root_of(os.path.realpath(work_tree), roots) is None:
        return "its core.worktree lies outside the fleet roots: not read"
    return None


def check_in_scope(found: Found, roots: Sequence[str]) -> Found:
    """`found` when git run in it reads nothing outside `roots`; REPO_NOT_IN_FLEET saying why otherwise, and
    GIT_FAILED when a file git opens first would stall or flood it (a FIFO or a huge HEAD, config...)."""
    why = dirs_escape(found, roots)
    if why is None:
        try:
            gitfiles.check_startup_files(found.gitdir, found.commondir)
            why = work_tree_escape(found, read_config(found.commondir), roots)
        except gitfiles.BrokenRepo as exc:
            raise FleetError("GIT_FAILED", f"{found.path}: {exc}; git cannot safely read this repository") from None
    if why:
        raise FleetError("REPO_NOT_IN_FLEET", f"{found.path}: {why}")
    return found


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _has_control(value: str) -> bool:
    return _CONTROL.search(value) is not None


def resolve_repo_path(arg: str, roots: Sequence[str], known_paths: dict[str, str]) -> str:
    """The canonical working-tree path for `arg`: a fleet name from `known_paths` or an absolute path.

    The result must exist and lie inside one of `roots` after resolving symlinks (roots are resolved too).
    """
    if not isinstance(arg, str) or not arg:
        raise FleetError("BAD_PATH", "repo must be a non-empty string")
    if "\0" in arg or _has_control(arg):
        raise FleetError("BAD_PATH", "repo contains control characters")
    if arg in known_paths:
        candidate = known_paths[arg]
    elif os.path.isabs(arg):
        candidate = arg
    else:
        raise FleetError("REPO_NOT_IN_FLEET",
                         f"{arg!r} is neither a fleet repo name nor an absolute path")
    if not os.path.exists(candidate):
        raise FleetError("BAD_PATH", f"{arg!r} does not exist")
    real = os.path.realpath(candidate)
    if not os.path.isdir(real):
        raise FleetError("BAD_PATH", f"{arg!r} is not a directory")
    if root_of(real, roots) is None:
        raise FleetError("REPO_NOT_IN_FLEET", f"{arg!r} is not inside any fleet root")
    return real


def check_rel_path(path: object, field: str = "path") -> str:
    """`path` when it is a clean repo-relative POSIX path as git prints one; BAD_PATH naming the problem.

    The one rule for every path an agent names inside a repo (file arguments, path filters, patch paths):
    non-empty, at most 4096 characters, no control characters, not absolute, no empty, `.` or `..`
    component, and no `.git` component in any case (`.GIT` is the same folder on a case-insensitive disk).
    Any other byte git allows in a name (spaces, backslashes, quotes) is fine: paths reach git literally.
    """
    if not isinstance(path, str) or not path:
        raise FleetError("BAD_PATH", f"{field} must be a non-empty string")
    if len(path) > MAX_PATH_CHARS:
        raise FleetError("BAD_PATH", f"{field} is longer than {MAX_PATH_CHARS} characters")
    bad = sorted(set(_CONTROL.findall(path)))
    if bad:
        names = ", ".join(repr(ch) for ch in bad)
        raise FleetError("BAD_PATH", f"{field} {path!r} contains control characters ({names})")
    if path.startswith("/"):
        raise FleetError("BAD_PATH", f"{field} {path!r} is absolute; give a path relative to the repo root")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise FleetError("BAD_PATH", f"{field} {path!r} has an empty, '.' or '..' component")
        if part.lower() == ".git":
            raise FleetError("BAD_PATH", f"{field} {path!r} points into a .git directory")
    return path


def behind_link(root: str | bytes, rel: str | bytes, folders: dict | None = None) -> bool:
    """Whether a folder on the way to `rel` (repo-relative, `/`-separated) is a link or no folder: git then
    sees the path as gone, and what the link leads to (outside the tree, perhaps) must never be read.
    `folders` caches each folder's answer across many paths."""
    folders = {} if folders is None else folders
    sep = b"/" if isinstance(rel, bytes) else "/"
    path = root
    for part in rel.split(sep)[:-1]:
        path = os.path.join(path, part)
        real = folders.get(path)
        if real is None:
            try:
                real = folders[path] = stat.S_ISDIR(os.lstat(path).st_mode)
            except OSError:
                real = folders[path] = False
        if not real:
            return True
    return False


def resolve_file_in_repo(repo_path: str, rel: str) -> str:
    """`rel` checked lexically and, for the parts that exist on disk, after resolving symlinks.

    The file itself need not exist (it may exist only at some revision); returns it unchanged.
    """
    clean = check_rel_path(rel)
    root = os.path.realpath(repo_path)
    if not inside(os.path.realpath(os.path.join(root, clean)), root):
        raise FleetError("BAD_PATH", f"{rel!r} leaves the repo through a symlink")
    return clean
