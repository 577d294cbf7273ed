"""Where a repository's git files are: a `.git` folder or gitfile, `commondir`, a bare repository.

The facts every reader starts from (`Found`), read from git's own pointer files without a git process.
Where a pointer leads is not checked here: scoping (fleet.repo.scope) decides whether that may be read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fleet.git.files import MAX_POINTER_BYTES, BrokenRepo, read_file


@dataclass(frozen=True)
class Found:
    """One repository: its working tree (or bare dir), its git dir and the dir holding shared refs."""

    path: str
    gitdir: str
    commondir: str
    bare: bool
    root: str


def repo_name(path: str, root: str) -> str:
    """A repo's fleet name: its path relative to its root (the root's own name when it is the root)."""
    rel = os.path.relpath(path, root)
    return os.path.basename(root.rstrip("/")) if rel == "." else rel


def _pointer(path: Path, what: str) -> str | None:
    """The stripped text of a small pointer file, or None when it is missing, not a regular file or too big
    (a FIFO or a link to /dev/zero must not stall or flood the walk)."""
    try:
        data = read_file(path, MAX_POINTER_BYTES, what)
    except BrokenRepo:
        return None
    return None if data is None else data.decode("utf-8", "replace").strip()


def read_gitfile(dotgit: Path) -> Path | None:
    """The git dir a `.git` file points to (`gitdir: ...`), or None when it is not a valid gitfile or names
    no directory."""
    text = _pointer(dotgit, ".git file")
    if not text or not text.startswith("gitdir:") or "\0" in text:
        return None
    target = Path(text[len("gitdir:"):].strip())
    if not target.is_absolute():
        target = dotgit.parent / target
    target = Path(os.path.normpath(target))
    return target if os.path.isdir(target) else None  # os.path: a name too long is False, not an error


def common_dir(gitdir: Path) -> Path:
    """The git dir holding shared refs/objects: `commondir` redirects linked worktrees to the main `.git`."""
    text = _pointer(gitdir / "commondir", "commondir")
    if not text or "\0" in text:
        return gitdir
    target = Path(text)
    if not target.is_absolute():
        target = gitdir / target
    target = Path(os.path.normpath(target))
    return target if os.path.isdir(target) else gitdir


def is_bare_repo(path: str | os.PathLike[str]) -> bool:
    """A directory that is itself a git dir: HEAD, objects/ and refs/ (or reftable/) side by side."""
    isdir = os.path.isdir  # os.path: an unreadable folder is False, never an error that ends the walk
    return (os.path.isfile(os.path.join(path, "HEAD")) and isdir(os.path.join(path, "objects"))
            and (isdir(os.path.join(path, "refs")) or isdir(os.path.join(path, "reftable"))))


def dotgit_dir(folder: Path) -> Path | None:
    """The git dir a working tree's `.git` names, as git finds it: the `.git` folder itself or a gitfile's
    target; None when there is neither or the gitfile is invalid."""
    dotgit = folder / ".git"
    if dotgit.is_dir():
        return dotgit
    return read_gitfile(dotgit) if dotgit.is_file() else None


def found_at(path: str, root: str) -> Found | None:
    """The discovery record of one known repository path (a working tree or a bare repository), no walk."""
    folder = Path(path)
    dotgit = folder / ".git"
    if dotgit.is_dir() or dotgit.is_file():
        gitdir = dotgit_dir(folder)
        return None if gitdir is None else Found(path, str(gitdir), str(common_dir(gitdir)), False, root)
    return Found(path, path, path, True, root) if is_bare_repo(folder) else None
