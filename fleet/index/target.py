"""Which repository a caller means by `repo`: a fleet name or an absolute path inside a fleet root.

Scoping is always on: the path is canonicalised (symlinks resolved) and must lie component-wise inside a
saved root (fleet.repo.scope). It then names the repository that contains it, found the way git finds one (the
nearest `.git` or bare repo at or above it) but never above the root, so a linked worktree or a
subdirectory of a repo works while a folder that is no repository is refused. That repository's git dir,
common dir and `core.worktree` must lie inside the roots too, or git would read outside them.
"""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.layout import Found, found_at
from fleet.index.store import Index
from fleet.repo.scope import check_in_scope, real_roots, resolve_repo_path, root_of


def resolve_target(index: Index, repo: str) -> Found:
    """The repository `repo` names, or a FleetError (REPO_NOT_IN_FLEET, BAD_PATH) saying why not."""
    roots = index.roots()
    if not roots:
        raise FleetError("REPO_NOT_IN_FLEET", "the fleet has no roots yet: run `fleetdeck scan PATH` first")
    roots = real_roots(roots)   # once for every check below
    named = index.live_path(repo) if isinstance(repo, str) else None
    real = resolve_repo_path(repo, roots, {repo: named} if named else {})
    root = root_of(real, roots)
    folder = real
    while True:
        found = found_at(folder, root)
        if found is not None:
            return check_in_scope(found, roots)
        if folder == root:
            break
        folder = os.path.dirname(folder)
    raise FleetError("REPO_NOT_IN_FLEET", f"{repo!r} is inside a fleet root but in no git repository")


def scoped_patch_file(index: Index, patch_file: str) -> str:
    """A patch file path an agent may read or write: absolute, in a folder inside a fleet root.

    The folder is canonicalised (a symlinked folder pointing out of the fleet is refused); the file name
    itself is checked by fleet.patch.file (`.patch`/`.diff`, not a symlink).
    """
    if not isinstance(patch_file, str) or not os.path.isabs(patch_file) or "\0" in patch_file:
        raise FleetError("BAD_PATH", "patch_file must be an absolute path")
    folder = os.path.realpath(os.path.dirname(patch_file))
    if root_of(folder, index.roots()) is None:
        raise FleetError("BAD_PATH", f"patch_file {patch_file!r} is not inside a fleet root")
    return os.path.join(folder, os.path.basename(patch_file))
