"""The diff parser against hand-made edge cases and against git's own numstat/name-status."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fleet.git.diffparse import index_diff, parse_diff, parse_numstat, split_numstat
from fleet.repo.jsonbudget import shape_changes
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


def _hunks_from_git(repo: Path, revs: tuple[str, str], change: dict) -> list[tuple[str, list[str]]]:
    """(header, lines) of each hunk of one file, from git's patch of that file alone (its own run: the
    pathspec is literal, and a rename/copy is diffed between its two paths)."""
    paths = [change["old_path"], change["path"]] if change["old_path"] else [change["path"]]
    flags = ["--find-copies-harder", "-C"] if change["status"] == "copied" else ["-M"]
    patch = git_bytes(repo, "--literal-pathspecs", "diff", "--no-color", "--no-ext-diff", *flags, *revs,
                      "--", *paths).decode("utf-8", "replace")
    hunks: list[tuple[str, list[str]]] = []
    for line in patch.split("\n")[:-1]:
        if line.startswith("@@"):
            hunks.append((line, []))
        elif hunks:
            hunks[-1][1].append(line or " ")
    return hunks


@pytest.mark.parametrize("quote_path", ["true", "false"])
def test_changes_and_hunks_match_git_file_by_file(tmp_path, quote_path):
    """Renames, copies, binary files, mode changes, several hunks, non-ASCII and newline-in-path names: each
    change's status, paths, counts and every hunk (header and lines) equal git's own."""
    repo = init_repo(tmp_path / "fb")
    long = "".join(f"line {i}\n" for i in range(60))
    names = ["plain.txt", "ünï cödé.txt", "new\nline.txt", 'quo"te.txt', "tab\there.txt"]
    for name in names:
        write(repo / name, long)
    write(repo / "copy_src.txt", "".join(f"copied line {i} with some text\n" for i in range(30)))
    write(repo / "moved.txt", "".join(f"moved line {i} with some text\n" for i in range(30)))
    write(repo / "logo.bin", b"\0\1\2binary\0" * 50)
    write(repo / "tool.sh", "echo hi\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for name in names:
        text = long.replace("line 3\n", "line three\n").replace("line 40\n", "").replace("line 55\n", "55\n+x\n")
        write(repo / name, text)
    write(repo / "copy.txt", (repo / "copy_src.txt").read_text() + "one more\n")
    (repo / "renamed dir").mkdir()
    git(repo, "mv", "moved.txt", "renamed dir/moved ñ.txt")
    write(repo / "logo.bin", b"\0\1\2binary\0" * 51)
    os.chmod(repo / "tool.sh", 0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "edits")
    revs = ("HEAD~1", "HEAD")
    raw = subprocess.run(["git", "-C", str(repo), "-c", f"core.quotePath={quote_path}", "diff", "-z", "--raw",
                          "--patch", "--find-copies-harder", "-C", "-M", *revs],
                         capture_output=True, check=True).stdout
    changes = {c["path"]: c for c in parse_diff(raw)}
    assert set(changes) == set(names) | {"copy.txt", "renamed dir/moved ñ.txt", "logo.bin", "tool.sh"}
    assert changes["copy.txt"]["status"] == "copied" and changes["copy.txt"]["old_path"] == "copy_src.txt"
    moved = changes["renamed dir/moved ñ.txt"]
    assert (moved["status"], moved["old_path"], moved["similarity"]) == ("renamed", "moved.txt", 100)
    assert changes["logo.bin"]["binary"] is True and changes["logo.bin"]["hunks"] == []
    assert (changes["tool.sh"]["old_mode"], changes["tool.sh"]["new_mode"]) == ("100644", "100755")
    assert changes["tool.sh"]["hunks"] == []
    for path, change in changes.items():
        ours = [(h["header"], h["lines"]) for h in change["hunks"]]
        assert ours == _hunks_from_git(repo, revs, change), path
        if not change["binary"]:
            lines = [line for h in change["hunks"] for line in h["lines"]]
            assert change["insertions"] == sum(line[:1] == "+" for line in lines)
            assert change["deletions"] == sum(line[:1] == "-" for line in lines)
    assert len(changes["plain.txt"]["hunks"]) == 3
    assert ours_numstat(raw) == parse_numstat(git_bytes(repo, "diff", "--numstat", "-z", "--find-copies-harder",
                                                        "-C", "-M", *revs))


def ours_numstat(raw: bytes) -> list[dict]:
    """parse_diff's changes as numstat records, in numstat's (git's) order."""
    return [{k: c[k] for k in ("path", "old_path", "insertions", "deletions", "binary")} for c in parse_diff(raw)]


def test_an_at_at_line_that_is_no_hunk_header_joins_the_hunk_before():
    """git never prints one; if it did, the line is skipped and its lines join the hunk before it (and a
    change without one is parsed the quick way to the same result)."""
    head = b":100644 100644 aaaaaaa bbbbbbb M\0f\0\0diff --git a/f b/f\n--- a/f\n+++ b/f\n"
    good = head + b"@@ -1,2 +1,2 @@ ctx\n-a\n+b\n x\n@@ -9 +9 @@\n-c\n+d\n"
    bad = head + b"@@ -1,2 +1,2 @@ ctx\n-a\n+b\n@@ no header\n x\n@@ -9 +9 @@\n-c\n+d\n"
    [ok] = parse_diff(good)
    [odd] = parse_diff(bad)
    assert [(h["header"], h["lines"]) for h in ok["hunks"]] == [("@@ -1,2 +1,2 @@ ctx", ["-a", "+b", " x"]),
                                                                 ("@@ -9 +9 @@", ["-c", "+d"])]
    assert odd["hunks"] == ok["hunks"]
    assert (odd["insertions"], odd["deletions"]) == (ok["insertions"], ok["deletions"]) == (2, 2)


def test_a_cut_at_any_byte_budget_keeps_a_prefix_of_the_full_parse(tmp_path):
    """shape_changes at budgets from tiny to whole: the changes' JSON stays within the budget, each kept hunk's
    lines are the first lines of git's, and every line left out is counted where it was cut."""
    repo = init_repo(tmp_path / "cut")
    for n in range(6):
        write(repo / f"f{n} ü.txt", "".join(f"line {i}\n" for i in range(80)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for n in range(6):
        write(repo / f"f{n} ü.txt", "".join(f"line {i}{' édité' if i % 9 == n else ''}\n" for i in range(80)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "edits")
    raw = git_bytes(repo, "-c", "core.quotePath=false", "diff", "-z", "--raw", "--patch", "-M", "HEAD~1", "HEAD")
    full = {c["path"]: c for c in parse_diff(raw)}
    total_lines = sum(len(h["lines"]) for c in full.values() for h in c["hunks"])
    for budget in (300, 700, 1500, 2600, 4000, 7000, 12000, 100000):
        shaped = shape_changes(index_diff(raw), 50, budget)
        assert len(shaped["changes"].encode().encode()) <= budget
        kept_lines = 0
        for change in shaped["changes"]:
            whole = full[change["path"]]
            assert change["insertions"] == whole["insertions"] and change["deletions"] == whole["deletions"]
            for hunk, git_hunk in zip(change["hunks"], whole["hunks"]):
                assert hunk["header"] == git_hunk["header"]
                assert hunk["lines"] == git_hunk["lines"][:len(hunk["lines"])]
                assert hunk["omitted_count"] == len(git_hunk["lines"]) - len(hunk["lines"])
                kept_lines += len(hunk["lines"])
            assert change["omitted_count"] == len(whole["hunks"]) - len(change["hunks"])
        dropped = [c for c in full.values() if c["path"] not in {k["path"] for k in shaped["changes"]}]
        assert shaped["omitted_count"] == len(dropped)
        hunk_lines = sum(len(h["lines"]) for c in dropped for h in c["hunks"])
        cut_hunk_lines = sum(len(h["lines"]) for c in shaped["changes"] for h in full[c["path"]]["hunks"]
                             [len(c["hunks"]):])
        assert kept_lines + shaped["lines_omitted_count"] + hunk_lines + cut_hunk_lines == total_lines
        assert shaped["truncated"] == (kept_lines < total_lines)


def test_whole_changes_are_written_as_the_encoder_would_and_counted_as_numstat_does(tmp_path):
    """A change that fits whole is written from git's bytes (fleet.repo.jsonbudget._hunk_json) and counted from its
    hunk headers: the text must be byte for byte json.dumps of the change, lines as the line-by-line parse
    gives them and +/- as git's numstat, for every kind of body: tabs, CR, quotes, backslashes, control
    bytes, invalid UTF-8, blank lines printed empty (diff.suppressBlankEmpty), a missing final newline,
    several hunks, an added and a deleted file, a binary one."""
    repo = init_repo(tmp_path / "bodies")
    bodies = {
        "plain.txt": b"".join(b"line %d\n" % i for i in range(40)),
        "tabs.go": b"".join(b"\tfunc f%d() {\n\t\treturn %d\n\t}\n" % (i, i) for i in range(12)),
        "crlf.txt": b"".join(b"dos line %d\r\n" % i for i in range(20)),
        "quotes.py": b"".join(b'print("q %d \\\\ back")\n' % i for i in range(20)),
        "ctrl.txt": b"bell \x07 here\nesc \x1b[0m\n" * 5,
        "latin1.txt": b"caf\xe9 %d\n" * 10,
        "utf8.txt": "naïve ☃ “quoted”\n".encode() * 10,
        "blank.txt": b"a\n\nb\n\n\nc\n" * 8,
        "nonl.txt": b"first\nlast without newline",
        "gone.txt": b"to be deleted\n" * 3,
        "bin.dat": b"\0binary\n",
        "at.txt": b"".join(b"@@ -%d +%d @@ me@example.com\n" % (i, i) for i in range(40)),   # `@` in every line
    }
    for name, data in bodies.items():
        (repo / name).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for name, data in bodies.items():
        lines = data.split(b"\n")
        lines[1::15] = [line + b" edited\t\"x\"" for line in lines[1::15]]
        (repo / name).write_bytes(b"\n".join(lines) + (b"" if name == "nonl.txt" else b"\nappended"))
    (repo / "gone.txt").unlink()
    (repo / "new.txt").write_bytes(b"brand\tnew\n\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "edits")
    oracle = _oracle(repo, "HEAD~1", "HEAD")
    for blank in ("false", "true"):
        raw = git_bytes(repo, "-c", f"diff.suppressBlankEmpty={blank}", "diff", "-z", "--raw", "--patch",
                        "HEAD~1", "HEAD")
        full = {c["path"]: c for c in parse_diff(raw)}
        assert any(len(c["hunks"]) > 1 for c in full.values())
        shaped = shape_changes(index_diff(raw), 50, 10**6)
        assert not shaped["truncated"] and len(shaped["changes"]) == len(oracle) == len(bodies) + 1
        assert shaped["changes"].texts and None not in shaped["changes"].texts   # every change written whole
        assert shaped["changes"].encode() == json.dumps(list(shaped["changes"]), ensure_ascii=False,
                                                        separators=(",", ":"))
        for change in shaped["changes"]:
            assert [h["lines"] for h in change["hunks"]] == [h["lines"] for h in full[change["path"]]["hunks"]]
            assert (change["insertions"], change["deletions"]) == oracle[change["path"]][2:], change["path"]


def every_change(changes) -> list[dict]:
    """All of an index_diff's changes, made one by one in git's order."""
    return [changes.change(i) for i in range(len(changes))]


def test_the_usual_output_read_at_c_speed_is_the_general_parse(tmp_path):
    """index_diff reads the usual output (two-tree entries, plain paths, one section each) split at its
    NULs and each section by its index (diffparse.Indexed): on it, every change must be the general parser's; on
    anything else (a type change, a path git quotes, a stat-dirty entry without a patch) it must step aside."""
    from fleet.git import diffparse

    repo = rich_repo(tmp_path / "rich")
    usual = [("HEAD~4", "HEAD~3"), ("HEAD~3", "HEAD~2"), ("HEAD~4", "HEAD")]   # adds, renames, binary, modes
    raws = [git_bytes(repo, "-c", "core.quotePath=false", "diff", "-z", "--raw", "--patch", "-M", *revs)
            for revs in usual]
    indexed = [index_diff(raw) for raw in raws]
    fast = [every_change(changes) for changes in indexed]
    assert all(changes.general is None for changes in indexed)   # the control: the quick way was taken
    assert any(c["status"] == "renamed" for c in fast[1]) and any(c["status"] == "added" for c in fast[0])
    assert [diffparse._general_index(raw) for raw in raws] == fast
    os.unlink(repo / "link")
    write(repo / "link", "now a file\n")
    write(repo / 'quo"te.txt', "x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "type change and a quoted name")
    write(repo / 'zz "quoted" last.txt', "y\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a quoted name alone")
    later = os.stat(repo / "README.md").st_mtime + 100
    os.utime(repo / "README.md", (later, later))   # stat-dirty: diff-files lists it unhashed, prints no patch
    odd = [git_bytes(repo, "-c", "core.quotePath=false", "diff", "-z", "--raw", "--patch", "HEAD~2", "HEAD~1"),
           git_bytes(repo, "diff-files", "-z", "--raw", "--patch"),
           git_bytes(repo, "-c", "core.quotePath=false", "diff", "-z", "--raw", "--patch", "HEAD~1", "HEAD")]
    indexed = [index_diff(raw) for raw in odd]
    made = [every_change(changes) for changes in indexed]
    assert all(changes.general is not None for changes in indexed)   # a quoted header is found when reached
    assert made == [diffparse._general_index(raw) for raw in odd]
    assert made[1] == [] and [c["path"] for c in made[2]] == ['zz "quoted" last.txt']


@pytest.mark.parametrize("quoted", [False, True])
def test_a_cut_diff_makes_only_the_changes_it_keeps_and_counts_the_rest_exactly(tmp_path, monkeypatch, quoted):
    """shape_changes decides the cut as it goes: the changes after it are never made (nor counted, nor
    parsed), yet `file_count`, `omitted_count` and every level's `truncated`/`omitted_count` are exact, ids
    and order are those of the whole diff numbered (renames put git's order apart from path order), and a
    section git quoted the header of (found only when reached) sends the rest the general way with the same
    answer."""
    from fleet.git import diffparse

    repo = init_repo(tmp_path / "wide")
    for n in range(30):
        write(repo / f"d{n % 4}" / f"f{n:02d}.txt", "".join(f"file {n} line {i}\n" for i in range(30)))
    write(repo / "old name.txt", "".join(f"kept line {i}\n" for i in range(30)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for n in range(30):
        write(repo / f"d{n % 4}" / f"f{n:02d}.txt", "".join(f"file {n} line {i} v2\n" for i in range(30)))
    (repo / "zz").mkdir()
    git(repo, "mv", "old name.txt", "zz/new name.txt")
    if quoted:   # its header is quoted whatever core.quotePath says: found when its change is reached
        write(repo / 'd3/f99 "quoted".txt', "new\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "edit all, rename one, a quoted name")
    raw = git_bytes(repo, "-c", "core.quotePath=false", "diff", "-z", "--raw", "--patch", "-M", "HEAD~1", "HEAD")
    whole = diffparse.number([diffparse.fill(c) for c in diffparse._general_index(raw)])
    total = 31 + quoted
    assert len(whole) == total
    made = []
    real = diffparse.Indexed.change
    monkeypatch.setattr(diffparse.Indexed, "change", lambda self, i: made.append(i) or real(self, i))
    for budget, max_files, max_hunks, max_lines in ((2000, 50, 200, 200), (9000, 50, 200, 200),
                                                   (30000, 50, 200, 200), (10**6, 50, 200, 200),
                                                   (10**6, 7, 200, 200), (10**6, 50, 1, 5), (9000, 50, 1, 5)):
        made.clear()
        changes = index_diff(raw)
        shaped = shape_changes(changes, max_files, budget, max_hunks=max_hunks, max_lines=max_lines)
        kept = list(shaped["changes"])
        reached_quoted = any('"' in change["path"] for change in kept)
        if not quoted or len(kept) < 20:   # the quick way, at least until the quoted header is near
            assert changes.general is None
        assert len(made) <= len(kept) + 1 and len(set(made)) == len(made)   # the one that did not fit, at most
        assert shaped["file_count"] == total and shaped["omitted_count"] == total - len(kept)
        assert len(shaped["changes"].encode().encode()) <= budget
        hunks_cut = lines_cut = 0
        for change, full in zip(kept, whole):
            assert (change["id"], change["path"], change["old_path"], change["status"]) == \
                   (full["id"], full["path"], full["old_path"], full["status"])
            assert (change["insertions"], change["deletions"]) == (full["insertions"], full["deletions"])
            assert change["omitted_count"] == len(full["hunks"]) - len(change["hunks"])
            hunks_cut += change["omitted_count"]
            cut_here = change["omitted_count"] > 0
            for hunk, full_hunk in zip(change["hunks"], full["hunks"]):
                assert hunk["lines"] == full_hunk["lines"][:len(hunk["lines"])]
                assert hunk["omitted_count"] == len(full_hunk["lines"]) - len(hunk["lines"])
                assert hunk["truncated"] == (hunk["omitted_count"] > 0)
                lines_cut += hunk["omitted_count"]
                cut_here = cut_here or hunk["truncated"]
            assert change["truncated"] == cut_here
        assert (shaped["hunks_omitted_count"], shaped["lines_omitted_count"]) == (hunks_cut, lines_cut)
        assert shaped["truncated"] == (len(kept) < total or hunks_cut > 0 or lines_cut > 0)
        if budget == 10**6 and max_files == 50 and max_hunks == 200:   # everything: the whole diff, exactly
            uncut = {"truncated": False, "omitted_count": 0}
            assert kept == [{**c, **uncut, "hunks": [{**h, **uncut} for h in c["hunks"]]} for c in whole]
            assert kept[-1]["path"] == "zz/new name.txt" and kept[-1]["old_path"] == "old name.txt"
            assert reached_quoted == quoted and (changes.general is not None) == quoted
    assert shaped["truncated"] and 0 < len(kept) < total


def test_the_raw_part_read_in_one_pass_is_the_general_parse_on_odd_names_copies_and_renames(tmp_path):
    """Indexed reads the raw part with one regex and decodes every path in one go (diffparse._USUAL_ENTRY,
    _decode_each): on names whose invalid UTF-8 ends at the name's end or starts it, names with spaces, colons,
    ` M` and NUL-free look-alikes of a raw header, copies and renames (two paths), its changes and their order
    must be the general parser's, and an entry of another kind (a type change) must send it the general way."""
    from fleet.git import diffparse

    repo = init_repo(tmp_path / "names")
    names = [b"trunc\xe2\x82", b"\xe2\x82lead", b"caf\xe9.txt", "ü ñ.txt".encode(), b"a:1 2 M",
             b":100644 100644 abc def M", b"plain.txt", b"src.txt"]
    for n, name in enumerate(names):
        (repo / os.fsdecode(name)).write_bytes(b"".join(b"line %d of %d\n" % (i, n) for i in range(30)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for n, name in enumerate(names[:6]):
        (repo / os.fsdecode(name)).write_bytes(b"edited %d\n" % n + b"".join(b"line %d\n" % i for i in range(30)))
    git(repo, "mv", "plain.txt", "moved \xe9.txt".encode("latin1").decode("utf-8", "surrogateescape"))
    (repo / "copy of src.txt").write_bytes((repo / "src.txt").read_bytes())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "edits, a rename, a copy")
    raw = git_bytes(repo, "-c", "core.quotePath=false", "diff", "-z", "--raw", "--patch", "-M", "-C",
                    "--find-copies-harder", "HEAD~1", "HEAD")
    changes = index_diff(raw)
    made = every_change(changes)
    assert changes.general is None   # the control: the quick way all along
    assert {c["status"] for c in made} == {"modified", "renamed", "copied"}
    assert made == diffparse._general_index(raw)
    entries, _ = diffparse.parse_raw(raw)
    assert changes.paths == [diffparse.decode(e["_last"]) for e in entries]
    assert "trunc\ufffd" in changes.paths and "\ufffdlead" in changes.paths
    assert changes.path_order() == diffparse._path_order([c["path"] for c in made], [c["old_path"] for c in made])
    os.unlink(repo / "src.txt")
    os.symlink("copy of src.txt", repo / "src.txt")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a type change")
    raw = git_bytes(repo, "-c", "core.quotePath=false", "diff", "-z", "--raw", "--patch", "HEAD~2", "HEAD")
    changes = index_diff(raw)
    assert changes.general is not None and every_change(changes) == diffparse._general_index(raw)


def test_a_whole_changes_metadata_is_written_as_the_encoder_would_for_every_kind_of_change(tmp_path):
    """A whole change's JSON is one format of its fields (fleet.repo.jsonbudget._change_json): it must be byte for
    byte json.dumps of the change for renames and copies (a similarity, a source), added and deleted files (a
    mode that is null), a mode change, a binary file (null counts), a type change (two sections), quoted,
    non-ASCII and invalid UTF-8 names, and a merge diffed against its first parent."""
    repo = rich_repo(tmp_path / "rich")
    for name in ('q"uote\\d.txt', "tab\there.txt", "ünï ☃.txt"):
        write(repo / name, "x\n")
    (repo / os.fsdecode(b"bad\xff\xfe.txt")).write_bytes(b"y\n")
    write(repo / "copied.py", (repo / "src" / "main.py").read_bytes())
    os.unlink(repo / "link")
    write(repo / "link", "a file now\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "odd names and a type change")
    revs = [("HEAD~5", "HEAD~4"), ("HEAD~4", "HEAD~3"), ("HEAD~2", "HEAD~1"), ("HEAD~1", "HEAD"),
            ("HEAD~5", "HEAD")]
    kinds = set()
    for quote in ("false", "true"):
        for revs_ in revs:
            raw = git_bytes(repo, "-c", f"core.quotePath={quote}", "diff", "-z", "--raw", "--patch", "-M", "-C",
                            "--find-copies-harder", *revs_)
            shaped = shape_changes(index_diff(raw), 50, 10**6)
            assert None not in shaped["changes"].texts   # every change written whole
            assert shaped["changes"].encode() == json.dumps(list(shaped["changes"]), ensure_ascii=False,
                                                            separators=(",", ":"))
            kinds |= {(c["status"], c["binary"], c["old_mode"] is None, c["new_mode"] is None)
                      for c in shaped["changes"]}
    statuses = {kind[0] for kind in kinds}
    assert {"added", "modified", "renamed", "copied", "type_changed"} <= statuses
    assert any(kind[1] for kind in kinds) and any(kind[2] for kind in kinds)


def test_a_raw_part_whose_paths_are_full_of_colons_is_read_in_linear_time():
    """A hostile tree can hold names of any length: a raw part the quick reader declines (a type change here)
    with 40 KB names made of `:0` must not be rescanned from every colon (that took ~90 s once); it falls back
    to the general parse, whose answer it must equal."""
    import time

    from fleet.git.diffparse import parse_raw

    raw = b"".join(b":100644 120000 abc def T\0d%d/" % i + b":0" * 20000 + b"\0" for i in range(200)) + b"\0"
    started = time.process_time()
    changes = index_diff(raw)
    assert time.process_time() - started < 5   # linear: ~0.1 s; quadratic: minutes
    assert list(changes.paths) == [entry["path"] for entry in parse_raw(raw)[0]]
    assert len(changes) == 200
