"""patch.generate: every change mode, against real repos, with real `git apply` as the oracle."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.patch.file import parse_patch
from fleet.patch.generate import MAX_CONTENT_BYTES, generate_patch
from tests.fleets.gitbuild import commit_file, git, init_repo, write


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    commit_file(repo, "src/app.py", "import os\n\n\ndef main():\n    return 1\n")
    commit_file(repo, "notes.txt", "alpha\nbeta\ngamma")
    return repo


def apply(repo: Path, patch: str) -> None:
    git(repo, "apply", "-", input=patch.encode("utf-8"))


def numstat(repo: Path, patch: str) -> list[tuple[int, int, str]]:
    out = git(repo, "apply", "--numstat", "-", input=patch.encode("utf-8"))
    rows = [line.split("\t") for line in out.splitlines()]
    return [(int(a), int(d), p) for a, d, p in rows]


def gen(repo: Path, *changes: dict, **kwargs) -> dict:
    result = generate_patch(str(repo), list(changes), **kwargs)
    assert result["git_check"] == {"ok": True, "message": None}, result["git_check"]
    return result


def error_of(repo: Path, *changes: dict, **kwargs) -> FleetError:
    with pytest.raises(FleetError) as info:
        generate_patch(str(repo), list(changes), **kwargs)
    return info.value


# --- modes ---------------------------------------------------------------------------------------------

def test_file_content_matches_git_diff_exactly(repo: Path) -> None:
    new = "import os\nimport sys\n\n\ndef main():\n    return 2\n"
    result = gen(repo, {"mode": "file_content", "path": "src/app.py", "new_content": new})
    write(repo / "src/app.py", new)
    expected = git(repo, "diff", "--", "src/app.py")
    # git's own diff, minus the optional index line, is byte for byte what we produce here.
    expected = "".join(line for line in expected.splitlines(keepends=True) if not line.startswith("index "))
    assert result["patch"] == expected
    git(repo, "checkout", "--", "src/app.py")
    apply(repo, result["patch"])
    assert (repo / "src/app.py").read_text() == new
    assert result["entries"] == [{"path": "src/app.py", "old_path": None, "kind": "modify", "hunks": 1,
                                  "insertions": 2, "deletions": 1, "bytes": len(result["patch"].encode()),
                                  "encoding": "utf-8"}]
    assert (result["files_changed"], result["insertions"], result["deletions"]) == (1, 2, 1)


def test_missing_final_newline_both_ways(repo: Path) -> None:
    result = gen(repo, {"mode": "file_content", "path": "notes.txt", "new_content": "alpha\nbeta\ngamma\n"})
    assert "-gamma\n\\ No newline at end of file\n+gamma\n" in result["patch"]
    apply(repo, result["patch"])
    assert (repo / "notes.txt").read_bytes() == b"alpha\nbeta\ngamma\n"
    back = gen(repo, {"mode": "file_content", "path": "notes.txt", "new_content": "alpha\nbeta\ngamma"})
    assert back["patch"].endswith("-gamma\n+gamma\n\\ No newline at end of file\n")
    apply(repo, back["patch"])
    assert (repo / "notes.txt").read_bytes() == b"alpha\nbeta\ngamma"


def test_crlf_is_preserved(repo: Path) -> None:
    write(repo / "win.txt", b"one\r\ntwo\r\nthree\r\n")
    result = gen(repo, {"mode": "search_replace", "path": "win.txt",
                        "replacements": [{"search": "two\r\n", "replace": "TWO\r\n"}]})
    assert "-two\r\n+TWO\r\n" in result["patch"]
    apply(repo, result["patch"])
    assert (repo / "win.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"


def test_context_lines_option(repo: Path) -> None:
    write(repo / "long.txt", "".join(f"{n}\n" for n in range(1, 41)))
    new = (repo / "long.txt").read_text().replace("20\n", "twenty\n")
    one = gen(repo, {"mode": "file_content", "path": "long.txt", "new_content": new}, context_lines=1)
    five = gen(repo, {"mode": "file_content", "path": "long.txt", "new_content": new}, context_lines=5)
    assert "@@ -19,3 +19,3 @@\n 19\n-20\n+twenty\n 21\n" in one["patch"]
    assert "@@ -15,11 +15,11 @@\n" in five["patch"]
    apply(repo, one["patch"])
    assert (repo / "long.txt").read_text() == new
    for bad in (0, 21, True, "3"):
        assert error_of(repo, {"mode": "delete_file", "path": "notes.txt"}, context_lines=bad).code == "BAD_ARGUMENT"


def test_create_file_with_mode_and_empty_file(repo: Path) -> None:
    result = gen(repo, {"mode": "create_file", "path": "bin/run", "new_content": "#!/bin/sh\necho hi\n",
                        "new_mode": "100755"},
                 {"mode": "create_file", "path": "empty.txt", "new_content": ""})
    assert result["patch"].startswith("diff --git a/bin/run b/bin/run\nnew file mode 100755\n--- /dev/null\n"
                                      "+++ b/bin/run\n@@ -0,0 +1,2 @@\n")
    assert "diff --git a/empty.txt b/empty.txt\nnew file mode 100644\n" in result["patch"]
    apply(repo, result["patch"])
    assert (repo / "bin/run").read_text() == "#!/bin/sh\necho hi\n"
    assert os.stat(repo / "bin/run").st_mode & stat.S_IXUSR
    assert (repo / "empty.txt").read_bytes() == b""


def test_create_file_refuses_existing(repo: Path) -> None:
    err = error_of(repo, {"mode": "create_file", "path": "notes.txt", "new_content": "x"})
    assert err.code == "CONFLICT" and "notes.txt" in err.message


def test_delete_file(repo: Path) -> None:
    result = gen(repo, {"mode": "delete_file", "path": "notes.txt"})
    assert result["patch"] == ("diff --git a/notes.txt b/notes.txt\ndeleted file mode 100644\n--- a/notes.txt\n"
                               "+++ /dev/null\n@@ -1,3 +0,0 @@\n-alpha\n-beta\n-gamma\n"
                               "\\ No newline at end of file\n")
    assert numstat(repo, result["patch"]) == [(0, 3, "notes.txt")]
    apply(repo, result["patch"])
    assert not (repo / "notes.txt").exists()
    assert error_of(repo, {"mode": "delete_file", "path": "notes.txt"}).code == "NOT_FOUND"


def test_delete_empty_and_executable_file(repo: Path) -> None:
    write(repo / "empty", "")
    write(repo / "tool.sh", "echo\n")
    os.chmod(repo / "tool.sh", 0o755)
    result = gen(repo, {"mode": "delete_file", "path": "empty"}, {"mode": "delete_file", "path": "tool.sh"})
    assert "diff --git a/empty b/empty\ndeleted file mode 100644\ndiff --git" in result["patch"]
    assert "deleted file mode 100755\n" in result["patch"]
    apply(repo, result["patch"])
    assert not (repo / "empty").exists() and not (repo / "tool.sh").exists()


def test_text_pair_uses_given_texts(repo: Path) -> None:
    result = gen(repo, {"mode": "text_pair", "path": "notes.txt", "old_text": "alpha\nbeta\ngamma",
                        "new_text": "alpha\nBETA\ngamma"})
    apply(repo, result["patch"])
    assert (repo / "notes.txt").read_text() == "alpha\nBETA\ngamma"
    stale = generate_patch(str(repo), [{"mode": "text_pair", "path": "notes.txt", "old_text": "zzz\n",
                                        "new_text": "yyy\n"}])
    assert stale["git_check"]["ok"] is False and "notes.txt" in stale["git_check"]["message"]


def test_rename_pure_and_with_content(repo: Path) -> None:
    pure = gen(repo, {"mode": "rename_file", "path": "notes.txt", "new_path": "docs/notes.md"})
    assert pure["patch"] == ("diff --git a/notes.txt b/docs/notes.md\nsimilarity index 100%\n"
                             "rename from notes.txt\nrename to docs/notes.md\n")
    assert pure["entries"][0]["old_path"] == "notes.txt" and pure["entries"][0]["kind"] == "rename"
    edited = gen(repo, {"mode": "rename_file", "path": "src/app.py", "new_path": "src/main.py",
                        "new_content": "import os\n\n\ndef main():\n    return 3\n"})
    assert "rename from src/app.py\nrename to src/main.py\n--- a/src/app.py\n+++ b/src/main.py\n" in edited["patch"]
    apply(repo, pure["patch"] + edited["patch"])
    assert (repo / "docs/notes.md").read_text() == "alpha\nbeta\ngamma"
    assert (repo / "src/main.py").read_text().endswith("return 3\n")
    assert not (repo / "notes.txt").exists() and not (repo / "src/app.py").exists()


def test_rename_similarity_matches_git_for_small_edit(repo: Path) -> None:
    body = "".join(f"line number {n}\n" for n in range(50))
    commit_file(repo, "big.txt", body)
    new = body.replace("line number 7\n", "line number seven\n")
    result = gen(repo, {"mode": "rename_file", "path": "big.txt", "new_path": "big2.txt", "new_content": new})
    git(repo, "mv", "big.txt", "big2.txt")
    write(repo / "big2.txt", new)
    git(repo, "add", "big2.txt")
    theirs = git(repo, "diff", "--cached", "-M", "HEAD")
    assert [l for l in theirs.splitlines() if l.startswith("similarity")] == \
        [l for l in result["patch"].splitlines() if l.startswith("similarity")]


def test_rename_refusals(repo: Path) -> None:
    assert error_of(repo, {"mode": "rename_file", "path": "notes.txt", "new_path": "src/app.py"}).code == "CONFLICT"
    assert error_of(repo, {"mode": "rename_file", "path": "nope", "new_path": "x"}).code == "NOT_FOUND"
    assert error_of(repo, {"mode": "rename_file", "path": "notes.txt", "new_path": "notes.txt"}).code == "BAD_ARGUMENT"
    assert error_of(repo, {"mode": "rename_file", "path": "notes.txt", "new_path": "../x"}).code == "BAD_PATH"


def test_chmod_both_ways_and_with_content(repo: Path) -> None:
    up = gen(repo, {"mode": "chmod", "path": "notes.txt", "new_mode": "100755"})
    assert up["patch"] == "diff --git a/notes.txt b/notes.txt\nold mode 100644\nnew mode 100755\n"
    assert up["entries"][0]["kind"] == "chmod" and up["entries"][0]["hunks"] == 0
    apply(repo, up["patch"])
    assert os.stat(repo / "notes.txt").st_mode & stat.S_IXUSR
    down = gen(repo, {"mode": "chmod", "path": "notes.txt", "new_mode": "100644", "new_content": "alpha\n"})
    assert down["patch"].startswith("diff --git a/notes.txt b/notes.txt\nold mode 100755\nnew mode 100644\n--- a/")
    apply(repo, down["patch"])
    assert not os.stat(repo / "notes.txt").st_mode & stat.S_IXUSR
    assert (repo / "notes.txt").read_text() == "alpha\n"
    same = gen(repo, {"mode": "chmod", "path": "notes.txt", "new_mode": "100644"})
    assert same["patch"] == "" and same["unchanged"] == ["notes.txt"]
    assert error_of(repo, {"mode": "chmod", "path": "notes.txt", "new_mode": "100777"}).code == "BAD_ARGUMENT"


def test_quoted_and_spaced_names_match_git(repo: Path) -> None:
    for name in ('q"uote.txt', "back\\slash.txt", "with space.txt", "ünïcode.txt"):
        commit_file(repo, name, "old\n")
    changes = [{"mode": "file_content", "path": name, "new_content": "new\n"}
               for name in ('q"uote.txt', "back\\slash.txt", "with space.txt", "ünïcode.txt")]
    result = gen(repo, *changes)
    for change in changes:
        write(repo / change["path"], "new\n")
    theirs = git(repo, "-c", "core.quotepath=false", "diff")
    theirs = "".join(line for line in theirs.splitlines(keepends=True) if not line.startswith("index "))
    assert sorted(e.text for e in parse_patch(result["patch"])) == sorted(e.text for e in parse_patch(theirs))


def test_several_changes_make_one_patch_in_order(repo: Path) -> None:
    result = gen(repo, {"mode": "delete_file", "path": "notes.txt"},
                 {"mode": "create_file", "path": "a.txt", "new_content": "a\n"},
                 {"mode": "file_content", "path": "src/app.py", "new_content": "pass\n"})
    assert [e["path"] for e in result["entries"]] == ["notes.txt", "a.txt", "src/app.py"]
    assert [(a, d, p) for a, d, p in numstat(repo, result["patch"])] == \
        [(0, 3, "notes.txt"), (1, 0, "a.txt"), (1, 5, "src/app.py")]


def test_deterministic_bytes(repo: Path) -> None:
    changes = [{"mode": "file_content", "path": "src/app.py", "new_content": "x\n"},
               {"mode": "rename_file", "path": "notes.txt", "new_path": "n.txt", "new_content": "alpha\n"}]
    first = generate_patch(str(repo), changes)
    assert all(generate_patch(str(repo), changes) == first for _ in range(3))


def test_unchanged_change_makes_no_entry(repo: Path) -> None:
    result = gen(repo, {"mode": "file_content", "path": "notes.txt", "new_content": "alpha\nbeta\ngamma"})
    assert result["patch"] == "" and result["entries"] == [] and result["unchanged"] == ["notes.txt"]


# --- search_replace ------------------------------------------------------------------------------------

@pytest.fixture
def repeated(repo: Path) -> Path:
    commit_file(repo, "rep.py", "x = 1\nprint(x)\ny = 2\nprint(x)\nz = 3\nprint(x)\n")
    return repo


def test_search_replace_unique(repeated: Path) -> None:
    result = gen(repeated, {"mode": "search_replace", "path": "rep.py",
                            "replacements": [{"search": "y = 2", "replace": "y = 20"},
                                             {"search": "z = 3\n", "replace": ""}]})
    apply(repeated, result["patch"])
    assert (repeated / "rep.py").read_text() == "x = 1\nprint(x)\ny = 20\nprint(x)\nprint(x)\n"


def test_search_replace_ambiguous_names_candidate_lines(repeated: Path) -> None:
    err = error_of(repeated, {"mode": "search_replace", "path": "rep.py",
                              "replacements": [{"search": "print(x)", "replace": "print(y)"}]})
    assert err.code == "BAD_ARGUMENT"
    assert "3 places" in err.message and "lines 2, 4, 6" in err.message and "line_hint" in err.message


def test_search_replace_line_hint_picks_nearest(repeated: Path) -> None:
    result = gen(repeated, {"mode": "search_replace", "path": "rep.py",
                            "replacements": [{"search": "print(x)", "replace": "print(y)", "line_hint": 1}]})
    apply(repeated, result["patch"])
    assert (repeated / "rep.py").read_text() == "x = 1\nprint(y)\ny = 2\nprint(x)\nz = 3\nprint(x)\n"


def test_search_replace_line_hint_exact_and_tie(repeated: Path) -> None:
    result = gen(repeated, {"mode": "search_replace", "path": "rep.py",
                            "replacements": [{"search": "print(x)", "replace": "P", "line_hint": 4}]})
    apply(repeated, result["patch"])
    assert (repeated / "rep.py").read_text().splitlines()[3] == "P"
    git(repeated, "checkout", "--", "rep.py")
    tie = error_of(repeated, {"mode": "search_replace", "path": "rep.py",
                              "replacements": [{"search": "print(x)", "replace": "P", "line_hint": 3}]})
    assert tie.code == "BAD_ARGUMENT" and "lines 2, 4 are equally near line_hint 3" in tie.message


def test_search_replace_hints_refer_to_original_lines(repeated: Path) -> None:
    result = gen(repeated, {"mode": "search_replace", "path": "rep.py", "replacements": [
        {"search": "x = 1\n", "replace": "a\nb\nc\n"},
        {"search": "print(x)", "replace": "LAST", "line_hint": 6}]})
    apply(repeated, result["patch"])
    assert (repeated / "rep.py").read_text() == "a\nb\nc\nprint(x)\ny = 2\nprint(x)\nz = 3\nLAST\n"


def test_search_replace_missing_names_closest_lines(repeated: Path) -> None:
    err = error_of(repeated, {"mode": "search_replace", "path": "rep.py",
                              "replacements": [{"search": "y = 3", "replace": "q"}]})
    assert err.code == "NOT_FOUND" and "replacements[0]" in err.message
    assert "line 3: 'y = 2'" in err.message


def test_search_replace_missing_hints_crlf(repo: Path) -> None:
    write(repo / "win.txt", b"a\r\nb\r\n")
    err = error_of(repo, {"mode": "search_replace", "path": "win.txt",
                          "replacements": [{"search": "a\nb", "replace": "c"}]})
    assert err.code == "NOT_FOUND" and "CRLF" in err.message


def test_search_replace_overlap_and_bad_items(repeated: Path) -> None:
    overlap = error_of(repeated, {"mode": "search_replace", "path": "rep.py", "replacements": [
        {"search": "x = 1\nprint", "replace": "a"}, {"search": "1\nprint(x)\ny", "replace": "b"}]})
    assert overlap.code == "BAD_ARGUMENT" and "overlap" in overlap.message
    for bad in ([], [{"search": "", "replace": "x"}], [{"search": "x"}],
                [{"search": "y = 2", "replace": "q", "line_hint": 0}],
                [{"search": "y = 2", "replace": "q", "extra": 1}]):
        assert error_of(repeated, {"mode": "search_replace", "path": "rep.py",
                                   "replacements": bad}).code == "BAD_ARGUMENT"


# --- refusals ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/etc/passwd", "../outside.txt", "a/../../b", "a//b", "./a", "a/", "", ".git/config", "sub/.git/HEAD",
    ".GIT/config", "new\nline", "tab\there", "nul\0byte", "bell\x07", "del\x7f",
])
def test_bad_paths_refused(repo: Path, path: str) -> None:
    err = error_of(repo, {"mode": "create_file", "path": path, "new_content": "x\n"})
    assert err.code == "BAD_PATH"
    assert not any(p.name == "x" for p in repo.parent.iterdir())


def test_symlink_pointing_outside_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.txt", "secret\n")
    os.symlink(outside, repo / "link")
    for change in ({"mode": "file_content", "path": "link/secret.txt", "new_content": "pwned\n"},
                   {"mode": "create_file", "path": "link/new.txt", "new_content": "x\n"},
                   {"mode": "delete_file", "path": "link/secret.txt"}):
        err = error_of(repo, change)
        assert err.code == "BAD_PATH" and "outside the repository" in err.message
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_symlink_file_itself_refused(repo: Path) -> None:
    os.symlink("notes.txt", repo / "alias.txt")
    err = error_of(repo, {"mode": "file_content", "path": "alias.txt", "new_content": "x\n"})
    assert err.code == "BAD_PATH" and "symlink" in err.message


def test_binary_refused(repo: Path) -> None:
    write(repo / "blob.bin", b"\x89PNG\0\0data")
    assert "binary" in error_of(repo, {"mode": "delete_file", "path": "blob.bin"}).message
    err = error_of(repo, {"mode": "create_file", "path": "x.bin", "new_content": "a\0b"})
    assert err.code == "BAD_ARGUMENT" and "NUL" in err.message
    write(repo / "latin1.txt", "caf\xe9\n".encode("latin-1"))
    assert "UTF-8" in error_of(repo, {"mode": "file_content", "path": "latin1.txt", "new_content": ""}).message
    assert "surrogate" in error_of(repo, {"mode": "create_file", "path": "s.txt", "new_content": "a\ud800"}).message


def test_size_caps(repo: Path) -> None:
    big = "x" * (MAX_CONTENT_BYTES + 1)
    assert error_of(repo, {"mode": "create_file", "path": "big.txt", "new_content": big}).code == "LIMIT"
    write(repo / "huge.txt", big)
    assert error_of(repo, {"mode": "delete_file", "path": "huge.txt"}).code == "LIMIT"
    assert error_of(repo, *[{"mode": "delete_file", "path": f"f{n}"} for n in range(501)]).code == "LIMIT"


def test_directory_and_non_repo_refused(repo: Path, tmp_path: Path) -> None:
    assert error_of(repo, {"mode": "delete_file", "path": "src"}).code == "BAD_PATH"
    assert error_of(repo, {"mode": "create_file", "path": "notes.txt/x", "new_content": ""}).code == "BAD_PATH"
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(FleetError) as info:
        generate_patch(str(plain), [{"mode": "delete_file", "path": "x"}])
    assert info.value.code == "BAD_ARGUMENT"
    with pytest.raises(FleetError) as info:
        generate_patch(str(repo / "src"), [{"mode": "delete_file", "path": "app.py"}])
    assert info.value.code == "BAD_PATH" and "top" in info.value.message
    with pytest.raises(FleetError) as info:
        generate_patch("relative/repo", [{"mode": "delete_file", "path": "x"}])
    assert info.value.code == "BAD_PATH"


def test_bad_change_specs(repo: Path) -> None:
    cases = [
        {"mode": "explode", "path": "notes.txt"},
        {"mode": "file_content", "path": "notes.txt"},
        {"mode": "file_content", "path": "notes.txt", "new_content": "x", "content": "y"},
        {"mode": "file_content", "path": "notes.txt", "new_content": 5},
        {"mode": "create_file", "path": "n.txt", "new_content": "x", "new_mode": "120000"},
        "not an object",
    ]
    for change in cases:
        assert error_of(repo, change).code == "BAD_ARGUMENT", change
    dup = error_of(repo, {"mode": "delete_file", "path": "notes.txt"},
                   {"mode": "rename_file", "path": "src/app.py", "new_path": "notes.txt"})
    assert dup.code == "BAD_ARGUMENT" and "changes[0] and changes[1]" in dup.message
    with pytest.raises(FleetError):
        generate_patch(str(repo), [])


def test_generate_never_writes_the_work_tree(repo: Path) -> None:
    before = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    index_mtime = (repo / ".git/index").stat().st_mtime_ns
    gen(repo, {"mode": "delete_file", "path": "notes.txt"},
        {"mode": "create_file", "path": "new.txt", "new_content": "n\n"})
    assert (repo / ".git/index").stat().st_mtime_ns == index_mtime
    assert git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all") == before


def test_large_file_with_scattered_edits(repo: Path) -> None:
    # Plain difflib goes quadratic here (about 20 s on the dev box); patience anchoring keeps it well under 1 s.
    old = "".join(f"row {n}\n" for n in range(80_000))
    new = "".join("changed\n" if n % 100 == 0 else f"row {n}\n" for n in range(80_000))
    write(repo / "big.txt", old)
    result = gen(repo, {"mode": "file_content", "path": "big.txt", "new_content": new})
    assert result["entries"][0]["hunks"] == 800
    assert (result["insertions"], result["deletions"]) == (800, 800)
    apply(repo, result["patch"])
    assert (repo / "big.txt").read_text() == new
