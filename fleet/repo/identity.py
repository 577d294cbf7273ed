"""Which repository answered: the record every per-repo answer carries, so an agent that passed a fleet
name, a linked worktree or a subfolder can confirm what was read.

The fleet name is computed the way the index names repos (`fleet.git.layout.repo_name`), so it matches
`fleet.repos` without a lookup. The absolute path is included because the repository was resolved inside a
fleet root (scoping is always on: nothing outside the roots ever gets this far).
"""

from __future__ import annotations

import os
from typing import TypedDict

from fleet.git.layout import Found, repo_name


class RepoIdentity(TypedDict):
    """The repository a per-repo tool resolved."""

    name: str
    relative_path: str
    root: str
    path: str


def repo_identity(found: Found) -> RepoIdentity:
    """`{name, relative_path, root, path}` of a resolved repository (`relative_path` is `.` for a root)."""
    return {"name": repo_name(found.path, found.root), "relative_path": os.path.relpath(found.path, found.root),
            "root": found.root, "path": found.path}
