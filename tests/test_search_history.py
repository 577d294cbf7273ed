"""fleet.search finds commit subjects from recent history (not only this clone's reflogs), indexed
incrementally, and says what it searched."""

from __future__ import annotations

import os
import time
from pathlib import Path

from fleet.index.history import sync_history
from fleet.index.scan import scan
from fleet.index.search import search
from fleet.index.store import open_index
from tests.fleets.gitbuild import bare_remote, clone, git, init_repo


def _import(repo: Path, ref: str, subjects: list[tuple[str, int]], parent: str | None = None) -> None:
    """Commits on `ref` with given (subject, unix time), written by fast-import (no reflog lines)."""
    stream = []
    for n, (subject, when) in enumerate(subjects):
        frm = f"from {parent}\n" if n == 0 and parent else ""
        stream.append(f"commit {ref}\ncommitter Colleague <c@e> {when} +0000\ndata <<EOF\n{subject}\nEOF\n{frm}"
                      f"M 644 inline f{n}.txt\ndata <<EOF\n{n}\nEOF\n")
    git(repo, "fast-import", "--quiet", input="".join(stream).encode())


def test_a_subject_from_history_is_found_with_what_was_searched(tmp_path: Path):
    now = int(time.time())
    remote = bare_remote(tmp_path / "remote.git")
    seed = init_repo(tmp_path / "seed")
    git(seed, "remote", "add", "origin", str(remote))
    git(seed, "push", "-q", "origin", "main")
    _import(remote, "refs/heads/main", [("Ancient wombat work", now - 200 * 86400),
                                          ("Fix the wombat parser", now - 3 * 86400)],
            parent=git(seed, "rev-parse", "HEAD").strip())
    work = clone(remote, tmp_path / "root" / "work")
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(tmp_path / "root")])
    result = search(index, "wombat", kinds=["commit"])
    found = [(m["text"], m["source"], m["sha"]) for m in result["matches"]]
    sha = git(work, "log", "-1", "--format=%H", "--grep=Fix the wombat", "origin/main").strip()
    assert found == [("Fix the wombat parser", "history", sha)]   # older than 90 days: not searched, and said so
    assert result["match_count"] == 1 and not result["truncated"]
    history = result["searched"]["history"]
    assert "90 days" in history["description"] and history["repos"] == 1 and history["pending_repos"] == 0
    assert result["matches"][0]["repo"] == "work" and result["matches"][0]["identity"] == "Colleague"
    # short queries (no trigram) match too
    assert [m["text"] for m in search(index, "wo", kinds=["commit"])["matches"]] == ["Fix the wombat parser"]

    # incremental: nothing moved, no git call; a fetch brings a new commit and only that repo is re-read
    assert sync_history(index)["read"] == 0
    _import(remote, "refs/heads/main", [("Wombat follow-up", now - 60)], parent=sha)
    git(work, "fetch", "-q")
    scan(index)
    assert sync_history(index)["read"] == 1
    again = search(index, "wombat", kinds=["commit"])
    assert [m["text"] for m in again["matches"]] == ["Wombat follow-up", "Fix the wombat parser"]
    index.close()


def test_a_commit_in_both_reflog_and_history_is_reported_once(tmp_path: Path):
    repo = init_repo(tmp_path / "root" / "mine", commits=0)
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    now = str(int(time.time()))
    import subprocess

    env = {**os.environ, "GIT_AUTHOR_DATE": f"@{now} +0000", "GIT_COMMITTER_DATE": f"@{now} +0000"}
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "platypus support"], env=env, check=True)
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(tmp_path / "root")])
    result = search(index, "platypus", kinds=["commit"])
    assert [(m["text"], m["source"]) for m in result["matches"]] == [("platypus support", "reflog")]
    assert result["match_count"] == 1
    branch_only = search(index, "main", kinds=["branch"])
    assert "history" not in branch_only["searched"] and "branches" in branch_only["searched"]
    index.close()
