"""Fleet search: the trigram index catches up in bulk before a search and stays consistent through prunes."""

from __future__ import annotations

from pathlib import Path

from fleet.index.events import prune_events
from fleet.index.store import open_index
from fleet.index.scan import refresh_repo, scan
from fleet.index.search import search, sync_search_index
from tests.fleets.gitbuild import commit_file, git, init_repo


def _integrity(index) -> None:
    index.conn.execute("insert into reflog_search (reflog_search) values ('integrity-check')")


def test_search_sees_new_lines_and_survives_a_prune(tmp_path: Path):
    repo = init_repo(tmp_path / "root" / "alpha", commits=2)
    index = open_index(tmp_path / "f.db")
    scan(index, [str(tmp_path / "root")])
    first = search(index, "commit 1", kinds=["commit"])
    assert [m["sha"] for m in first["matches"]] == [git(repo, "rev-parse", "HEAD").strip()]

    sha = commit_file(repo, "x.txt", "x\n", "a quokka-shaped change")
    refresh_repo(index, str(repo.resolve()))
    found = search(index, "quokka", kinds=["commit"])
    assert [(m["repo"], m["sha"], m["text"]) for m in found["matches"]] == [("alpha", sha, "a quokka-shaped change")]
    assert sync_search_index(index) == 0  # already caught up
    _integrity(index)

    prune_events(index, older_than_s=0, now=10**10)
    assert search(index, "quokka")["matches"] == []
    _integrity(index)
    index.close()
