"""Where a proposal's writes land: pinned when it is previewed, re-resolved right before the executor runs.

Between a proposal and its approval a folder can be renamed, a symlink swapped or a repository moved out
of the roots with a symlink left at its old path. So the preview pins the repository's canonical path and
the identity (device, inode) of its work tree, git dir and common dir; the executor resolves them again,
symlinks followed, re-runs the fleet's scope check (fleet.index.target) and refuses with STALE when
anything left the roots or is another folder now. A path outside the repository that an op creates (a
worktree) follows one rule at both moments, `new_folder`: inside a root, resolved; never inside any git
dir (a worktree at `victim/.git/hooks` would make its branch's files that repository's hooks).
"""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.revs import git_dirs
from fleet.repo.scope import resolve_file_in_repo, root_of
from fleet.index.target import resolve_target


def _ident(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def identity(repo: str) -> dict:
    """The repository as the preview saw it: canonical path, and device/inode of its folders."""
    gitdir, common = git_dirs(repo)
    return {"path": os.path.realpath(repo), "work_tree": _ident(repo), "git_dir": _ident(gitdir),
            "common_dir": _ident(common)}


def check(index, repo: str, pinned: dict | None, paths: list[str] | None = None) -> None:
    """STALE when the repository left the roots or is not the one the preview pinned, or when one of the
    repo-relative `paths` the op targets now leads out of it through a symlink (all re-resolved now)."""
    if pinned is None:
        raise FleetError("STALE", "this proposal pins no repository identity (made by an older fleetdeck); "
                                  "propose it again")
    real = os.path.realpath(repo)
    if real != pinned["path"]:
        raise FleetError("STALE", f"the repository's path now leads to {real} (was {pinned['path']})")
    try:
        resolve_target(index, repo)
    except FleetError as exc:
        raise FleetError("STALE", f"the repository is no longer in the fleet's scope: {exc.message}") from None
    try:
        now = identity(repo)
    except FleetError as exc:
        raise FleetError("STALE", f"the repository cannot be read any more: {exc.message}") from None
    moved = [what.replace("_", " ") for what in ("work_tree", "git_dir", "common_dir") if now[what] != pinned[what]]
    if moved:
        raise FleetError("STALE", "the repository changed identity since the preview (another "
                                  f"{', '.join(moved)} at the same path)")
    for rel in paths or []:
        try:
            resolve_file_in_repo(repo, rel)
        except FleetError as exc:
            raise FleetError("STALE", f"since the preview, {exc.message}") from None


def _is_git_dir(folder: str) -> bool:
    """A folder git would take as a git dir: named .git, or holding HEAD with objects and refs (a bare
    repository) or with a commondir file (a linked worktree's admin folder)."""
    if os.path.basename(folder).lower() == ".git":
        return True
    if not os.path.isfile(os.path.join(folder, "HEAD")):
        return False
    return (os.path.isdir(os.path.join(folder, "objects")) and os.path.isdir(os.path.join(folder, "refs"))) \
        or os.path.isfile(os.path.join(folder, "commondir"))


def new_folder(roots, path: str, code: str = "BAD_PATH") -> str:
    """The canonical path of a folder an op will create (its parent resolved, symlinks followed), refused
    with `code` when it is outside every root, inside a git dir of any repository, or already exists."""
    if not isinstance(path, str) or not os.path.isabs(path) or any(ord(c) < 32 for c in path):
        raise FleetError(code, "path must be an absolute path without control characters")
    name = os.path.basename(os.path.normpath(path))
    parent = os.path.realpath(os.path.dirname(os.path.normpath(path)))
    if root_of(parent, roots) is None:
        raise FleetError(code, f"{path!r} is not inside a fleet root (it resolves to {parent})")
    target = os.path.join(parent, name)
    folder = target
    while True:
        if _is_git_dir(folder):
            raise FleetError(code, f"{path!r} lies inside the git dir {folder}: a worktree there would "
                                   "plant files in a repository's own folder (its hooks, its config)")
        up = os.path.dirname(folder)
        if up == folder:
            break
        folder = up
    if os.path.lexists(target):
        raise FleetError(code, f"{target} already exists")
    if not os.path.isdir(parent):
        raise FleetError(code, f"{parent} is not a directory")
    return target
