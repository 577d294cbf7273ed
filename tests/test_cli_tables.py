"""The human tables: `repos` shows whole values and the conflicted and stash counts; `radar` gives every
reason its own next step."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import commit_file, git, init_repo, write


def run(db: Path, *args: str) -> str:
    proc = subprocess.run(fleetdeck_argv("--db", str(db), *args), capture_output=True, text=True, timeout=120,
                          env=fleetdeck_env(COLUMNS="250"))
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
