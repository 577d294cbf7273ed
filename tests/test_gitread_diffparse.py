"""The diff parser against hand-made edge cases and against git's own numstat/name-status."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fleet.git.diffparse import parse_diff, parse_numstat, split_numstat
from tests.fleets.gitbuild import git, init_repo, write
from tests.fleets.repo_states import rich_repo


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), "-c", "core.quotePath=true", *args],
                          capture_output=True, check=True).stdout


def test_omitted_counts_and_tricky_lines():
    raw = (b":100644 100644 aaaaaaa bbbbbbb M\0f\0\0"
           b"diff --git a/f b/f\nindex aaaaaaa..bbbbbbb 100644\n--- a/f\n+++ b/f\n"
           b"@@ -1 +1 @@\n--- not a header\n+++ not a header either\n"
           b"@@ -5,2 +5,3 @@ def section():\n context\n-old\n+new\n+diff --git a/x b/x\n"
           b"\\ No newline at end of file\n")
    [change] = parse_diff(raw)
    assert change["status"] == "modified" and change["path"] == "f"
    first, second = change["hunks"]
    assert (first["old_start"], first["old_lines"], first["new_start"], first["new_lines"]) == (1, 1, 1, 1)
    assert first["lines"] == ["--- not a header", "+++ not a header either"]
    assert second["header"] == "@@ -5,2 +5,3 @@ def section():"
    assert second["lines"][-2:] == ["+diff --git a/x b/x", "\\ No newline at end of file"]
    assert (change["insertions"], change["deletions"]) == (3, 2)


def test_empty_and_raw_only():
    assert parse_diff(b"") == []
    [change] = parse_diff(b":000000 100644 0000000 1234567 A\0new file\0")
    assert change["status"] == "added" and change["old_mode"] is None and change["hunks"] == []


def test_unmerged_entries_take_no_git_section():
    raw = (b":100644 000000 2299c37 0000000 U\0f.txt\0:100644 100644 aaaaaaa bbbbbbb M\0g.txt\0\0"
           b"* Unmerged path f.txt\n"
           b"diff --git a/g.txt b/g.txt\nindex aaaaaaa..bbbbbbb 100644\n--- a/g.txt\n+++ b/g.txt\n"
           b"@@ -1 +1 @@\n-x\n+y\n")
    unmerged, modified = parse_diff(raw)
    assert unmerged["status"] == "unmerged" and unmerged["hunks"] == []
    assert modified["hunks"][0]["lines"] == ["-x", "+y"]
    [combined] = parse_diff(b"::100644 100644 100644 2299c37 4f213f7 0000000 MM\0f.txt\0")
    assert combined["status"] == "unmerged" and combined["path"] == "f.txt"


def test_numstat_rename_record():
    data = b"1\t2\tplain.txt\0" b"0\t0\t\0old name\0new name\0" b"-\t-\tbin\0"
    assert parse_numstat(data) == [
        {"path": "plain.txt", "old_path": None, "insertions": 1, "deletions": 2, "binary": False},
        {"path": "new name", "old_path": "old name", "insertions": 0, "deletions": 0, "binary": False},
        {"path": "bin", "old_path": None, "insertions": None, "deletions": None, "binary": True},
    ]


def _oracle(repo: Path, *revs: str) -> dict[str, tuple]:
    """path -> (status letter, old path, insertions, deletions) from git's numstat and name-status."""
    numstat = {r["path"]: r for r in parse_numstat(git_bytes(repo, "diff", "--numstat", "-z", "-M", *revs))}
    names = git_bytes(repo, "diff", "--name-status", "-z", "-M", *revs).split(b"\0")
    result = {}
    i = 0
    while i < len(names) - 1:
        letter = names[i].decode()[0]
        if letter in "RC":
            old, new = names[i + 1].decode(errors="replace"), names[i + 2].decode(errors="replace")
            i += 3
        else:
            old, new = None, names[i + 1].decode(errors="replace")
            i += 2
        result[new] = (letter, old, numstat[new]["insertions"], numstat[new]["deletions"])
    return result


LETTER = {"added": "A", "modified": "M", "deleted": "D", "renamed": "R", "copied": "C", "type_changed": "T"}


