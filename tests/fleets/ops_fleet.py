"""A small indexed fleet for the write-side tests (built once per session: tests get copies), and helpers
that read a repo's state with the git CLI."""

from __future__ import annotations

import os
from pathlib import Path

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.ops import service
from tests.fleets.gitbuild import bare_remote, commit_file, git, init_repo, write
from tests.fleets.template import shared


def build(base: Path) -> dict:
    """`base/fleet/work` (2 commits, a topic branch, local edits, an untracked file) indexed in base/fleet.db,
    open."""
    built = shared().copy("ops", _build, base)
    return {**built, "index": open_index(built["db"])}


def _build(base: Path) -> dict:
    root = base / "fleet"
    root.mkdir()
    work = init_repo(root / "work", commits=2)
    commit_file(work, "src/app.py", "print('one')\n", "add app")
    git(work, "branch", "topic")
    write(work / "README.md", "edited\n")
    write(work / "notes.txt", "untracked notes\n")
    with open_index(base / "fleet.db") as index:
        scan(index, [str(root)])
    return {"root": root, "work": work, "db": base / "fleet.db"}


def with_origin(fleet: dict, base: Path, to_push: bool = True) -> Path:
    """The fleet's work repo with a bare `origin` at `base/remote.git` it has pushed main to (upstream set),
    and, `to_push`, one more commit on main to push; the remote's path."""
    work = fleet["work"]
    remote = bare_remote(base / "remote.git")
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "-u", "origin", "main")
    if to_push:
        commit_file(work, "pushed.txt", "new\n", "to push")
    return remote


def state(repo: Path) -> dict:
    """Everything a test compares before and after: HEAD, branches, stashes, status, file bytes."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = Path(dirpath) / name
            files[str(full.relative_to(repo))] = full.read_bytes()
    return {
        "head": git(repo, "rev-parse", "HEAD").strip(),
        "symbolic": git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip(),
        "branches": git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"),
        "stash": git(repo, "stash", "list", "--format=%H"),
        "status": git(repo, "status", "--porcelain=v2", "-uall"),
        "index": git(repo, "ls-files", "-s"),
        "files": files,
    }


def propose(fleet: dict, op: str, args: dict, agent: str = "claude-code", **kw) -> dict:
    return service.propose(fleet["index"], agent, op, str(fleet["work"]), args, f"test {op}", **kw)


def run(fleet: dict, op: str, args: dict, **kw) -> dict:
    """Propose and approve (as the CLI does); returns the finished proposal."""
    made = propose(fleet, op, args, **kw)
    return service.approve(fleet["index"], made["proposal_id"], "cli")
