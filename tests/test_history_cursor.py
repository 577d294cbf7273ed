"""repo.history's cursor on branchy histories: pages, joined, are exactly `git log` (git is the oracle) on
random merge graphs with commit-time ties and clock skew; without filters a later page is one `git log`
of the queued commits (no `--skip`), so its cost does not grow with depth."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.repo.history import Cursor, repo_history
from tests.fleets.gitbuild import git
from tests.test_large_history import Spawns


def _graph(repo: Path, seed: int, commits: int, times: str, forks: float = 0.35) -> None:
    """A random history of merges and forks made with fast-import. `times`: "rising" (each commit after its
    parents), "ties" (a few distinct times: many commits share one), "skew" (random: children older than
    parents)."""
    rng = random.Random(seed)
    heads: list[int] = []
    chunks = []
    for c in range(1, commits + 1):
        if times == "rising":
            when = 1_600_000_000 + c * 10
        elif times == "ties":
            when = 1_600_000_000 + (c // 7) * 10
        else:
            when = 1_600_000_000 + rng.randrange(commits) * 10
        parents: list[int] = []
        if heads:
            first = heads.pop(rng.randrange(len(heads))) if rng.random() < 0.8 else rng.randrange(1, c)
            parents.append(first)
            if heads and rng.random() < 0.3:
                other = heads.pop(rng.randrange(len(heads)))
                if other != first:
                    parents.append(other)
        if rng.random() < forks or not heads:   # fork: the parent stays a head others may build on
            heads.extend(p for p in parents if p not in heads)
        heads.append(c)
        body = f"c{c}"
        chunks.append(f"commit refs/heads/main\nmark :{c}\ncommitter T <t@e> {when} +0000\ndata {len(body)}\n{body}\n"
                      + (f"from :{parents[0]}\n" if parents else "")
                      + "".join(f"merge :{p}\n" for p in parents[1:])
                      + f"M 644 inline f{c % 5}.txt\ndata {len(body) + 1}\n{body}\n\n")
    # Tie every head into one tip so the whole graph is reachable from it.
    tip = commits + 1
    rest = [h for h in heads if h != commits]
    chunks.append(f"commit refs/heads/main\nmark :{tip}\ncommitter T <t@e> {1_600_000_000 + tip * 10} +0000\ndata 3\ntip\n"
                  f"from :{commits}\n" + "".join(f"merge :{h}\n" for h in rest) + "\n")
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "fast-import", "--quiet", input="".join(chunks).encode())


def _pages(repo: Path, limit: int) -> tuple[list[str], int]:
    """Every commit over all pages, and how many pages were walked by position (`--skip=N`, N > 0)."""
    shas, cursor, by_position = [], None, 0
    while True:
        with Spawns() as seen:
            page = repo_history(str(repo), limit=limit, cursor=cursor)
        by_position += sum(1 for argv in seen.argv for a in argv if a.startswith("--skip=") and a != "--skip=0")
        shas += [c["sha"] for c in page["commits"]]
        assert page["has_more"] == (page["next_cursor"] is not None)
        cursor = page["next_cursor"]
        if cursor is None:
            return shas, by_position


@pytest.mark.slow
@pytest.mark.parametrize("times", ["rising", "ties", "skew"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pages_joined_are_git_log_on_merge_graphs(tmp_path: Path, times: str, seed: int):
    repo = tmp_path / "g"
    _graph(repo, seed, 120, times)
    want = git(repo, "log", "--format=%H", "main").split()
    assert len(want) == 121
    for limit in (1, 3, 10):
        shas, by_position = _pages(repo, limit)
        assert shas == want, (times, seed, limit)
        if times == "rising":   # no tie, no skew: every page from the walk's own state
            assert by_position == 0


def test_a_deep_page_is_one_git_log_of_the_queued_commits(tmp_path: Path):
    repo = tmp_path / "linear"
    _graph(repo, 7, 300, "rising", forks=0.05)
    cursor = None
    for _ in range(25):
        page = repo_history(str(repo), limit=10, cursor=cursor)
        cursor = page["next_cursor"]
    with Spawns() as seen:
        deep = repo_history(str(repo), limit=10, cursor=cursor)
    commands = [argv[argv.index("-C") + 2:] for argv in seen.argv]
    assert len(commands) == 1 and "log" in commands[0] and not any(a.startswith("--skip") for a in commands[0])
    assert [c["sha"] for c in deep["commits"]] == git(repo, "log", "--format=%H", "--skip=250", "-10", "main").split()


def test_cursor_tampering_is_refused_and_a_pruned_queue_falls_back(tmp_path: Path):
    repo = tmp_path / "g"
    _graph(repo, 4, 40, "rising")
    first = repo_history(str(repo), limit=5)
    state = Cursor.decode(first["next_cursor"])
    assert state.frontier and state.skip == 5
    # A queued sha that is no commit here: the page is made by position instead, still exact.
    state.frontier = ["0" * 40]
    page = repo_history(str(repo), limit=5, cursor=state.encode())
    assert [c["sha"] for c in page["commits"]] == git(repo, "log", "--format=%H", "--skip=5", "-5", "main").split()
    for bad in ("x" * 9000, first["next_cursor"][:-4], "bm9wZQ"):
        with pytest.raises(FleetError) as err:
            repo_history(str(repo), limit=5, cursor=bad)
        assert err.value.code == "BAD_ARGUMENT"


def test_a_queue_too_long_for_a_cursor_pages_by_position(tmp_path: Path):
    repo = tmp_path / "wide"
    _graph(repo, 7, 300, "rising")   # the tip merges every open line of work: over 64 parents
    assert len(git(repo, "log", "-1", "--format=%P", "main").split()) > 64
    first = repo_history(str(repo), limit=10)
    assert Cursor.decode(first["next_cursor"]).frontier is None
    shas, by_position = _pages(repo, 50)
    assert shas == git(repo, "log", "--format=%H", "main").split() and by_position == 6
