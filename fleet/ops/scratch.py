"""A scratch copy of one repository's state, so a plan's steps are previewed in sequence.

Step 2 of a plan must be previewed against what step 1 leaves, yet previewing may change nothing in the
repository and run no code the repository (or anyone's config) defines. The copy is a throwaway repository
outside it (fleet.git.mergetree.scratch_repo: the objects shadowed read-only, in TMPDIR or /dev/shm, mode
0700) given a work tree: HEAD, every ref and the branches' upstream settings; a copy of the index (its
GIT_INDEX_FILE bytes); the index's files checked out from their blobs, then every path `git status` lists
(changed, deleted, untracked; not ignored ones) copied byte for byte with its mode (a path behind a folder
swapped for a link is gone, as git sees it: what the link leads to is never read). A step then runs there
through its own run function under gitexec.scratch_env: no global or system config, no hooks, a fixed
identity, and git refused anywhere but in the copy. A repository that cannot be copied faithfully (more
than MAX_FILES tracked files or MAX_COPY bytes of changes, a changed submodule, a split index) is LIMIT:
the plan's later steps are then previewed only when they run, and a person approves it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
from typing import Iterator

from fleet.errors import FleetError
from fleet.git.mergetree import scratch_repo
from fleet.git.revs import git_dirs
from fleet.git.run import run, text
from fleet.ops.gitexec import exec_git, scratch_env
from fleet.ops.pins import head_state, read_status

MAX_FILES = 20_000
MAX_COPY = 64 * 1024 * 1024
IDENTITY = {"GIT_AUTHOR_NAME": "fleetdeck preview", "GIT_AUTHOR_EMAIL": "preview@fleetdeck.invalid",
            "GIT_COMMITTER_NAME": "fleetdeck preview", "GIT_COMMITTER_EMAIL": "preview@fleetdeck.invalid"}
ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "2",
       "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": os.devnull,
       "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false", **IDENTITY}


def _tracked_count(repo: str) -> int:
    return text(run(repo, ["ls-files", "-z", "--cached"], max_bytes=64 << 20).stdout).count("\0")


def _copy_path(repo: str, work: str, rel: str) -> int:
    """The working-tree entry `rel` as it is in `repo`, made so in `work`; the bytes copied."""
    src, dst = os.path.join(repo, rel), os.path.join(work, rel)
    root = os.path.realpath(work)
    if os.path.commonpath([os.path.realpath(os.path.dirname(dst)), root]) != root:
        raise FleetError("LIMIT", f"{rel} lies beyond a symbolic link in the copy: no scratch copy")
    if os.path.lexists(dst) and not os.path.isdir(dst):
        os.unlink(dst)
    if not os.path.lexists(src) or os.path.realpath(os.path.dirname(src)) != \
            os.path.join(os.path.realpath(repo), os.path.dirname(rel)).rstrip("/"):
        return 0        # gone, or behind a folder swapped for a link (git sees it deleted): never read
    if os.path.isdir(dst) and not os.path.islink(dst) and (os.path.islink(src) or not os.path.isdir(src)):
        os.rmdir(dst)   # a tracked folder whose files (listed before it, deleted) are gone: a link or file now
    if os.path.isdir(src) and not os.path.islink(src):
        raise FleetError("LIMIT", f"{rel} is a folder git lists as changed (a submodule): no scratch copy")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return 0
    shutil.copyfile(src, dst, follow_symlinks=False)
    os.chmod(dst, 0o755 if os.stat(src).st_mode & 0o111 else 0o644)
    return os.path.getsize(dst)


def _copy_refs(repo: str, work: str) -> None:
    listing = text(run(repo, ["for-each-ref", "--format=%(objectname) %(refname)"], max_bytes=64 << 20).stdout)
    updates = "".join(f"create {name} {sha}\n" for sha, _, name in (ln.partition(" ") for ln in listing.splitlines())
                      if name)
    if updates:
        exec_git(work, ["update-ref", "--stdin"], input_bytes=updates.encode())
    config = text(run(repo, ["config", "-z", "--get-regexp", r"^branch\..*\.(remote|merge)$"],
                      check=False).stdout)
    for item in filter(None, config.split("\0")):
        key, _, value = item.partition("\n")
        exec_git(work, ["config", "--add", key, value])


@contextlib.contextmanager
def scratch_copy(repo: str) -> Iterator[str]:
    """The copy's work tree (use it where a repository path goes), removed on exit."""
    git_dir, common = git_dirs(repo)
    if glob.glob(os.path.join(git_dir, "sharedindex.*")):
        raise FleetError("LIMIT", "the repository uses a split index: no scratch copy")
    if _tracked_count(repo) > MAX_FILES:
        raise FleetError("LIMIT", f"more than {MAX_FILES} tracked files: no scratch copy")
    with scratch_repo(repo, common) as gitdir:
        work = os.path.join(os.path.dirname(gitdir), "work")
        os.mkdir(work, 0o700)
        with scratch_env(os.path.dirname(gitdir), ENV):
            with open(os.path.join(gitdir, "config"), "a", encoding="ascii") as fh:
                fh.write("[core]\n\tbare = false\n\tlogAllRefUpdates = true\n")
            with open(os.path.join(work, ".git"), "w", encoding="utf-8") as fh:
                fh.write(f"gitdir: {gitdir}\n")
            _copy_refs(repo, work)
            head_ref, head = head_state(repo)
            if head_ref:
                exec_git(work, ["symbolic-ref", "HEAD", head_ref])
            elif head:
                exec_git(work, ["update-ref", "--no-deref", "HEAD", head])
            if os.path.exists(os.path.join(git_dir, "index")):
                shutil.copyfile(os.path.join(git_dir, "index"), os.path.join(gitdir, "index"))
                exec_git(work, ["checkout-index", "--all", "--force", "-u"])
            status, _ = read_status(repo)
            copied = 0
            for entry in status.entries:
                for rel in filter(None, (entry.path, entry.orig_path)):
                    copied += _copy_path(repo, work, rel)
                    if copied > MAX_COPY:
                        raise FleetError("LIMIT", f"more than {MAX_COPY >> 20} MiB of changes: no scratch copy")
            exec_git(work, ["update-index", "-q", "--refresh"], check=False)
            yield work
