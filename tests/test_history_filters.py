"""repo.history's filters as git log has them: author, a..b and a...b ranges, glob paths; a filter that
matches nothing says so. Git is the oracle."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleet.repo.history import repo_history
from tests.fleets.gitbuild import git, git_env, init_repo
from tests.fleets.oracle import paged_shas


def _commit_as(repo: Path, name: str, email: str, path: str, text: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", "--", path)
    env = {**git_env(), "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email}
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", f"{name} edits {path}"], env=env, check=True)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = init_repo(tmp_path_factory.mktemp("filters") / "r")
    for n in range(4):
        _commit_as(repo, "Ada Lovelace", "ada@example.com", f"conf/a{n}.toml", f"{n}\n")
        _commit_as(repo, "Bob [x]", "bob@corp.example", f"src/pkg/m{n}.py", f"{n}\n")
    git(repo, "checkout", "-q", "-b", "side", "HEAD~3")
    _commit_as(repo, "Ada Lovelace", "ada@example.com", "side.toml", "s\n")
    git(repo, "checkout", "-q", "main")
    return repo


def _log(repo: Path, *args: str) -> list[str]:
    return git(repo, "log", "--format=%H", *args).split()


def test_author_filter_is_a_literal_case_insensitive_part(repo: Path):
    assert paged_shas(repo, author="lovelace") == _log(repo, "-i", "-F", "--author=lovelace") != []
    assert paged_shas(repo, author="bob [x]") == _log(repo, "-i", "-F", "--author=bob [x]") != []   # not a regex
    assert paged_shas(repo, author="@corp.example") == _log(repo, "-F", "--author=@corp.example")
    page = repo_history(str(repo), author="nobody at all")
    assert page["commits"] == [] and "author 'nobody at all' matched no commit" in page["note"]


@pytest.mark.parametrize("spec", ["main..side", "side..main", "main...side", "HEAD~2..", "..side"])
def test_ranges_page_like_git_log(repo: Path, spec: str):
    assert paged_shas(repo, ref=spec) == _log(repo, spec)
    first = repo_history(str(repo), ref=spec, limit=1)
    assert first["range"] is not None and first["head_sha"] == first["range"][-40:]


def test_globs_are_explicit_and_a_literal_pattern_says_it_matched_nothing(repo: Path):
    assert paged_shas(repo, path_filter="*.toml", path_glob=True) == _log(repo, "--", ":(glob)*.toml")
    assert paged_shas(repo, path_filter="**/*.toml", path_glob=True) == _log(repo, "--", ":(glob)**/*.toml") != []
    assert paged_shas(repo, path_filter="src/*/m1.py", path_glob=True) == _log(repo, "--", ":(glob)src/*/m1.py") != []
    literal = repo_history(str(repo), path_filter="*.toml")
    assert literal["commits"] == [] and literal["path_match"] == "literal"
    assert "set path_glob" in literal["note"]
    assert paged_shas(repo, path_filter="conf") == _log(repo, "--", "conf")
    nothing = repo_history(str(repo), path_filter="no/such/*.txt", path_glob=True)
    assert nothing["commits"] == [] and "matched no commit" in nothing["note"] and "set path_glob" not in nothing["note"]


def test_a_cursor_keeps_its_filters(repo: Path):
    first = repo_history(str(repo), author="ada", limit=1)
    with pytest.raises(Exception) as err:
        repo_history(str(repo), author="bob", limit=1, cursor=first["next_cursor"])
    assert getattr(err.value, "code", None) == "BAD_ARGUMENT"
