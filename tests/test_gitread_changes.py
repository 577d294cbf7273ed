"""repo_changes and repo_status against the git CLI on working trees in many states."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from fleet.git.revs import found_of
from fleet.repo.changes import repo_changes, repo_status
from fleet.errors import FleetError
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream, write
from tests.fleets.repo_states import merge_conflict


def _numstat(repo: Path, *args: str) -> dict[str, tuple[int, int]]:
    """path -> (insertions, deletions) from `git diff --numstat -z` (renames keyed by the new path)."""
    parts = git(repo, "diff", "--numstat", "-z", *args).split("\0")
    result = {}
    i = 0
    while i < len(parts) and parts[i]:
        ins, dels, name = parts[i].split("\t")
        if not name:
            name = parts[i + 2]
            i += 2
        result[name] = (int(ins), int(dels))
        i += 1
    return result


@pytest.fixture
def dirty(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "dirty")
    lines = "".join(f"line {i}\n" for i in range(30))
    commit_file(repo, "both.txt", lines)
    commit_file(repo, "old name.txt", "rename me\n" * 5)
    commit_file(repo, "gone.txt", "delete me\n")
    commit_file(repo, "ünï.txt", "héllo\n")
    write(repo / "both.txt", lines.replace("line 2\n", "two\n"))
    git(repo, "add", "both.txt")
    write(repo / "both.txt", lines.replace("line 2\n", "two\n").replace("line 25\n", "x\n"))
    git(repo, "mv", "old name.txt", "new name.txt")
    (repo / "gone.txt").unlink()
    write(repo / "ünï.txt", "héllo wörld\n")
    write(repo / "untracked dir" / "new.txt", "a\nb")
    write(repo / "blob.bin", b"\0\1\2")
    write(repo / "big.txt", "x" * 40000)
    write(repo / ".gitignore", "*.log\n")
    write(repo / "ignored.log", "no\n")
    return repo


def test_changes_match_git(dirty: Path):
    result = repo_changes(found_of(str(dirty)))
    by_path = {c["path"]: c for c in result["changes"]}
    assert [c["path"] for c in result["changes"]] == sorted(by_path)
    assert [c["id"] for c in result["changes"]] == [f"change-{n}" for n in range(1, len(by_path) + 1)]
    untracked = git(dirty, "ls-files", "--others", "--exclude-standard").splitlines()
    assert {p for p, c in by_path.items() if c["sides"] == ["untracked"]} == set(untracked)
    assert "ignored.log" not in by_path
    staged, unstaged = _numstat(dirty, "--cached", "-M"), _numstat(dirty)
    for path, change in by_path.items():
        if change["sides"] == ["untracked"]:
            continue
        (si, sd), (ui, ud) = staged.get(path, (0, 0)), unstaged.get(path, (0, 0))
        assert (change["insertions"], change["deletions"]) == (si + ui, sd + ud), path
    both = by_path["both.txt"]
    assert both["sides"] == ["staged", "unstaged"]
    assert [h["side"] for h in both["hunks"]] == ["staged", "unstaged"]
    assert "+two" in both["hunks"][0]["lines"] and "+x" in both["hunks"][1]["lines"]
    assert by_path["new name.txt"]["status"] == "renamed"
    assert by_path["new name.txt"]["old_path"] == "old name.txt"
    assert by_path["gone.txt"]["status"] == "deleted" and by_path["gone.txt"]["sides"] == ["unstaged"]
    assert by_path["ünï.txt"]["hunks"][0]["lines"] == ["-héllo", "+héllo wörld"]
    new = by_path["untracked dir/new.txt"]
    assert new["status"] == "added" and new["hunks"][0]["lines"] == ["+a", "+b", "\\ No newline at end of file"]
    assert new["hunks"][0]["new_lines"] == 2 and new["insertions"] == 2
    assert by_path["blob.bin"]["binary"] is True and by_path["blob.bin"]["hunks"] == []
    assert by_path["big.txt"]["content_omitted"] == "too_large"
    assert result["truncated"] is False and result["omitted_count"] == 0


def test_summary_cap_and_filter(dirty: Path):
    summary = repo_changes(found_of(str(dirty)), summary_only=True)
    both = next(c for c in summary["changes"] if c["path"] == "both.txt")
    assert "hunks" not in both and both["hunk_count"] == 2
    capped = repo_changes(found_of(str(dirty)), max_changes=2)
    assert len(capped["changes"]) == 2 and capped["truncated"] is True
    assert capped["omitted_count"] == capped["change_count"] - 2 == summary["change_count"] - 2
    assert [c["id"] for c in capped["changes"]] == ["change-1", "change-2"]
    only = repo_changes(found_of(str(dirty)), path_filter="untracked dir")
    assert [c["path"] for c in only["changes"]] == ["untracked dir/new.txt"]
    zero = repo_changes(found_of(str(dirty)), unified=0, path_filter="both.txt")
    assert all(" " not in line[:1] for h in zero["changes"][0]["hunks"] for line in h["lines"])
    with pytest.raises(FleetError) as info:
        repo_changes(found_of(str(dirty)), unified=21)
    assert info.value.code == "BAD_ARGUMENT"


def test_changes_in_empty_repo(tmp_path: Path):
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q")
    assert repo_changes(found_of(str(repo)))["changes"] == []
    write(repo / "a.txt", "a\n")
    git(repo, "add", "a.txt")
    write(repo / "b.txt", "b\n")
    result = repo_changes(found_of(str(repo)))
    assert [(c["path"], c["sides"], c["status"]) for c in result["changes"]] == [
        ("a.txt", ["staged"], "added"), ("b.txt", ["untracked"], "added")]
    status = repo_status(found_of(str(repo)))
    assert status["head"] is None and status["branch"] == "main" and status["detached"] is False
    assert status["staged"] == [{"path": "a.txt", "old_path": None, "status": "added"}]
    assert status["untracked"] == ["b.txt"]


def test_reads_never_touch_the_index(dirty: Path):
    os.utime(dirty / "both.txt", (1, 1))      # stale stat data: a plain `git status` would refresh the index
    index = dirty / ".git" / "index"
    before = hashlib.sha256(index.read_bytes()).hexdigest(), index.stat().st_mtime_ns
    repo_changes(found_of(str(dirty)))
    repo_status(found_of(str(dirty)))
    assert (hashlib.sha256(index.read_bytes()).hexdigest(), index.stat().st_mtime_ns) == before
    assert not (dirty / ".git" / "index.lock").exists()


def test_status_matches_porcelain(dirty: Path):
    status = repo_status(found_of(str(dirty)))
    assert status["branch"] == "main" and status["head"] == git(dirty, "rev-parse", "HEAD").strip()
    assert status["upstream"] is None and status["ahead"] is None
    assert {(e["path"], e["status"]) for e in status["staged"]} == {
        ("both.txt", "modified"), ("new name.txt", "renamed")}
    renamed = next(e for e in status["staged"] if e["status"] == "renamed")
    assert renamed["old_path"] == "old name.txt"
    assert {(e["path"], e["status"]) for e in status["unstaged"]} == {
        ("both.txt", "modified"), ("gone.txt", "deleted"), ("ünï.txt", "modified")}
    porcelain = git(dirty, "status", "--porcelain", "-z").split("\0")
    assert sorted(status["untracked"]) == sorted(e[3:] for e in porcelain if e.startswith("?? "))
    assert "untracked dir/" in status["untracked"]
    assert status["clean"] is False and status["counts"]["untracked"] == len(status["untracked"])
    capped = repo_status(found_of(str(dirty)), max_entries=1)
    assert capped["truncated"] and capped["omitted_count"] == sum(v - 1 for v in status["counts"].values() if v)


def test_status_upstream_detached_stash_gone(tmp_path: Path):
    repo = with_upstream(tmp_path, "up", ahead=2, behind=3)
    status = repo_status(found_of(str(repo)))
    assert (status["upstream"], status["ahead"], status["behind"]) == ("origin/main", 2, 3)
    assert git(repo, "rev-list", "--left-right", "--count", "HEAD...@{u}").split() == ["2", "3"]
    write(repo / "README.md", "stash me\n")
    git(repo, "stash", "-q")
    assert repo_status(found_of(str(repo)))["stashes"] == 1
    git(repo, "branch", "-q", "-r", "-d", "origin/main")
    gone = repo_status(found_of(str(repo)))
    assert gone["upstream"] == "origin/main" and gone["upstream_gone"] is True
    assert gone["ahead"] is None and gone["behind"] is None and "gone_upstream_name" not in gone
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    detached = repo_status(found_of(str(repo)))
    assert detached["detached"] is True and detached["branch"] is None
    assert detached["head"] == git(repo, "rev-parse", "HEAD").strip()


def test_status_in_merge_conflict(tmp_path: Path):
    repo = merge_conflict(tmp_path / "m")
    status = repo_status(found_of(str(repo)))
    assert status["operation"] == "merge"
    assert {(c["path"], c["kind"]) for c in status["conflicted"]} == {
        ("both.txt", "both_modified"), ("gone.txt", "deleted_by_them"), ("new.txt", "both_added"),
        ("img.bin", "both_modified")}
    listed = {line.split("\t")[-1] for line in git(repo, "diff", "--name-only", "--diff-filter=U").splitlines()}
    assert {c["path"] for c in status["conflicted"]} == listed
    changes = {c["path"]: c for c in repo_changes(found_of(str(repo)))["changes"]}
    assert changes["both.txt"]["status"] == "unmerged"


def test_user_diff_config_cannot_skew_parsing(tmp_path: Path):
    """diff.noprefix / mnemonicPrefix / submodule=log / suppressBlankEmpty change git's patch text; the
    parser must still give every file its own hunks."""
    sub = init_repo(tmp_path / "sub", commits=2)
    repo = init_repo(tmp_path / "host")
    git(repo, "submodule", "add", "-q", str(sub), "libs/sub")
    commit_file(repo, "z.txt", "a\n\nb\n", "add submodule and z")
    for key, value in (("diff.noprefix", "true"), ("diff.mnemonicPrefix", "true"),
                       ("diff.submodule", "log"), ("diff.suppressBlankEmpty", "true"), ("diff.context", "0")):
        git(repo, "config", key, value)
    git(repo / "libs" / "sub", "checkout", "-q", "HEAD~1")
    write(repo / "z.txt", "a\n\nB\n")
    changes = {c["path"]: c for c in repo_changes(found_of(str(repo)))["changes"]}
    assert set(changes) == {"libs/sub", "z.txt"}
    assert changes["libs/sub"]["hunks"][0]["lines"][0].startswith("-Subproject commit")
    assert changes["z.txt"]["hunks"][0]["lines"] == [" a", " ", "-b", "+B"]
    assert (changes["z.txt"]["insertions"], changes["z.txt"]["deletions"]) == (1, 1)