def test_matches_git_on_real_history(tmp_path):
    repo = rich_repo(tmp_path / "rich")
    # Names git must quote in a patch header: tab, quote, backslash, newline, non-UTF-8.
    odd = [b"tab\there", b'quo"te', b"back\\slash", b"new\nline", b"lat\xe9n1", b"a b/c d"]
    for name in odd:
        target = os.path.join(os.fsencode(repo), name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(b"caf\xe9 latin-1 content\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "odd names")
    write(repo / "ünï.txt", "changed\n")
    os.unlink(repo / "link")
    write(repo / "link", "now a file\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "type change")
    for revs in (("HEAD~5", "HEAD~4"), ("HEAD~4", "HEAD~3"), ("HEAD~2", "HEAD~1"), ("HEAD~1", "HEAD"),
                 ("HEAD~5", "HEAD")):
        parsed = parse_diff(git_bytes(repo, "diff", "-z", "--raw", "--patch", "-M", *revs))
        ours = {c["path"]: (LETTER[c["status"]], c["old_path"], c["insertions"], c["deletions"]) for c in parsed}
        assert ours == _oracle(repo, *revs), revs
    odd_change = {c["path"]: c for c in parse_diff(git_bytes(repo, "diff", "-z", "--raw", "-p", "HEAD~2", "HEAD~1"))}
    assert "new\nline" in odd_change and "tab\there" in odd_change and "lat\ufffdn1" in odd_change
    assert odd_change["quo\"te"]["hunks"][0]["lines"] == ["+caf\ufffd latin-1 content"]
    changes = {c["path"]: c for c in parse_diff(git_bytes(repo, "diff", "-z", "--raw", "-p", "-M", "HEAD~5", "HEAD~4"))}
    assert changes["data.bin"]["binary"] is True
    assert changes["tool.sh"]["old_mode"] == "100644" and changes["tool.sh"]["new_mode"] == "100755"
    assert changes["src/main.py"]["old_path"] == "src/app.py" and changes["src/main.py"]["similarity"] >= 50
    assert changes["nonl.txt"]["hunks"][0]["lines"][-1] == "\\ No newline at end of file"
    assert changes["link"]["new_mode"] == "120000"
    typed = {c["path"]: c for c in parse_diff(git_bytes(repo, "diff", "-z", "--raw", "-p", "HEAD~1", "HEAD"))}
    assert typed["link"]["status"] == "type_changed"
    assert [h["lines"][0][0] for h in typed["link"]["hunks"]] == ["-", "+"]


def test_entry_without_its_section_takes_no_hunks():
    raw = (b":100644 100644 aaaaaaa ccccccc M\0a\0:100644 100644 aaaaaaa bbbbbbb M\0b\0\0"
           b"diff --git a/b b/b\nindex aaaaaaa..bbbbbbb 100644\n--- a/b\n+++ b/b\n@@ -1 +1 @@\n-x\n+y\n")
    a, b = parse_diff(raw)
    assert a["hunks"] == [] and b["hunks"][0]["lines"] == ["-x", "+y"]


def test_stat_dirty_entry_plumbing_lists_without_a_patch_is_not_a_change():
    """diff-files lists a touched-but-unchanged file with an unhashed side and prints no patch for it."""
    raw = (b":100644 100644 aaaaaaa 0000000 M\0same\0:100644 100755 aaaaaaa 0000000 M\0mode\0"
           b":100644 100644 aaaaaaa 0000000 M\0real\0\0"
           b"diff --git a/mode b/mode\nold mode 100644\nnew mode 100755\n"
           b"diff --git a/real b/real\nindex aaaaaaa..bbbbbbb 100644\n--- a/real\n+++ b/real\n@@ -1 +1 @@\n-x\n+y\n")
    assert [c["path"] for c in parse_diff(raw)] == ["mode", "real"]


@pytest.mark.parametrize("name", ["plain.txt", "sp ace", 'quo"te', "back\\slash", "tab\there", "new\nline",
                                  "café", "del\x7f", "bell\x07"])
def test_path_quoting_round_trips_and_matches_git(tmp_path, name):
    """One C-style quoting for the whole tree: what git prints in headers, and back."""
    from fleet.git.patchtext import quote_path, quote_text, unquote_path

    repo = init_repo(tmp_path / "r", commits=1)
    write(repo / name, "x\n")
    git(repo, "add", "--", name)
    header = git(repo, "-c", "core.quotePath=false", "diff", "--cached", "--no-color").splitlines()[0]
    expected = "diff --git " + quote_text("a/" + name) + " " + quote_text("b/" + name)
    assert header == expected
    assert unquote_path(quote_text(name)) == name
    assert quote_path(name.encode(), high=True).startswith(b'"') == (name != "plain.txt" and name != "sp ace")


def test_numstat_and_patch_from_one_git_run_equal_two_runs(tmp_path):
    """diff.text asks git once for `--numstat -z --patch`: the split gives what two separate runs give."""
    repo = init_repo(tmp_path / "z")
    write(repo / "we ird\tname\nx.txt", "a\n")
    write(repo / "é.txt", "a\n")
    write(repo / "r.txt", "".join(f"{i}\n" for i in range(50)))
    write(repo / "img.bin", b"\0\1\2")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    write(repo / "we ird\tname\nx.txt", "b\n")
    write(repo / "é.txt", "b\n")
    write(repo / "img.bin", b"\0\1\3")
    git(repo, "mv", "r.txt", "s.txt")
    for cmd in (["diff-files"], ["diff-index", "--cached", "HEAD"], ["diff-index", "HEAD"]):
        records, patch = split_numstat(git(repo, *cmd, "--numstat", "-z", "--patch", "-M").encode())
        assert patch.decode() == git(repo, *cmd, "--patch", "-M")
        assert records == parse_numstat(git(repo, *cmd, "--numstat", "-z", "-M").encode()) and records
    assert split_numstat(b"") == ([], b"")
