"""repo_blame against `git blame --porcelain`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.repo.blame import repo_blame
from fleet.errors import FleetError
from tests.fleets.gitbuild import commit_file, git, init_repo, write


def _code(fn, *args, **kwargs) -> str:
    with pytest.raises(FleetError) as info:
        fn(*args, **kwargs)
    return info.value.code


def _oracle(repo: Path, *args: str) -> list[str]:
    """sha of each blamed line, from git's own porcelain output."""
    out = git(repo, "blame", "--porcelain", *args)
    return [line.split()[0] for line in out.splitlines()
            if len(line.split()) >= 3 and len(line.split()[0]) == 40 and not line.startswith("\t")
            and line.split()[1].isdigit()]


@pytest.fixture(scope="module")
def blamed(tmp_path_factory) -> Path:
    repo = init_repo(tmp_path_factory.mktemp("blame") / "b")
    commit_file(repo, "f name.txt", "".join(f"line {i}\n" for i in range(1, 11)), "ten lines")
    text = (repo / "f name.txt").read_text().replace("line 3\n", "line three\n").replace("line 8\n", "  line 8\n")
    commit_file(repo, "f name.txt", text, "edit 3 and 8")
    commit_file(repo, "other.txt", "".join(f"moved {i}\n" for i in range(1, 6)), "other")
    return repo


def _flat(result: dict) -> list[str]:
    return [r["sha"] for r in result["ranges"] for _ in range(r["end_line"] - r["start_line"] + 1)]


def test_blame_matches_git(blamed: Path):
    result = repo_blame(str(blamed), "f name.txt")
    assert _flat(result) == _oracle(blamed, "--", "f name.txt")
    assert result["line_count"] == 10 and result["truncated"] is False
    edit = git(blamed, "rev-parse", "HEAD~1").strip()
    three = next(r for r in result["ranges"] if r["start_line"] == 3)
    assert three["sha"] == edit and three["lines"] == ["line three"]
    commit = next(c for c in result["commits"] if c["sha"] == edit)
    assert commit["summary"] == "edit 3 and 8" and commit["author"] == "Test Person"
    assert commit["author_time"] == int(git(blamed, "log", "-1", "--format=%at", edit))
    assert sum(r["end_line"] - r["start_line"] + 1 for r in result["ranges"]) == 10


def test_blame_ranges_and_options(blamed: Path):
    part = repo_blame(str(blamed), "f name.txt", start_line=2, end_line=4)
    assert (part["start_line"], part["end_line"]) == (2, 4)
    assert _flat(part) == _oracle(blamed, "-L2,4", "--", "f name.txt")
    clamped = repo_blame(str(blamed), "f name.txt", start_line=9, end_line=500)
    assert clamped["end_line"] == 10 and clamped["truncated"] is False
    assert _code(repo_blame, str(blamed), "f name.txt", start_line=11) == "BAD_ARGUMENT"
    assert _code(repo_blame, str(blamed), "f name.txt", start_line=5, end_line=4) == "BAD_ARGUMENT"
    assert _code(repo_blame, str(blamed), "f name.txt", start_line=0) == "BAD_ARGUMENT"
    capped = repo_blame(str(blamed), "f name.txt", max_lines=4)
    assert capped["end_line"] == 4 and capped["truncated"] and capped["omitted_count"] == 6
    at_ref = repo_blame(str(blamed), "f name.txt", ref="HEAD~2")
    assert {r["sha"] for r in at_ref["ranges"]} == {git(blamed, "rev-parse", "HEAD~2").strip()}
    ws = repo_blame(str(blamed), "f name.txt", ignore_whitespace=True)
    assert _flat(ws) == _oracle(blamed, "-w", "--", "f name.txt")
    assert _flat(ws)[7] != _flat(repo_blame(str(blamed), "f name.txt"))[7]
    moves = repo_blame(str(blamed), "other.txt", detect_moves=True)
    assert _flat(moves) == _oracle(blamed, "-M", "-C", "--", "other.txt")


def test_blame_errors_and_uncommitted(blamed: Path, tmp_path: Path):
    assert _code(repo_blame, str(blamed), "missing.txt") == "NOT_FOUND"
    assert _code(repo_blame, str(blamed), "f name.txt", ref="HEAD~3") == "NOT_FOUND"
    assert _code(repo_blame, str(blamed), "../outside") == "BAD_PATH"
    assert _code(repo_blame, str(blamed), "/etc/passwd") == "BAD_PATH"
    assert _code(repo_blame, str(blamed), "f name.txt", ref="nope") == "BAD_REF"
    repo = init_repo(tmp_path / "u")
    commit_file(repo, "a.txt", "one\ntwo\n")
    write(repo / "a.txt", "one\nTWO\n")
    result = repo_blame(str(repo), "a.txt")
    assert [c["uncommitted"] for c in result["commits"]] == [False, True]
    assert result["ranges"][1]["lines"] == ["TWO"]


