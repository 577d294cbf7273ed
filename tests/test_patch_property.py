"""Property tests: for random texts and every mode, real `git apply` turns the old file into the new one.

Texts mix arbitrary Unicode with lines built to confuse diff tools (`--- a`, `+++`, `@@`, `\\ No newline`,
CR, form feed, U+2028) and endings LF/CRLF/none. Each example builds a fresh repo with the git CLI.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.patch.file import inspect_patch, parse_patch
from fleet.patch.generate import generate_patch
from fleet.patch.textdiff import split_lines
from tests.fleets.gitbuild import git, write

TRICKY = ["", "a", "b", "x = 1", "--- a/f", "+++ b/f", "@@ -1 +1 @@", "@@", "\\ No newline at end of file",
          "diff --git a/f b/f", " ", "-", "+", "\t", "ü€😀", "a\rb", "\f", "line\u2028sep", "}", "{"]

line = st.one_of(st.sampled_from(TRICKY),
                 st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0\n"), max_size=12))


@st.composite
def texts(draw) -> str:
    lines = draw(st.lists(line, max_size=25))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    body = ending.join(lines)
    if lines and draw(st.booleans()):
        body += ending
    return body


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def fresh_repo() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fleetdeck-prop-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        yield repo


def apply_and_check(repo: Path, result: dict) -> None:
    patch = result["patch"].encode("utf-8")
    numstat = git(repo, "apply", "--numstat", "-", input=patch).splitlines()
    assert [(int(row.split("\t")[0]), int(row.split("\t")[1])) for row in numstat] == \
        [(e["insertions"], e["deletions"]) for e in result["entries"]]
    assert "".join(e.text for e in parse_patch(result["patch"])) == result["patch"]
    git(repo, "apply", "-", input=patch)


def run(repo: Path, changes: list[dict], **kwargs) -> dict:
    result = generate_patch(str(repo), changes, **kwargs)
    assert generate_patch(str(repo), changes, check=False, **kwargs)["patch"] == result["patch"], \
        "not deterministic"
    if result["patch"]:
        # git_check is the real `git apply --check` on the patch, run by the generator
        assert result["git_check"]["ok"], result["git_check"]
        apply_and_check(repo, result)
    return result


@pytest.mark.slow  # 60 examples, each a patch generated and applied by git (~2-4 s)
@SETTINGS
@given(old=texts(), new=texts(), context=st.integers(1, 4))
def test_file_content_round_trip(old: str, new: str, context: int) -> None:
    with fresh_repo() as repo:
        write(repo / "f.txt", old.encode("utf-8"))
        result = run(repo, [{"mode": "file_content", "path": "f.txt", "new_content": new}], context_lines=context)
        assert (repo / "f.txt").read_bytes() == new.encode("utf-8")
        assert (result["patch"] == "") == (old == new)


@pytest.mark.slow
@settings(SETTINGS, max_examples=30)
@given(old=texts(), new=texts())
def test_text_pair_round_trip(old: str, new: str) -> None:
    with fresh_repo() as repo:
        write(repo / "f.txt", old.encode("utf-8"))
        run(repo, [{"mode": "text_pair", "path": "f.txt", "old_text": old, "new_text": new}])
        assert (repo / "f.txt").read_bytes() == new.encode("utf-8")


@pytest.mark.slow
@settings(SETTINGS, max_examples=30)
@given(before=texts(), after=texts(), replace=texts())
def test_search_replace_round_trip(before: str, after: str, replace: str) -> None:
    marker = "\x01MARK\x01"
    with fresh_repo() as repo:
        write(repo / "f.txt", (before + marker + after).encode("utf-8"))
        run(repo, [{"mode": "search_replace", "path": "f.txt", "replacements": [{"search": marker, "replace": replace}]}])
        assert (repo / "f.txt").read_bytes() == (before + replace + after).encode("utf-8")


@pytest.mark.slow
@settings(SETTINGS, max_examples=30)
@given(content=texts(), executable=st.booleans())
def test_create_and_delete_round_trip(content: str, executable: bool) -> None:
    with fresh_repo() as repo:
        mode = "100755" if executable else "100644"
        run(repo, [{"mode": "create_file", "path": "d/new.txt", "new_content": content, "new_mode": mode}])
        assert (repo / "d/new.txt").read_bytes() == content.encode("utf-8")
        assert bool(os.stat(repo / "d/new.txt").st_mode & stat.S_IXUSR) == executable
        run(repo, [{"mode": "delete_file", "path": "d/new.txt"}])
        assert not (repo / "d/new.txt").exists()


@pytest.mark.slow
@settings(SETTINGS, max_examples=30)
@given(old=texts(), new=st.none() | texts())
def test_rename_round_trip(old: str, new: str | None) -> None:
    with fresh_repo() as repo:
        write(repo / "old name.txt", old.encode("utf-8"))
        change = {"mode": "rename_file", "path": "old name.txt", "new_path": "sub dir/new.txt"}
        if new is not None:
            change["new_content"] = new
        run(repo, [change])
        assert not (repo / "old name.txt").exists()
        assert (repo / "sub dir/new.txt").read_bytes() == (old if new is None else new).encode("utf-8")


@pytest.mark.slow
@settings(SETTINGS, max_examples=30)
@given(old=texts(), new=st.none() | texts(), start_exec=st.booleans())
def test_chmod_round_trip(old: str, new: str | None, start_exec: bool) -> None:
    with fresh_repo() as repo:
        write(repo / "run.sh", old.encode("utf-8"))
        os.chmod(repo / "run.sh", 0o755 if start_exec else 0o644)
        change = {"mode": "chmod", "path": "run.sh", "new_mode": "100644" if start_exec else "100755"}
        if new is not None:
            change["new_content"] = new
        run(repo, [change])
        assert bool(os.stat(repo / "run.sh").st_mode & stat.S_IXUSR) != start_exec
        assert (repo / "run.sh").read_bytes() == (old if new is None else new).encode("utf-8")


@pytest.mark.slow
@settings(SETTINGS, max_examples=30)
@given(olds=st.lists(texts(), min_size=1, max_size=3), news=st.lists(texts(), min_size=3, max_size=3))
def test_upsert_twice_is_idempotent(olds: list[str], news: list[str]) -> None:
    with fresh_repo() as repo:
        changes = []
        for n, old in enumerate(olds):
            write(repo / f"f{n}.txt", old.encode("utf-8"))
            changes.append({"mode": "file_content", "path": f"f{n}.txt", "new_content": news[n]})
        pf = repo.parent / f"{repo.name}.patch"
        generate_patch(str(repo), changes, patch_file=str(pf), write_mode="upsert")
        first = pf.read_bytes()
        again = generate_patch(str(repo), changes, patch_file=str(pf), write_mode="upsert")["patch_file"]
        assert pf.read_bytes() == first and again["written"] is False
        expected = [f"f{n}.txt" for n, old in enumerate(olds) if old != news[n]]
        assert [e["path"] for e in inspect_patch(str(pf))["entries"]] == expected
        if first:
            git(repo, "apply", str(pf))
        for n in range(len(olds)):
            assert (repo / f"f{n}.txt").read_bytes() == news[n].encode("utf-8")


@settings(SETTINGS, max_examples=100)
@given(text=st.text(max_size=60))
def test_split_lines_keeps_every_character(text: str) -> None:
    lines = split_lines(text)
    assert "".join(lines) == text
    assert all(l.endswith("\n") for l in lines[:-1]) and all("\n" not in l[:-1] for l in lines)
