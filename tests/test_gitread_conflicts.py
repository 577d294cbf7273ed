"""Conflict preflight (predicted, side-effect free) and conflict_read (a conflict in progress)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.git.revs import found_of
from fleet.repo.conflicts import conflict_preflight, conflict_read, marker_regions
from fleet.errors import FleetError
from fleet.git.layout import found_at
from tests.fleets.gitbuild import clone, commit_file, git, init_repo, with_upstream
from tests.fleets.hostile import snapshot
from tests.fleets.repo_states import cherry_pick_conflict, diverged, merge_conflict, rebase_conflict


@pytest.mark.parametrize("conflicting", [True, False])
def test_preflight_predicts_a_real_merge(tmp_path: Path, conflicting: bool):
    repo = diverged(tmp_path / "d", conflicting=conflicting)
    before = snapshot(repo)
    result = conflict_preflight(found_of(str(repo)), target="topic")
    assert snapshot(repo) == before
    assert result["merge_base"] == git(repo, "merge-base", "main", "topic").strip()
    assert result["side_effects"].startswith("none")
    trial = clone(repo, tmp_path / "trial")            # the oracle: really merge, in a throwaway clone
    git(trial, "merge", "-q", "origin/topic", "-m", "trial", check=False)
    unmerged = sorted(set(git(trial, "diff", "--name-only", "--diff-filter=U").split()))
    if conflicting:
        assert result["result"] == "conflicts" and result["conflicted_paths"] == unmerged == ["conflict.txt"]
        assert any("CONFLICT" in m["message"] for m in result["messages"])
    else:
        assert result["result"] == "clean" and result["conflicted_paths"] == unmerged == []
        assert result["merge_tree"] == git(trial, "rev-parse", "HEAD^{tree}").strip()


def test_preflight_up_to_date_fast_forward_and_upstream(tmp_path: Path):
    repo = diverged(tmp_path / "d", conflicting=False)
    assert conflict_preflight(found_of(str(repo)), target="HEAD~1")["result"] == "up_to_date"
    assert conflict_preflight(found_of(str(repo)), target="main", source="HEAD~1")["result"] == "fast_forward"
    with pytest.raises(FleetError) as info:
        conflict_preflight(found_of(str(repo)))
    assert info.value.code == "BAD_ARGUMENT" and "upstream" in info.value.message
    behind = with_upstream(tmp_path, "u", behind=2)
    default = conflict_preflight(found_of(str(behind)))
    assert default["target"] == "refs/remotes/origin/main" and default["result"] == "fast_forward"
    commit_file(behind, "mine.txt", "mine\n")
    assert conflict_preflight(found_of(str(behind)))["result"] == "clean"


def test_preflight_unrelated_histories(tmp_path: Path):
    repo = init_repo(tmp_path / "a")
    git(repo, "checkout", "-q", "--orphan", "alone")
    git(repo, "rm", "-q", "-rf", ".")
    commit_file(repo, "other.txt", "x\n")
    result = conflict_preflight(found_of(str(repo)), target="main")
    assert result["unrelated_histories"] and result["merge_base"] is None and result["result"] == "clean"


def test_read_merge_conflict(tmp_path: Path):
    repo = merge_conflict(tmp_path / "m")
    before = snapshot(repo)
    result = conflict_read(found_at(str(repo), str(repo)))
    assert snapshot(repo) == before
    assert result["in_conflict"] and result["operation"] == "merge" and not result["ours_theirs_inverted"]
    assert result["theirs"]["sha"] == git(repo, "rev-parse", "MERGE_HEAD").strip()
    assert result["ours"]["sha"] == git(repo, "rev-parse", "HEAD").strip()
    files = {f["path"]: f for f in result["files"]}
    assert {p: f["kind"] for p, f in files.items()} == {
        "both.txt": "both_modified", "gone.txt": "deleted_by_them", "new.txt": "both_added",
        "img.bin": "both_modified"}
    both = files["both.txt"]["sides"]
    assert both["base"]["content"] == "one\ntwo\nthree\n"
    assert both["ours"]["content"] == "one\nMAIN\nthree\n" and both["theirs"]["content"] == "one\nOTHER\nthree\n"
    assert both["ours"]["sha"] == git(repo, "rev-parse", ":2:both.txt").strip()
    assert files["gone.txt"]["sides"]["theirs"] is None and files["new.txt"]["sides"]["base"] is None
    assert files["img.bin"]["sides"]["ours"]["binary"] is True
    [region] = files["both.txt"]["regions"]
    lines = (repo / "both.txt").read_text().splitlines()
    assert lines[region["start_line"] - 1].startswith("<<<<<<<")
    assert lines[region["sep_line"] - 1] == "=======" and lines[region["end_line"] - 1].startswith(">>>>>>>")
    assert (region["context_before"], region["ours"], region["base"], region["theirs"], region["context_after"]) == (
        ["one"], ["MAIN"], None, ["OTHER"], ["three"])
    small = conflict_read(found_at(str(repo), str(repo)), max_bytes=4, max_files=1)
    assert small["truncated"] and small["omitted_count"] == 3 and small["conflicted_file_count"] == 4
    side = small["files"][0]["sides"]["ours"]
    assert side.get("binary") or (side["truncated"] and side["content"] is None
                                  and side["content_omitted"] == "too_large" and side["size"] > 4)


def test_read_rebase_inverts_ours_and_theirs(tmp_path: Path):
    repo = rebase_conflict(tmp_path / "r")
    result = conflict_read(found_at(str(repo), str(repo)))
    assert result["operation"] == "rebase" and result["ours_theirs_inverted"] is True
    assert "ONTO" in result["note"]
    assert result["operation_details"]["branch"] == "feature"
    assert result["operation_details"]["onto"] == git(repo, "rev-parse", "main").strip()
    [f] = result["files"]
    assert f["sides"]["ours"]["content"] == "upstream\n"          # the branch being rebased onto
    assert f["sides"]["theirs"]["content"] == "feature\n"         # your own commit being replayed
    assert result["theirs"]["subject"] == "feature edit"


def test_read_cherry_pick_and_nothing(tmp_path: Path):
    repo = cherry_pick_conflict(tmp_path / "c")
    result = conflict_read(found_at(str(repo), str(repo)))
    assert result["operation"] == "cherry-pick"
    assert result["theirs"]["sha"] == git(repo, "rev-parse", "donor").strip()
    assert result["files"][0]["kind"] == "both_modified"
    clean = init_repo(tmp_path / "clean")
    assert conflict_read(found_at(str(clean), str(clean))) == {"in_conflict": False, "operation": None, "files": [],
                                         "conflicted_file_count": 0, "truncated": False, "omitted_count": 0}


def test_marker_regions_diff3():
    data = b"a\n<<<<<<< ours\nx\n||||||| base\nb\n=======\ny\n>>>>>>> theirs\nz\n<<<<<<< lone\n"
    assert marker_regions(data) == [{"start_line": 2, "base_line": 4, "sep_line": 6, "end_line": 8}]


def test_read_returns_regions_deep_inside_a_big_file_first(tmp_path: Path):
    """Conflicts at lines ~2,061 and ~2,113 of a 2,400-line file: the regions with their context come back,
    the 40 KB sides do not (they do not fit the default 16 KB)."""
    repo = init_repo(tmp_path / "deep")
    header = "".join(f"# license header line {i}\n" for i in range(2000))
    body = [f"code line {i}\n" for i in range(400)]
    commit_file(repo, "big.py", header + "".join(body), "base")
    git(repo, "checkout", "-q", "-b", "topic")
    theirs = list(body)
    theirs[60], theirs[112] = "code line 60 THEIRS\n", "code line 112 THEIRS\n"
    commit_file(repo, "big.py", header + "".join(theirs), "theirs")
    git(repo, "checkout", "-q", "main")
    ours = list(body)
    ours[60], ours[112] = "code line 60 OURS\n", "code line 112 OURS\n"
    commit_file(repo, "big.py", header + "".join(ours), "ours")
    git(repo, "merge", "-q", "topic", check=False)
    result = conflict_read(found_at(str(repo), str(repo)))
    [f] = result["files"]
    working = (repo / "big.py").read_text().splitlines()
    assert [r["start_line"] for r in f["regions"]] == [n + 1 for n, line in enumerate(working) if line.startswith("<<<<<<<")]
    first, second = f["regions"]
    assert first["start_line"] > 2000
    assert first["ours"] == ["code line 60 OURS"] and first["theirs"] == ["code line 60 THEIRS"]
    assert first["context_before"] == working[first["start_line"] - 4:first["start_line"] - 1]
    assert first["context_after"] == working[first["end_line"]:first["end_line"] + 3]
    assert second["ours"] == ["code line 112 OURS"] and not second["text_omitted"]
    assert list(f)[:3] == ["path", "kind", "regions"]                        # regions come first
    for side in ("base", "ours", "theirs"):
        assert f["sides"][side]["content"] is None and f["sides"][side]["content_omitted"] == "too_large"
    assert len(str(result)) < 8000
    wide = conflict_read(found_at(str(repo), str(repo)), max_bytes=200_000, context_lines=10)
    assert wide["files"][0]["sides"]["ours"]["content"] == git(repo, "show", ":2:big.py")
    assert len(wide["files"][0]["regions"][0]["context_before"]) == 10