def test_blame_of_a_binary_file_says_binary_and_sends_no_bytes(tmp_path: Path):
    repo = init_repo(tmp_path / "bin")
    payload = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 4 + b"\nmore\n"
    write(repo / "logo.png", payload)
    git(repo, "add", "logo.png")
    git(repo, "commit", "-q", "-m", "logo")
    assert "-\t-\tlogo.png" in git(repo, "diff", "--numstat", "HEAD~1", "HEAD")   # git calls it binary too
    for ref in ("HEAD", None):
        result = repo_blame(str(repo), "logo.png", ref=ref)
        assert result["binary"] is True and result["ranges"] == [] and result["commits"] == []
        assert result["line_count"] is None and result["truncated"] is False
    text = repo_blame(str(repo), "README.md")
    assert text["binary"] is False and text["line_count"] == 1 and text["ranges"]


def _line_oracle(repo: Path, *args: str) -> list[dict]:
    """Each blamed line's commit as the answer gives it, from `git blame --line-porcelain` (every line with
    its commit's full details: parsed here line by line, apart from the parser under test)."""
    lines, entry = [], None
    for line in git(repo, "blame", "--line-porcelain", *args).split("\n"):
        if line.startswith("\t"):
            lines.append((entry, line[1:]))
            entry = None
        elif entry is None and line:
            sha = line.split(" ")[0]
            entry = {"sha": sha, "uncommitted": set(sha) == {"0"}, "boundary": False, "previous": None}
        elif line:
            key, _, value = line.partition(" ")
            if key == "boundary":
                entry["boundary"] = True
            elif key == "previous":
                entry["previous"] = dict(zip(("sha", "filename"), value.split(" ", 1)))
            elif key == "author-mail":
                entry["author_email"] = value.strip("<>") or None
            elif key in ("author-time", "committer-time"):
                entry[key.replace("-", "_")] = int(value)
            elif key in ("author", "author-tz", "committer", "summary", "filename"):
                entry[key.replace("-", "_")] = value
    return lines


def test_blame_commits_match_line_porcelain(tmp_path: Path):
    """Every field of every commit and line, against git: a boundary commit, `previous`, lines copied from
    another file (another `filename`), non-ASCII names and text, a tab in a line, uncommitted lines."""
    repo = init_repo(tmp_path / "lp")
    commit_file(repo, "src.txt", "".join(f"shared line number {i} with enough text to be moved\n"
                                         for i in range(8)), "source")
    commit_file(repo, "f.txt", "a\nb\tc\nd\n", "first")
    write(repo / "f.txt", "a\nB\tC\nd\n" + (repo / "src.txt").read_text() + "é ünï\n")
    write(repo / "src.txt", "src changed too\n")   # git -C looks for copies in files changed in the same commit
    git(repo, "add", "f.txt", "src.txt")
    git(repo, "commit", "-q", "--author=Zoë Ünïcode <zoe@example.com>", "-m", "säge: copy\tand edit")
    write(repo / "f.txt", (repo / "f.txt").read_text() + "uncommitted\n")
    cases = [("f.txt", {}, ("--", "f.txt")), ("f.txt", {"detect_moves": True}, ("-M", "-C", "--", "f.txt")),
             ("f.txt", {"ref": "HEAD"}, ("HEAD", "--", "f.txt")), ("README.md", {"ref": "HEAD"}, ("HEAD", "--", "README.md"))]
    answers = []
    for name, kwargs, args in cases:
        result = repo_blame(str(repo), name, **kwargs)
        expected = _line_oracle(repo, *args)
        by_sha = {c["sha"]: c for c in result["commits"]}
        got = [(by_sha[r["sha"]], text) for r in result["ranges"] for text in r["lines"]]
        assert [text for _, text in got] == [text for _, text in expected]
        for (commit, _), (oracle, _) in zip(got, expected):
            if oracle["uncommitted"]:   # git stamps "Not Committed Yet" with the time of each run: two runs here
                times = {key: commit[key] for key in ("author_time", "committer_time")}
                assert all(abs(times[key] - oracle[key]) <= 2 for key in times), (times, oracle)
                oracle = {**oracle, **times}
            assert commit == oracle, (kwargs, oracle["sha"])
        assert [c["sha"] for c in result["commits"]] == list(dict.fromkeys(o["sha"] for o, _ in expected))
        answers.append(result["commits"])
    worktree, moved, at_head, root = answers
    assert any(c["uncommitted"] for c in worktree) and not any(c["uncommitted"] for c in at_head)
    assert any(c["filename"] == "src.txt" for c in moved)   # the copy was found in src.txt
    assert root[0]["boundary"] and any(c["previous"] for c in at_head)   # the root commit is a boundary
    assert any(c["author"] == "Zoë Ünïcode" and c["author_email"] == "zoe@example.com"
               and c["summary"].startswith("säge: copy") for c in at_head)
