"""Each repository's own settings, as `git status` applies them there: status.showUntrackedFiles and
submodule.<name>.ignore (in .gitmodules or the repo's config). Git is the oracle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.git.revs import found_of
from fleet.index.discovery import discover
from fleet.repo.changes import repo_status
from fleet.repo.record import read_repo
from fleet.attention import attention
from tests.fleets import oracle
from tests.fleets.gitbuild import commit_file, git, init_repo, write


def _record(repo: Path) -> dict:
    (found,) = [f for f in discover(repo) if f.path == os.path.realpath(repo)]
    return read_repo(found)


def test_show_untracked_files_no_is_followed(tmp_path: Path):
    repo = init_repo(tmp_path / "dotfiles")
    git(repo, "config", "status.showUntrackedFiles", "no")
    write(repo / ".bashrc", "x\n")
    write(repo / "notes" / "a.txt", "y\n")
    commit_file(repo, "tracked.txt", "1\n")
    write(repo / "tracked.txt", "2\n")
    rec = _record(repo)
    assert rec["untracked"] == 0 == oracle.counts(repo)["untracked"] and rec["unstaged"] == 1
    assert repo_status(found_of(str(repo)))["untracked"] == []
    git(repo, "config", "status.showUntrackedFiles", "all")
    rec = _record(repo)
    assert rec["untracked"] == oracle.counts(repo)["untracked"] == 2      # every file, as git lists them


@pytest.mark.parametrize("where", ["gitmodules", "config"])
def test_submodule_ignore_all_is_followed(tmp_path: Path, where: str):
    lib = init_repo(tmp_path / "lib", commits=2)
    sup = init_repo(tmp_path / "super")
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "libs/lib")
    git(sup, "commit", "-q", "-m", "add lib")
    if where == "gitmodules":
        git(sup, "config", "-f", ".gitmodules", "submodule.libs/lib.ignore", "all")
        git(sup, "commit", "-q", "-am", "ignore lib")
    else:
        git(sup, "config", "submodule.libs/lib.ignore", "all")
    git(sup / "libs" / "lib", "checkout", "-q", "HEAD~1")           # drifted: another commit checked out
    write(sup / "libs" / "lib" / "scratch.txt", "dirty\n")
    assert git(sup, "status", "--porcelain").strip() == ""            # git status says nothing
    rec = _record(sup)
    assert (rec["staged"], rec["unstaged"], rec["untracked"]) == (0, 0, 0)
    assert repo_status(found_of(str(sup)))["clean"] is True
    (sub,) = rec["submodules"]
    assert sub["state"] == "drifted" and sub["ignore"] == "all"       # the fact stays, the alarm does not
    assert [r["code"] for r in attention(rec)] == ["no_upstream"]
    git(sup, "config", "submodule.libs/lib.ignore", "none")          # the repo's config wins over .gitmodules
    rec = _record(sup)
    assert rec["unstaged"] == oracle.counts(sup)["unstaged"] == 1
    assert "submodule" in [r["code"] for r in attention(rec)]
