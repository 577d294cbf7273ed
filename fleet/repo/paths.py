"""Repo-relative paths that are safe to name in a patch or read from a work tree.

Agents hand us paths; a path that leaves the repository (absolute, `..`, a symlink pointing elsewhere),
reaches into `.git`, or carries control characters git would quote or split on must be refused before any
file is read or any patch text is written. The lexical rule is fleet.repo.scope.check_rel_path (one rule
for every repo-relative path); here the work tree is resolved and walked. Every check raises
`FleetError("BAD_PATH", ...)`.
"""

from __future__ import annotations

import os
from pathlib import Path

from fleet.errors import FleetError
from fleet.git.run import GitError, git_out
from fleet.repo.scope import check_rel_path, inside


def work_tree_root(repo: object) -> Path:
    """The resolved top of the git work tree at `repo` (which must be that top, not a subdirectory)."""
    if not isinstance(repo, (str, os.PathLike)) or not os.fspath(repo):
        raise FleetError("BAD_ARGUMENT", "repo must be a path to a git work tree")
    raw = Path(os.fspath(repo))
    if not raw.is_absolute():
        raise FleetError("BAD_PATH", f"repo {os.fspath(repo)!r} must be an absolute path")
    if not raw.is_dir():
        raise FleetError("NOT_FOUND", f"repo {os.fspath(repo)!r} is not a directory")
    try:
        top = git_out(raw, ["rev-parse", "--show-toplevel"], timeout=10).decode("utf-8", "replace").strip()
    except GitError as exc:
        raise FleetError("BAD_ARGUMENT", f"repo {os.fspath(repo)!r} is not a git work tree: {exc.message}") from exc
    root = Path(top).resolve()
    if root != raw.resolve():
        raise FleetError("BAD_PATH", f"repo {os.fspath(repo)!r} is inside the work tree {top!r}; give its top")
    return root


def resolve_in_repo(root: Path, path: str, field: str = "path") -> Path:
    """The on-disk location of repo-relative `path`, refusing any symlink on the way (as `git apply` does).

    A symlink anywhere in the path would make us read (or git write) somewhere other than the path the patch
    names, and outside the repository when it points there, so both are refused with the link named.
    """
    path = check_rel_path(path, field)
    current = root
    parts = path.split("/")
    for depth, part in enumerate(parts, start=1):
        current = current / part
        if current.is_symlink():
            shown = "/".join(parts[:depth])
            target = os.path.realpath(current)
            where = "inside the repository" if inside(target, root) else "outside the repository"
            raise FleetError("BAD_PATH", f"{field} {path!r} goes through the symlink {shown!r} "
                                         f"({where}); symlinks are not followed")
        if not current.exists():
            break
        if depth < len(parts) and not current.is_dir():
            raise FleetError("BAD_PATH", f"{field} {path!r}: {'/'.join(parts[:depth])!r} is not a directory")
    return root / path
