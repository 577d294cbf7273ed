"""Which repositories and files a caller may name, and which revisions may reach git.

Everything an agent passes is untrusted: a repo argument must resolve (symlinks included) to a directory
inside a fleet root, a file argument must stay inside its repo, and a revision must never be readable by
git as an option (`--output=...` turns a read into a write).
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from fleet.errors import FleetError
from fleet.git.run import check_ref


def _inside(child: str, parent: str) -> bool:
    """Component-wise containment, so `/a/bc` is not inside `/a/b`."""
    try:
        return os.path.commonpath([child, parent]) == parent
    except ValueError:
        return False


def _has_control(value: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in value)


def resolve_repo_path(arg: str, roots: list[str], known_paths: dict[str, str]) -> str:
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
    for root in roots:
        if _inside(real, os.path.realpath(root)):
            return real
    raise FleetError("REPO_NOT_IN_FLEET", f"{arg!r} is not inside any fleet root")


def check_rel_path(rel: str, field: str = "path") -> str:
    """A repo-relative path (or pathspec) that cannot escape: not absolute, no `..`, no control chars.

    Returns it normalised to forward slashes without `.` components or a trailing slash.
    """
    if not isinstance(rel, str) or not rel:
        raise FleetError("BAD_PATH", f"{field} must be a non-empty string")
    if _has_control(rel):
        raise FleetError("BAD_PATH", f"{field} contains control characters")
    if len(rel) > 4096:
        raise FleetError("BAD_PATH", f"{field} is longer than 4096 characters")
    if rel.startswith("/") or os.path.isabs(rel) or "\\" in rel:
        raise FleetError("BAD_PATH", f"{field} must be relative to the repo, without backslashes")
    parts = [p for p in PurePosixPath(rel).parts if p != "."]
    if ".." in parts:
        raise FleetError("BAD_PATH", f"{field} must not contain '..'")
    if parts and parts[0] == ".git":
        raise FleetError("BAD_PATH", f"{field} must not point into .git")
    if not parts:
        raise FleetError("BAD_PATH", f"{field} names the repo itself, not a path inside it")
    return "/".join(parts)


def resolve_file_in_repo(repo_path: str, rel: str) -> str:
    """`rel` checked lexically and, for the parts that exist on disk, after resolving symlinks.

    The file itself need not exist (it may exist only at some revision); returns the normalised relative path.
    """
    clean = check_rel_path(rel)
    root = os.path.realpath(repo_path)
    if not _inside(os.path.realpath(os.path.join(root, clean)), root):
        raise FleetError("BAD_PATH", f"{rel!r} leaves the repo through a symlink")
    return clean


def check_rev(value: str, field: str = "ref") -> str:
    """A revision (or range) safe to hand to git; BAD_REF when it could be read as an option."""
    try:
        return check_ref(value, field)
    except ValueError as exc:
        raise FleetError("BAD_REF", str(exc)) from exc
