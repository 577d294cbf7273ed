"""Scope checks: which repos, files and revisions a caller may name, and option-injection refusal."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from fleet.repo import blame

from fleet.repo import changes

from fleet.repo import conflicts

from fleet.repo import diffs

from fleet.repo import history

from fleet.repo import refs
from fleet.git.layout import found_at
from fleet.errors import FleetError
from fleet.repo.scope import _inside_real, inside, resolve_file_in_repo, resolve_repo_path
from fleet.git.revs import check_rev
from tests.fleets.gitbuild import commit_file, git, init_repo


def _code(fn, *args, **kwargs) -> str:
    with pytest.raises(FleetError) as info:
        fn(*args, **kwargs)
    return info.value.code


@pytest.fixture
def fleet_root(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    repo = init_repo(root / "proj")
    (tmp_path / "outside").mkdir()
    return root, repo


def test_repo_path_inside_root_is_canonical(fleet_root):
    root, repo = fleet_root
    assert resolve_repo_path(str(repo), [str(root)], {}) == os.path.realpath(repo)
    assert resolve_repo_path(str(root), [str(root)], {}) == os.path.realpath(root)
    assert resolve_repo_path(str(repo / "."), [str(root)], {}) == os.path.realpath(repo)


def test_repo_by_fleet_name(fleet_root):
    root, repo = fleet_root
    assert resolve_repo_path("proj", [str(root)], {"proj": str(repo)}) == os.path.realpath(repo)
    # A name whose recorded path lies outside every root is still refused.
    outside = root.parent / "outside"
    assert _code(resolve_repo_path, "evil", [str(root)], {"evil": str(outside)}) == "REPO_NOT_IN_FLEET"


def test_repo_path_refusals(fleet_root, tmp_path):
    root, repo = fleet_root
    roots = [str(root)]
    assert _code(resolve_repo_path, "proj", roots, {}) == "REPO_NOT_IN_FLEET"            # relative, unknown
    assert _code(resolve_repo_path, "root/proj", roots, {}) == "REPO_NOT_IN_FLEET"
    assert _code(resolve_repo_path, f"{root}/../outside", roots, {}) == "REPO_NOT_IN_FLEET"
    assert _code(resolve_repo_path, str(tmp_path / "outside"), roots, {}) == "REPO_NOT_IN_FLEET"
    assert _code(resolve_repo_path, str(root / "missing"), roots, {}) == "BAD_PATH"
    assert _code(resolve_repo_path, str(repo) + "\n", roots, {}) == "BAD_PATH"
    assert _code(resolve_repo_path, str(repo / "README.md"), roots, {}) == "BAD_PATH"
    assert _code(resolve_repo_path, "", roots, {}) == "BAD_PATH"


def test_prefix_trap_is_not_containment(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "bc").mkdir()
    assert _code(resolve_repo_path, str(tmp_path / "a" / "bc"), [str(tmp_path / "a" / "b")], {}) \
        == "REPO_NOT_IN_FLEET"


def test_symlink_inside_root_pointing_outside(fleet_root, tmp_path):
    root, _ = fleet_root
    os.symlink(tmp_path / "outside", root / "escape")
    assert _code(resolve_repo_path, str(root / "escape"), [str(root)], {}) == "REPO_NOT_IN_FLEET"


def test_file_in_repo(fleet_root, tmp_path):
    _, repo = fleet_root
    assert resolve_file_in_repo(str(repo), "src/a.py") == "src/a.py"
    assert resolve_file_in_repo(str(repo), "README.md") == "README.md"
    assert resolve_file_in_repo(str(repo), "back\\slash.txt") == "back\\slash.txt"
    # one rule for every repo-relative path (the patch tools' too): no empty, '.' or '..' component, no .git
    for bad in ("/etc/passwd", "../x", "a/../../x", "a\0b", "a\nb", "a\tb", ".git/config", ".", "",
                "./src//a.py", "src/", "sub/.git/HEAD", ".GIT/config"):
        assert _code(resolve_file_in_repo, str(repo), bad) == "BAD_PATH", bad
    os.symlink(tmp_path / "outside", repo / "out")
    os.symlink("/etc/hostname", repo / "host")
    assert _code(resolve_file_in_repo, str(repo), "out/secret") == "BAD_PATH"
    assert _code(resolve_file_in_repo, str(repo), "host") == "BAD_PATH"
    os.symlink("README.md", repo / "inner")
    assert resolve_file_in_repo(str(repo), "inner") == "inner"


def test_check_rev():
    for good in ("HEAD~1", "main", "a..b", "a...b", "HEAD@{1}", "v1^{}"):
        assert check_rev(good) == good
    for bad in ("-x", "--output=/tmp/x", "main..--output=x", "--x...main", "a\nb", ""):
        assert _code(check_rev, bad) == "BAD_REF", bad


def _all_files(top: Path) -> set[str]:
    return {name for _, _, names in os.walk(top) for name in names}


def test_existing_dash_refs_are_refused_everywhere(tmp_path, monkeypatch):
    repo = init_repo(tmp_path / "repo", commits=2)
    git(repo, "update-ref", "refs/heads/--output=evil", "HEAD")
    git(repo, "update-ref", "refs/heads/--output=x", "HEAD")
    git(repo, "update-ref", "refs/tags/-x", "HEAD")
    commit_file(repo, "b.txt", "b\n")
    monkeypatch.chdir(tmp_path)
    before = _all_files(tmp_path)
    r = str(repo)
    for evil in ("--output=evil", "--output=x", "-x", "HEAD..--output=evil", "--output=x...HEAD"):
        calls = [
            lambda: history.repo_history(r, ref=evil),
            lambda: history.commit_details(r, evil),
            lambda: diffs.diff_refs(found_at(r, r), evil),
            lambda: diffs.diff_refs(found_at(r, r), "HEAD~1", evil),
            lambda: diffs.diff_text(found_at(r, r), base=evil),
            lambda: diffs.diff_text(found_at(r, r), base="HEAD~1", head=evil),
            lambda: refs.repo_reflog(found_at(r, r), ref=evil),
            lambda: blame.repo_blame(r, "README.md", ref=evil),
            lambda: conflicts.conflict_preflight(found_at(r, r), target=evil),
            lambda: conflicts.conflict_preflight(found_at(r, r), target="HEAD~1", source=evil),
        ]
        for call in calls:
            assert _code(call) == "BAD_REF", evil
    # The same refs spelled out in full are ordinary names: readable, and still nothing gets written.
    page = history.repo_history(r, ref="refs/heads/--output=evil")
    assert [c["sha"] for c in page["commits"]] == git(repo, "log", "--format=%H", "HEAD~1").split()
    assert diffs.diff_text(found_at(r, r), base="refs/heads/--output=x")["files"][0]["path"] == "b.txt"
    assert refs.repo_reflog(found_at(r, r), ref="refs/heads/--output=evil")["entry_count"] == 1
    assert _all_files(tmp_path) == before
    assert not any((Path(d) / n).exists() for d in (tmp_path, repo, Path.cwd()) for n in ("evil", "x"))
    assert "--output=evil" in git(repo, "for-each-ref", "--format=%(refname)")


def test_path_filters_cannot_escape(tmp_path):
    repo = init_repo(tmp_path / "repo", commits=2)
    r = str(repo)
    for bad in ("../x", "/etc", ".git"):
        assert _code(changes.repo_changes, found_at(r, r), path_filter=bad) == "BAD_PATH"
        assert _code(history.repo_history, r, path_filter=bad) == "BAD_PATH"
        assert _code(diffs.diff_refs, found_at(r, r), "HEAD~1", path_filter=bad) == "BAD_PATH"
        assert _code(blame.repo_blame, r, bad) == "BAD_PATH"
    # Pathspec magic is off: ':(glob)*' is a literal (non-existent) name, not "everything".
    assert history.repo_history(r, path_filter=":(glob)*")["commits"] == []


def test_the_prefix_test_for_resolved_paths_is_inside():
    """`_inside_real` (the scope check's test of a resolved git dir against a resolved root) answers as
    `inside` for every pair of os.path.realpath results: the root, names that share a prefix (`a`, `ab`),
    dots and spaces in names, up to three levels."""
    names = ["a", "b", "ab", "a.b", "..x", "x y", "é"]
    paths = {"/"} | {os.path.realpath("/" + "/".join(combo))
                     for depth in (1, 2, 3) for combo in itertools.product(names, repeat=depth)}
    assert [(p, f) for p in paths for f in paths if _inside_real(p, f) != inside(p, f)] == []
