"""Which git operation (merge, rebase, cherry-pick, revert, bisect) is in progress in a working tree.

Markers live in the per-worktree git dir (`.git/worktrees/<id>/` for a linked worktree), as in git's own
wt-status.c; reading them is plain file access, so it never disturbs the repo.
"""

from __future__ import annotations

import os

from fleet.gitread import git_dirs

_MARKERS = (
    ("merge", "MERGE_HEAD"),
    ("rebase", "rebase-merge"),
    ("rebase", "rebase-apply"),
    ("cherry-pick", "CHERRY_PICK_HEAD"),
    ("revert", "REVERT_HEAD"),
    ("bisect", "BISECT_LOG"),
)


def operation_state(repo: str) -> dict:
    """`{operation, operations, git_dir}`: the first in-progress operation and every marker found.

    `rebase-apply/applying` means `git am`, reported as `am`.
    """
    git_dir, _ = git_dirs(repo)
    found: list[str] = []
    for name, marker in _MARKERS:
        path = os.path.join(git_dir, marker)
        if not os.path.exists(path):
            continue
        if marker == "rebase-apply" and os.path.exists(os.path.join(path, "applying")):
            name = "am"
        if name not in found:
            found.append(name)
    if os.path.isdir(os.path.join(git_dir, "sequencer")) and not found:
        found.append("sequencer")
    return {"operation": found[0] if found else None, "operations": found, "git_dir": git_dir}


def read_marker(git_dir: str, name: str) -> str | None:
    """First line of a small marker file in the git dir (e.g. `rebase-merge/head-name`), or None."""
    try:
        with open(os.path.join(git_dir, name), "rb") as fh:
            data = fh.read(4096)
    except OSError:
        return None
    line = data.decode("utf-8", "replace").splitlines()
    return line[0].strip() if line else ""
