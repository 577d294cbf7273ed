"""A small real fleet for the dashboard tests, built with the git CLI (once per session: tests get copies)."""

from __future__ import annotations

from pathlib import Path

from fleet.index.store import Index, open_index
from fleet.index.scan import scan
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream, write
from tests.fleets.template import shared


def build_fleet(base: Path) -> dict[str, Path]:
    """`root/conflicted` (merge conflict), `root/dirty` (modified + untracked, no upstream), `root/clean` (in
    sync with its upstream) and `root/tracking` (2 ahead, 1 behind); remotes and seeds live outside the root."""
    return shared().copy("dashboard", _build, base)


def indexed_fleet(base: Path) -> tuple[Index, dict[str, Path]]:
    """The fleet of `build_fleet` scanned into `base/fleet.db`, open."""
    repos = shared().copy("dashboard-indexed", _build_indexed, base)
    return open_index(base / "fleet.db"), repos


def _build(base: Path) -> dict[str, Path]:
    root = base / "root"
    root.mkdir()
    conflicted = init_repo(root / "conflicted", commits=1)
    git(conflicted, "checkout", "-q", "-b", "topic")
    commit_file(conflicted, "f.txt", "topic\n")
    git(conflicted, "checkout", "-q", "main")
    commit_file(conflicted, "f.txt", "main\n")
    git(conflicted, "merge", "-q", "topic", check=False)
    dirty = init_repo(root / "dirty", commits=2)
    write(dirty / "README.md", "changed\n")
    write(dirty / "new.txt", "new\n")
    outside = base / "outside"
    outside.mkdir()
    clean = with_upstream(outside, "clean").rename(root / "clean")
    tracking = with_upstream(outside, "tracking", ahead=2, behind=1).rename(root / "tracking")
    return {"root": root, "conflicted": conflicted, "dirty": dirty, "clean": clean, "tracking": tracking}


def _build_indexed(base: Path) -> dict[str, Path]:
    repos = _build(base)
    with open_index(base / "fleet.db") as index:
        scan(index, [str(repos["root"])])
    return repos
