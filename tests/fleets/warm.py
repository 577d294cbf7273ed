"""A fleet already in an index, big enough that `serve`'s start-up re-check takes seconds: for the warm-start
tests (the first page before the re-check, its progress, its end) and the banner's accessibility checks."""

from __future__ import annotations

import shutil
from pathlib import Path

from fleet.index.scan import scan
from fleet.index.store import open_index
from tests.fleets.dashboard_fleet import build_fleet
from tests.fleets.gitbuild import commit_file, git

COPIES = 50  # of each of two repos with upstreams: a re-check of seconds (5 chunks, each paced by the test), not milliseconds


def scanned_fleet(base: Path) -> dict:
    """The dashboard fleet plus 2 x COPIES copies of its repos with upstreams, scanned into `base/fleet.db`,
    then a commit made in `clean` that the index has not seen (as if made while no watcher ran)."""
    repos = build_fleet(base)
    for n in range(COPIES):
        for name in ("clean", "tracking"):
            shutil.copytree(repos[name], repos["root"] / f"{name}-{n:03d}", symlinks=True)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(repos["root"])])
        indexed_at = index.conn.execute("select max(scanned_at) from repos").fetchone()[0]
        total = index.count()
    commit_file(repos["clean"], "later.txt", "made while nothing watched\n", "a commit the index missed")
    return {"db": db, "repos": repos, "indexed_at": indexed_at, "total": total,
            "head": git(repos["clean"], "rev-parse", "HEAD").strip()}
