"""The human tables: `repos` shows whole values and the conflicted and stash counts; `radar` gives every
reason its own next step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo, write


def run(db: Path, *args: str) -> str:
    proc = run_cli(*args, db=db, env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_repos_table_and_radar_steps(tmp_path: Path):
    root = tmp_path / "code"
    empty = root / "empty"
    empty.mkdir(parents=True)
    git(empty, "init", "-q")
    repo = init_repo(root / "busy")
    git(repo, "checkout", "-q", "-b", "side")
    commit_file(repo, "README.md", "side\n")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "README.md", "main\n")
    write(repo / "stash.txt", "s\n")
    git(repo, "add", "stash.txt")
    git(repo, "stash", "-q")
    git(repo, "merge", "-q", "side", check=False)   # a conflict: 1 conflicted file
    write(repo / "new.txt", "n\n")
    db = tmp_path / "fleet.db"
    run(db, "scan", str(root))
    table = run(db, "repos")
    header = table.splitlines()[0].split()
    assert header[-3:] == ["conflicted", "stashes", "op"]
    empty_row = next(line for line in table.splitlines() if line.startswith("empty"))
    assert "(no commits)" in empty_row
    busy = next(line for line in table.splitlines() if line.startswith("busy")).split()
    assert busy[-3:] == ["1", "1", "merge"]

    radar = run(db, "radar").splitlines()
    steps = [line for line in radar if "git add them, then git commit" in line or "review and commit" in line
             or "git push -u origin main" in line]
    assert len(steps) == 3   # conflict, local changes and no upstream: each reason's own step is shown


def _narrow(db: Path, *args: str) -> str:
    """The command piped (no terminal) at 80 columns, as `fleetdeck repos | less` shows it."""
    proc = run_cli(*args, db=db, env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_narrow_tables_keep_what_tells_rows_apart(tmp_path: Path):
    root = tmp_path / "code"
    names = ["r01-distributed-systems-notes", "r02-distributed-systems-book",
             "r03-an-extremely-long-repository-name-that-goes-on-alpha",
             "r03-an-extremely-long-repository-name-that-goes-on-omega"]
    for name in names:
        repo = init_repo(root / name)
        write(repo / "dirty.txt", "x\n")
    db = tmp_path / "fleet.db"
    run(db, "scan", str(root))
    for command, column in (("repos", 0), ("radar", 1)):
        table = _narrow(db, command)
        assert max(len(line) for line in table.splitlines()) <= 80, table
        firsts = [line.split()[column] for line in table.splitlines()[1:]
                  if line.split() and len(line.split()) > column and line.split()[column].startswith("r0")]
        assert firsts[:2] == names[:2] or set(names[:2]) <= set(firsts), table  # whole, not `r02-di…`
        cut = [f for f in firsts if f.startswith("r03")]
        assert len(set(cut)) == 2 and all("…" in f and len(f) <= 40 for f in cut), cut  # the middle goes
        assert {f[-5:] for f in cut} == {"alpha", "omega"}
