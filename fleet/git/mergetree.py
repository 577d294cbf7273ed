"""`git merge-tree --write-tree` without writing to the repository.

merge-tree computes a merge in the object database and writes the merged blobs and trees there. A monitor's
read path must not add even unreferenced objects, so the run points GIT_OBJECT_DIRECTORY at a throwaway
directory and lists the real object store as an alternate: git reads everything it needs and every object it
writes lands in the temp dir, removed right after. Refs, HEAD, the index and the work tree are never touched.
"""

from __future__ import annotations

import os
import tempfile

from fleet.git.run import GitResult, run_git


def merge_tree(worktree: str, commondir: str | os.PathLike[str], args: list[str], *,
               timeout: float = 20.0) -> GitResult:
    """`git merge-tree --write-tree <args>` (exit 0 clean, 1 conflicts) with its objects thrown away."""
    with tempfile.TemporaryDirectory(prefix="fleetdeck-mt-") as scratch:
        env = {"GIT_OBJECT_DIRECTORY": scratch,
               "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(os.fspath(commondir), "objects")}
        return run_git(worktree, ["merge-tree", "--write-tree", *args], ok_codes=(0, 1), extra_env=env,
                       timeout=timeout)
