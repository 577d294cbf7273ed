"""Bare repositories kept as files of a project (test fixtures) are data, not repos of the fleet; nested
independent repositories stay. Git is the oracle for "tracked": `git ls-files` in the enclosing repo."""

from __future__ import annotations

import os
from pathlib import Path

from fleet.index.discovery import discover
from fleet.git.layout import Found
from fleet.index.scan import ingest, scan
from fleet.index.store import open_index
from fleet.repo.record import read_repo
from tests.fleets.gitbuild import bare_remote, git, init_repo


def _project(base: Path) -> dict[str, Path]:
    """A project tracking two bare fixture repos, holding an untracked bare repo and an independent repo."""
    outer = init_repo(base / "project")
    tracked = bare_remote(outer / "tests" / "data" / "fixture.git")
    deep = bare_remote(outer / "tests" / "data" / "more" / "deep.git")
    git(outer, "add", "--", "tests")
    git(outer, "commit", "-q", "-m", "fixtures")
    loose = bare_remote(outer / "scratch" / "loose.git")      # not tracked: a repo of its own
    nested = init_repo(outer / "vendor-src" / "lib")          # nested independent repo, untracked
    return {"outer": outer, "tracked": tracked, "deep": deep, "loose": loose, "nested": nested}


def test_tracked_bare_fixtures_are_skipped_nested_repos_stay(tmp_path):
    repos = _project(tmp_path)
    assert git(repos["outer"], "ls-files", "--", "tests/data/fixture.git/HEAD").strip()  # the oracle agrees
    assert not git(repos["outer"], "ls-files", "--", "scratch").strip()
    paths = {f.path for f in discover(tmp_path)}
    expected = {os.path.realpath(repos[k]) for k in ("outer", "loose", "nested")}
    assert paths == expected


def test_a_root_naming_a_fixture_finds_it(tmp_path):
    repos = _project(tmp_path)
    found = discover(repos["tracked"])
    assert [f.path for f in found] == [os.path.realpath(repos["tracked"])]
    assert found[0].bare
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(repos["outer"]), str(repos["tracked"])])
    assert os.path.realpath(repos["tracked"]) in index.known_paths()
    assert os.path.realpath(repos["deep"]) not in index.known_paths()
    index.close()


def test_a_fixture_indexed_before_leaves_the_fleet_on_the_next_scan(tmp_path):
    repos = _project(tmp_path)
    index = open_index(tmp_path / "fleet.db")
    root = os.path.realpath(tmp_path)
    fixture = os.path.realpath(repos["tracked"])
    item = Found(fixture, fixture, fixture, True, root)
    ingest(index, [(item, read_repo(item))])       # what an older fleetdeck stored
    assert fixture in index.known_paths()
    summary = scan(index, [root])
    assert fixture in summary["gone"]
    assert fixture not in index.known_paths()
    assert os.path.realpath(repos["loose"]) in index.known_paths()
    index.close()


def test_a_bare_repo_whose_folder_the_outer_repo_ignores_stays(tmp_path):
    outer = init_repo(tmp_path / "dotfiles")
    (outer / ".gitignore").write_text("*.git/\n")
    git(outer, "add", ".gitignore")
    git(outer, "commit", "-q", "-m", "ignore")
    mirror = bare_remote(outer / "mirrors" / "x.git")
    assert {f.path for f in discover(tmp_path)} == {os.path.realpath(outer), os.path.realpath(mirror)}
