"""repo.history on a 20,000-commit history (made once per session with fast-import): a page costs one
`git log` of that page (no walk of the whole history), equals git log, and pages deep in history."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.repo.history import repo_history
from tests.fleets.gitbuild import git

pytestmark = pytest.mark.slow

COMMITS = 20_000


@pytest.fixture(scope="session")
def large(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("large") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    chunks = []
    for c in range(COMMITS):
        who = "Ada <ada@example.com>" if c % 3 == 0 else "Bob <bob@example.com>"
        chunks.append(f"commit refs/heads/main\nmark :{c + 1}\nauthor {who} {1_500_000_000 + c * 60} +0000\n"
                      f"committer {who} {1_500_000_000 + c * 60} +0000\ndata {len(f'change {c}')}\nchange {c}\n"
                      + (f"from :{c}\n" if c else "")
                      + f"M 644 inline {'docs' if c % 10 == 0 else 'src'}/f{c % 50}.txt\ndata {len(str(c)) + 1}\n{c}\n\n")
    git(repo, "fast-import", "--quiet", input="".join(chunks).encode())
    git(repo, "reset", "-q", "--hard", "main")
    return repo


class Spawns:
    """The git commands fleetdeck starts while active (observed, not replaced: git still runs)."""

    def __init__(self) -> None:
        self.argv: list[list[str]] = []

    def __enter__(self) -> "Spawns":
        self._original = os.posix_spawn

        def observed(path, argv, env, **kw):
            self.argv.append(list(argv))
            return self._original(path, argv, env, **kw)

        os.posix_spawn = observed
        return self

    def __exit__(self, *exc: object) -> None:
        os.posix_spawn = self._original


def test_a_page_is_one_git_log_of_that_page(large: Path):
    assert int(git(large, "rev-list", "--count", "HEAD")) == COMMITS
    with Spawns() as seen:
        page = repo_history(str(large), limit=20)
    commands = [argv[argv.index("-C") + 2:] for argv in seen.argv]
    assert not any("rev-list" in c for c in commands) and sum("log" in c for c in commands) == 1
    assert [c["sha"] for c in page["commits"]] == git(large, "log", "-20", "--format=%H").split()
    assert page["has_more"] and page["omitted_count"] is None and page["omitted_count_at_least"] == 1


def test_deep_pages_and_filters_match_git(large: Path):
    deep = repo_history(str(large), ref="HEAD~19000", limit=50)
    assert [c["sha"] for c in deep["commits"]] == git(large, "log", "-50", "--format=%H", "HEAD~19000").split()
    page, cursor = None, None
    for _ in range(3):
        page = repo_history(str(large), limit=200, cursor=cursor, author="ada", path_filter="docs")
        cursor = page["next_cursor"]
    expected = git(large, "log", "--format=%H", "-i", "-F", "--author=ada", "--", "docs").split()[400:600]
    assert [c["sha"] for c in page["commits"]] == expected
    counted = repo_history(str(large), limit=10, count_omitted=True, path_filter="docs/f0.txt")
    assert counted["omitted_count"] == int(git(large, "rev-list", "--count", "HEAD", "--", "docs/f0.txt")) - 10
