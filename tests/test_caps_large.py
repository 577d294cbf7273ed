"""Caps are caps: commit.details and diff.refs stay within max_bytes plus the documented envelope on a
commit touching 500 files and on a file with 300 hunks; every level that was cut says so, and counts add up
to what git says. The per-file hunk cap can be raised."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.repo.jsonbudget import ENVELOPE
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import git
from tests.fleets.mcp_fleet import call, ok

pytestmark = pytest.mark.slow

FILES = 500
HUNKS = 300


def _blob(text: str) -> str:
    data = text.encode()
    return f"data {len(data)}\n{text}\n"


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("caps")
    repo = base / "root" / "wide"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    old = "".join(f"line {i}\n" for i in range(HUNKS * 8))
    new = "".join(f"line {i}{' changed' if i % 8 == 4 else ''}\n" for i in range(HUNKS * 8))
    stream = ["commit refs/heads/main\ncommitter T <t@e> 1600000000 +0000\n", _blob("base")]
    stream += [f"M 644 inline f/{n:03d}.txt\n" + _blob("".join(f"{n} row {i}\n" for i in range(40)))
               for n in range(FILES)]
    stream.append("M 644 inline many.txt\n" + _blob(old))
    stream.append("\ncommit refs/heads/main\ncommitter T <t@e> 1600000100 +0000\n" + _blob("touch 500 files"))
    stream += [f"M 644 inline f/{n:03d}.txt\n" + _blob("".join(f"{n} row {i}{' x' if i % 10 == 0 else ''}\n"
                                                              for i in range(40))) for n in range(FILES)]
    stream.append("\ncommit refs/heads/main\ncommitter T <t@e> 1600000200 +0000\n" + _blob("300 hunks"))
    stream.append("M 644 inline many.txt\n" + _blob(new) + "\n")
    git(repo, "fast-import", "--quiet", input="".join(stream).encode())
    git(repo, "reset", "-q", "--hard", "main")
    index = open_index(base / "fleet.db")
    scan(index, [str(base / "root")])
    index.close()
    return {"repo": repo, "server": build_server(str(base / "fleet.db"))}


def _hunks(repo: Path, a: str, b: str, path: str) -> int:
    return sum(1 for line in git(repo, "diff", "-U3", a, b, "--", path).splitlines() if line.startswith("@@"))


def _check_levels(result: dict) -> None:
    """Every level's kept + omitted adds up, and the top-level flag agrees with the levels."""
    cut = result["omitted_count"] > 0
    for change in result["changes"]:
        for hunk in change["hunks"]:
            assert hunk["truncated"] == (hunk["omitted_count"] > 0)
            cut = cut or hunk["truncated"]
        assert change["truncated"] == (change["omitted_count"] > 0 or any(h["truncated"] for h in change["hunks"]))
        cut = cut or change["truncated"]
    assert result["truncated"] == cut
    assert len(result["changes"]) + result["omitted_count"] == result["file_count"]


def _check_against_git(repo: Path, result: dict, a: str, b: str) -> None:
    """What was kept is git's own patch, cut: each file's +/- counts, its hunks' headers and lines (a prefix),
    and at every cut level the omitted count is what git printed beyond it."""
    numstat = {line.split("\t")[2]: line.split("\t")[:2] for line in git(repo, "diff", "--numstat", a, b).splitlines()}
    for change in result["changes"]:
        assert [str(change["insertions"]), str(change["deletions"])] == numstat[change["path"]]
        hunks = git(repo, "diff", "-U3", a, b, "--", change["path"]).split("\n@@")[1:]
        assert len(change["hunks"]) + change["omitted_count"] == len(hunks)
        for ours, theirs in zip(change["hunks"], hunks):
            header, *lines = ("@@" + theirs).rstrip("\n").split("\n")
            assert ours["header"] == header
            assert ours["lines"] == lines[:len(ours["lines"])]
            assert len(ours["lines"]) + ours["omitted_count"] == len(lines)


@pytest.mark.parametrize("max_bytes", [None, 20000, 4096])
async def test_commit_details_on_500_files_stays_within_max_bytes(wide, max_bytes):
    args = {"repo": "wide", "rev": "HEAD~1", "max_files": 5000}
    if max_bytes:
        args["max_bytes"] = max_bytes
    result = await call(wide["server"], "commit.details", args)
    body = ok(result)
    limit = max_bytes or 256 * 1024
    assert len(result.content[0].text.encode()) <= limit + ENVELOPE
    assert body["file_count"] == FILES == len(git(wide["repo"], "diff", "--name-only", "HEAD~2", "HEAD~1").split())
    assert body["truncated"] is True
    _check_levels(body)
    shown = [c["path"] for c in body["changes"]]
    assert shown == sorted(shown) and shown == [f"f/{n:03d}.txt" for n in range(len(shown))]
    _check_against_git(wide["repo"], body, "HEAD~2", "HEAD~1")


async def test_diff_refs_hunk_cap_is_raisable_and_budgeted(wide):
    repo = wide["repo"]
    total = _hunks(repo, "HEAD~1", "HEAD", "many.txt")
    assert total == HUNKS
    capped = ok(await call(wide["server"], "diff.refs", {"repo": "wide", "base": "HEAD~1", "max_bytes": 1 << 20}))
    (change,) = capped["changes"]
    assert len(change["hunks"]) == 200 and change["omitted_count"] == total - 200 and change["truncated"]
    assert capped["hunks_omitted_count"] == total - 200 and capped["truncated"]
    raised = ok(await call(wide["server"], "diff.refs", {"repo": "wide", "base": "HEAD~1", "max_bytes": 1 << 20,
                                                          "max_hunks": 1000}))
    assert len(raised["changes"][0]["hunks"]) == total and raised["truncated"] is False
    assert [h["header"] for h in raised["changes"][0]["hunks"]] == [
        line for line in git(repo, "diff", "HEAD~1", "HEAD", "--", "many.txt").splitlines() if line.startswith("@@")]
    small = await call(wide["server"], "diff.refs", {"repo": "wide", "base": "HEAD~2", "max_bytes": 8192,
                                                     "max_hunks": 1000})
    assert len(small.content[0].text.encode()) <= 8192 + ENVELOPE
    _check_levels(ok(small))
    _check_against_git(repo, ok(small), "HEAD~2", "HEAD")
    for max_bytes in (2000, 9000, 60000):   # the one big file cut inside its hunks, at several depths
        cut = ok(await call(wide["server"], "diff.refs", {"repo": "wide", "base": "HEAD~1", "path_filter": "many.txt",
                                                          "max_bytes": max_bytes, "max_hunks": 1000}))
        _check_levels(cut)
        _check_against_git(repo, cut, "HEAD~1", "HEAD")
        assert cut["changes"][0]["truncated"] and cut["lines_omitted_count"] + cut["hunks_omitted_count"] > 0
    one_line = ok(await call(wide["server"], "diff.refs", {"repo": "wide", "base": "HEAD~1", "max_bytes": 1 << 20,
                                                            "max_hunk_lines": 2}))
    hunk = one_line["changes"][0]["hunks"][0]
    patch = git(repo, "diff", "HEAD~1", "HEAD", "--", "many.txt").split("\n@@")[1].split("\n")[1:]
    assert len(hunk["lines"]) == 2 and hunk["truncated"] and hunk["omitted_count"] == len(patch) - 2
