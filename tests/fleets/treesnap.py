"""The exact state of a working tree and its repository, for undo tests: every file's bytes, permission bits
and type (regular, symlink with its target), ignored and excluded ones included, plus HEAD, refs and index."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.fleets.gitbuild import git


def files(repo: Path) -> dict[str, tuple]:
    """{path: ("file", mode bits, bytes) | ("link", target)} for everything outside .git (git is not asked)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        if Path(dirpath) == repo:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, repo)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), Path(full).read_bytes())
    return out


def exact(repo: Path) -> dict:
    """Files, HEAD (symbolic and sha), every ref but fleetdeck's own, the index entries and the stash list."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    return {
        "files": files(repo),
        "head": git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False).strip(),
        "symbolic": git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip(),
        "refs": "\n".join(r for r in refs.splitlines() if not r.startswith("refs/fleetdeck/")),
        "index": git(repo, "ls-files", "-s"),
        "stash": git(repo, "stash", "list", "--format=%H"),
    }
