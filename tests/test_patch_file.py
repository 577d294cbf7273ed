"""Patch files as entry stores (append/upsert/overwrite/create_only), inspect, remove, validate, parsing."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.patch.file import (MAX_PATCH_BYTES, inspect_patch, parse_patch, remove_patch_entries,
                             validate_patch, write_entries)
from fleet.patch.generate import generate_patch
from tests.fleets.gitbuild import commit_file, git, init_repo, write


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    for name in ("a.txt", "b.txt", "c.txt"):
        commit_file(repo, name, f"{name} one\n{name} two\n")
    return repo


@pytest.fixture
def pf(tmp_path: Path) -> Path:
    return tmp_path / "work.patch"


def edit(path: str, text: str) -> dict:
    return {"mode": "file_content", "path": path, "new_content": text}


def store(repo: Path, pf: Path, mode: str, *changes: dict) -> dict:
    return generate_patch(str(repo), list(changes), patch_file=str(pf), write_mode=mode)["patch_file"]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# --- write modes ---------------------------------------------------------------------------------------

def test_append_adds_and_refuses_occupied_path(repo: Path, pf: Path) -> None:
    first = store(repo, pf, "append", edit("a.txt", "A\n"))
    assert (first["added"], first["entries_before"], first["entries_after"], first["written"]) == \
        (["a.txt"], 0, 1, True)
    second = store(repo, pf, "append", edit("b.txt", "B\n"))
    assert second["added"] == ["b.txt"] and second["entries_after"] == 2
    before = pf.read_bytes()
    with pytest.raises(FleetError) as info:
        store(repo, pf, "append", edit("c.txt", "C\n"), edit("a.txt", "AA\n"))
    assert info.value.code == "CONFLICT" and "'a.txt'" in info.value.message and "#0" in info.value.message
    assert pf.read_bytes() == before
    git(repo, "apply", "--check", str(pf))


def test_append_rename_occupies_both_paths(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", {"mode": "rename_file", "path": "a.txt", "new_path": "z.txt"})
    with pytest.raises(FleetError) as info:
        store(repo, pf, "append", edit("a.txt", "x\n"))
    assert info.value.code == "CONFLICT" and "'a.txt'" in info.value.message


def test_upsert_replaces_in_place_and_removes_empty(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"), edit("b.txt", "B\n"), edit("c.txt", "C\n"))
    report = store(repo, pf, "upsert", edit("b.txt", "B2\n"))
    assert (report["replaced"], report["added"], report["removed"]) == (["b.txt"], [], [])
    listing = inspect_patch(str(pf))
    assert [e["path"] for e in listing["entries"]] == ["a.txt", "b.txt", "c.txt"]
    assert "+B2\n" in pf.read_text()
    back = store(repo, pf, "upsert", edit("b.txt", "b.txt one\nb.txt two\n"), edit("c.txt", "C\n"))
    assert back["removed"] == ["b.txt"] and back["replaced"] == ["c.txt"]
    assert back["removed_count"] == 1 and back["entries_after"] == 2
    assert [e["path"] for e in inspect_patch(str(pf))["entries"]] == ["a.txt", "c.txt"]


def test_upsert_twice_is_idempotent(repo: Path, pf: Path) -> None:
    changes = (edit("a.txt", "A\n"), {"mode": "rename_file", "path": "b.txt", "new_path": "bb.txt"})
    store(repo, pf, "upsert", *changes)
    first = pf.read_bytes()
    mtime = pf.stat().st_mtime_ns
    again = store(repo, pf, "upsert", *changes)
    assert pf.read_bytes() == first and again["written"] is False and pf.stat().st_mtime_ns == mtime
    assert again["replaced"] == ["a.txt", "bb.txt"] and again["entries_after"] == 2


def test_upsert_refuses_when_several_entries_hold_the_paths(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"), {"mode": "rename_file", "path": "b.txt", "new_path": "x.txt"})
    with pytest.raises(FleetError) as info:
        store(repo, pf, "upsert", {"mode": "rename_file", "path": "a.txt", "new_path": "x.txt"})
    assert info.value.code == "CONFLICT" and "#0" in info.value.message and "#1" in info.value.message


def test_overwrite_replaces_whole_file(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"), edit("b.txt", "B\n"))
    report = store(repo, pf, "overwrite", edit("c.txt", "C\n"))
    assert (report["added"], report["removed"], report["entries_before"], report["entries_after"]) == \
        (["c.txt"], ["a.txt", "b.txt"], 2, 1)
    assert [e["path"] for e in inspect_patch(str(pf))["entries"]] == ["c.txt"]


def test_overwrite_replaces_unparseable_file_with_warning(repo: Path, pf: Path) -> None:
    write(pf, "this is not a patch\n")
    report = store(repo, pf, "overwrite", edit("c.txt", "C\n"))
    (warning,) = report["warnings"]
    assert warning["code"] == "OVERWROTE_UNREADABLE_PATCH" and "did not parse" in warning["message"]
    assert report["entries_before"] is None  # unreadable: not 0
    assert inspect_patch(str(pf))["entry_count"] == 1
    write(pf, "this is not a patch\n")
    with pytest.raises(FleetError) as info:
        store(repo, pf, "upsert", edit("c.txt", "C\n"))
    assert info.value.code == "BAD_ARGUMENT"
    assert pf.read_text() == "this is not a patch\n"


def test_create_only(repo: Path, pf: Path) -> None:
    report = store(repo, pf, "create_only", edit("a.txt", "A\n"))
    assert report["added"] == ["a.txt"]
    before = pf.read_bytes()
    with pytest.raises(FleetError) as info:
        store(repo, pf, "create_only", edit("b.txt", "B\n"))
    assert info.value.code == "CONFLICT"
    assert pf.read_bytes() == before


def test_writes_leave_no_temp_files_and_keep_mode(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"))
    os.chmod(pf, 0o640)
    store(repo, pf, "upsert", edit("a.txt", "AA\n"))
    remove_patch_entries(str(pf), paths=["a.txt"])
    with pytest.raises(FleetError):
        store(repo, pf, "append", edit("nope.txt", "x"))
    assert leftovers(pf.parent) == []
    assert (pf.stat().st_mode & 0o777) == 0o640


def test_failed_write_cleans_temp_and_keeps_old_file(repo: Path, pf: Path, monkeypatch) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"))
    before = pf.read_bytes()

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("fleet.patch.file.os.replace", disk_full)
    with pytest.raises(FleetError) as info:
        store(repo, pf, "upsert", edit("a.txt", "AA\n"))
    assert info.value.code == "BAD_PATH" and "No space left" in info.value.message
    assert pf.read_bytes() == before and leftovers(pf.parent) == []


def test_concurrent_upserts_do_not_lose_entries(repo: Path, pf: Path) -> None:
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for n in range(5):
                store(repo, pf, "upsert", edit(name, f"{name} {n}\n"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a.txt", "b.txt", "c.txt")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(e["path"] for e in inspect_patch(str(pf))["entries"]) == ["a.txt", "b.txt", "c.txt"]
    assert "+c.txt 4\n" in pf.read_text()


@pytest.mark.parametrize("name", ["relative.patch", "/tmp/../etc/x.patch", "{d}/no-suffix", "{d}/.patch",
                                  "{d}/missing-dir/x.patch", "{d}/.git/x.patch", "{d}/ctl\n.patch"])
def test_patch_file_path_refused(repo: Path, tmp_path: Path, name: str) -> None:
    with pytest.raises(FleetError) as info:
        store(repo, Path(name.format(d=tmp_path)), "append", edit("a.txt", "A\n"))
    assert info.value.code in ("BAD_PATH", "NOT_FOUND")


def test_patch_file_symlink_refused(repo: Path, tmp_path: Path) -> None:
    target = write(tmp_path / "victim.txt", "keep\n")
    os.symlink(target, tmp_path / "link.patch")
    with pytest.raises(FleetError) as info:
        store(repo, tmp_path / "link.patch", "overwrite", edit("a.txt", "A\n"))
    assert info.value.code == "BAD_PATH"
    assert target.read_text() == "keep\n"


def test_bad_write_mode(repo: Path, pf: Path) -> None:
    with pytest.raises(FleetError) as info:
        store(repo, pf, "merge", edit("a.txt", "A\n"))
    assert info.value.code == "BAD_ARGUMENT"
    with pytest.raises(FleetError):
        write_entries(str(pf), [], "bogus")


def test_patch_file_size_cap(pf: Path) -> None:
    write(pf, b"x" * (MAX_PATCH_BYTES + 1))
    with pytest.raises(FleetError) as info:
        inspect_patch(str(pf))
    assert info.value.code == "LIMIT"


# --- inspect / remove ----------------------------------------------------------------------------------

def test_inspect_lists_entries(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"), {"mode": "rename_file", "path": "b.txt", "new_path": "B.txt"},
          {"mode": "delete_file", "path": "c.txt"}, {"mode": "create_file", "path": "new.txt", "new_content": "n\n"})
    listing = inspect_patch(str(pf))
    assert listing["entry_count"] == 4 and listing["duplicate_paths"] == []
    rows = [(e["index"], e["path"], e["old_path"], e["kind"], e["hunks"], e["insertions"], e["deletions"])
            for e in listing["entries"]]
    assert rows == [(0, "a.txt", None, "modify", 1, 1, 2), (1, "B.txt", "b.txt", "rename", 0, 0, 0),
                    (2, "c.txt", None, "delete", 1, 0, 2), (3, "new.txt", None, "create", 1, 1, 0)]
    assert listing["bytes"] == pf.stat().st_size == sum(e["bytes"] for e in listing["entries"])
    numstat = git(repo, "apply", "--numstat", str(pf)).splitlines()
    assert [(int(l.split("\t")[0]), int(l.split("\t")[1])) for l in numstat] == \
        [(e["insertions"], e["deletions"]) for e in listing["entries"]]


def test_inspect_reports_duplicates(tmp_path: Path) -> None:
    pf = write(tmp_path / "dup.diff", "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n"
                                      "diff --git a/x b/x\nold mode 100755\nnew mode 100644\n")
    assert inspect_patch(str(pf))["duplicate_paths"] == ["x"]
    with pytest.raises(FleetError) as info:
        inspect_patch(str(tmp_path / "missing.patch"))
    assert info.value.code == "NOT_FOUND"


def test_remove_by_path_and_index(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"), edit("b.txt", "B\n"),
          {"mode": "rename_file", "path": "c.txt", "new_path": "cc.txt"})
    result = remove_patch_entries(str(pf), paths=["c.txt"], indices=[0])
    assert [r["path"] for r in result["removed"]] == ["a.txt", "cc.txt"]
    assert [r["index"] for r in result["removed"]] == [0, 2]
    assert (result["removed_count"], result["entries_before"], result["entries_after"]) == (2, 3, 1)
    assert [e["path"] for e in inspect_patch(str(pf))["entries"]] == ["b.txt"]
    git(repo, "apply", "--check", str(pf))


def test_remove_refusals_change_nothing(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"))
    before = pf.read_bytes()
    for kwargs, code in (({"paths": ["zzz"]}, "NOT_FOUND"), ({"indices": [1]}, "NOT_FOUND"),
                         ({"indices": [-1]}, "NOT_FOUND"), ({}, "BAD_ARGUMENT"),
                         ({"indices": [True]}, "BAD_ARGUMENT"), ({"paths": ["../a"]}, "BAD_PATH"),
                         ({"paths": ["a.txt"], "indices": [3]}, "NOT_FOUND")):
        with pytest.raises(FleetError) as info:
            remove_patch_entries(str(pf), **kwargs)
        assert info.value.code == code, kwargs
    assert pf.read_bytes() == before


# --- validate ------------------------------------------------------------------------------------------

def test_validate_with_git_check(repo: Path, pf: Path) -> None:
    store(repo, pf, "append", edit("a.txt", "A\n"), {"mode": "delete_file", "path": "b.txt"})
    ok = validate_patch(patch_file=str(pf), repo=str(repo))
    assert ok["valid"] is True and ok["git_check"] == {"ok": True, "message": None}
    assert ok["entry_count"] == 2 and ok["total_hunks"] == 2 and ok["error"] is None
    write(repo / "a.txt", "someone else changed it\n")
    stale = validate_patch(patch_file=str(pf), repo=str(repo))
    assert stale["valid"] is False and "a.txt" in stale["git_check"]["message"]
    assert (repo / "a.txt").read_text() == "someone else changed it\n"
    assert (repo / "b.txt").exists()


def test_validate_without_repo_only_parses(repo: Path) -> None:
    text = generate_patch(str(repo), [edit("a.txt", "A\n")])["patch"]
    result = validate_patch(patch=text)
    assert result["valid"] is True and result["git_check"] is None
    assert result["entries"][0]["path"] == "a.txt"


@pytest.mark.parametrize("text, fragment", [
    ("", "no file entries"),
    ("hello\n", "unexpected text"),
    ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", "ends early"),
    ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n", "unexpected"),
    ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -x +1 @@\n", "malformed hunk header"),
    ("diff --git a/x b/x\nindex 1..2 100644\nBinary files a/x and b/x differ\n", "binary"),
    ("diff --git a/x b/x\nGIT binary patch\nliteral 0\n", "binary"),
    ("diff --cc x\n", "combined"),
    ("diff --git a/x b/x\n--- a/x\n", "without a following"),
    ("diff --git a/x b/x\n--- a/x\n+++ b/x\n", "without any hunk"),
    ("diff --git a/x b/y\nold mode 100644\nnew mode 100755\n", "differ"),
])
def test_validate_reports_parse_errors(text: str, fragment: str) -> None:
    result = validate_patch(patch=text)
    assert result["valid"] is False and result["error"]["code"] == "BAD_ARGUMENT"
    assert fragment in result["error"]["message"]


@pytest.mark.parametrize("name", ["/etc/passwd", "../x", ".git/hooks/pre-commit", "a/../../x"])
def test_validate_refuses_escaping_paths(name: str, repo: Path) -> None:
    old, new = (name, name) if name.startswith("/") else (f"a/{name}", f"b/{name}")
    text = f"--- {old}\n+++ {new}\n@@ -1 +1 @@\n-a\n+b\n"
    result = validate_patch(patch=text, repo=str(repo))
    assert result["valid"] is False and result["error"]["code"] == "BAD_PATH"
    assert result["git_check"] is None


def test_validate_argument_errors(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(FleetError):
        validate_patch()
    with pytest.raises(FleetError):
        validate_patch(patch="x", patch_file=str(tmp_path / "p.patch"))
    with pytest.raises(FleetError) as info:
        validate_patch(patch_file=str(tmp_path / "missing.patch"))
    assert info.value.code == "NOT_FOUND"
    with pytest.raises(FleetError) as info:
        validate_patch(patch="x" * (MAX_PATCH_BYTES + 1))
    assert info.value.code == "LIMIT"


# --- parsing git's own output --------------------------------------------------------------------------

def test_parse_round_trips_git_diff_output(repo: Path) -> None:
    commit_file(repo, "x b.txt", "1\n2\n3\n")
    commit_file(repo, 'q"uote', "q\n")
    commit_file(repo, "exe", "e\n")
    write(repo / "a.txt", "changed\n")
    (repo / "dir y").mkdir()
    git(repo, "mv", "x b.txt", "dir y/x b.txt")
    write(repo / 'q"uote', "q\nr")
    os.chmod(repo / "exe", 0o755)
    git(repo, "rm", "-q", "b.txt")
    write(repo / "new file", "")
    git(repo, "add", "-A")
    text = git(repo, "diff", "--cached", "-M", "HEAD")
    entries = parse_patch(text)
    assert "".join(e.text for e in entries) == text
    summary = {e.path: (e.old_path, e.kind) for e in entries}
    assert summary == {"a.txt": (None, "modify"), "b.txt": (None, "delete"), "dir y/x b.txt": ("x b.txt", "rename"),
                       "exe": (None, "chmod"), "new file": (None, "create"), 'q"uote': (None, "modify")}
    copies = git(repo, "diff", "--cached", "-C", "-C", "HEAD", "--", "a.txt")
    assert parse_patch(copies)[0].kind == "modify"


def test_parse_plain_unified_diff() -> None:
    text = "--- a/x.txt\t2024-01-01\n+++ b/x.txt\t2024-01-02\n@@ -1 +1 @@\n-a\n+b\n"
    (entry,) = parse_patch(text)
    assert (entry.path, entry.kind, entry.hunks, entry.insertions, entry.deletions) == ("x.txt", "modify", 1, 1, 1)
    created = parse_patch("--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+n\n")[0]
    assert (created.path, created.kind) == ("n.txt", "create")
