"""The CLI's edges: a missing index is said and created by no read; numeric options are bounded; git is the
one a shell would run (PATH order) and `--version` names it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import init_repo

READS = [["radar"], ["radar", "--json"], ["repos"], ["repos", "--json"], ["presence"], ["digest"],
         ["digest", "--format", "json"], ["lost"], ["roots"], ["roots", "list"], ["roots", "remove", "/x"],
         ["prune-events", "--older-than", "9d"], ["scan"], ["watch"]]


def run(*args: str, env: dict | None = None, cwd: Path | None = None, process: bool = False) -> subprocess.CompletedProcess:
    return run_cli(*args, env=env, cwd=cwd, process=process)


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_read_of_a_missing_index_says_so_and_creates_nothing(tmp_path: Path, command: list[str]):
    db = tmp_path / "sub" / "fleet.db"
    proc = run("--db", str(db), *command)
    assert proc.returncode == 1, proc.stderr
    assert "no index yet: run `fleetdeck scan ROOT`" in proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / "sub").exists()


def test_the_default_index_path_is_not_created_by_a_read(tmp_path: Path):
    proc = run("radar", env={"XDG_DATA_HOME": str(tmp_path / "data"), "FLEETDECK_DB": None})
    assert proc.returncode == 1 and "no index yet" in proc.stderr
    assert not (tmp_path / "data").exists()


def test_scan_of_a_missing_root_creates_no_database(tmp_path: Path):
    db = tmp_path / "fleet.db"
    proc = run("--db", str(db), "scan", str(tmp_path / "nonexistent"))
    assert proc.returncode == 1 and "not a directory" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("option", [
    ["radar", "--limit", "0"], ["radar", "--limit", "-1"], ["radar", "--limit", "x"],
    ["digest", "--max-events", "0"], ["digest", "--max-events", "1001"], ["serve", "--port", "-1"],
    ["serve", "--port", "65536"], ["demo", "--port", "70000"], ["patch", "generate", "--context-lines", "0"],
    ["patch", "generate", "--context-lines", "21"], ["patch", "remove", "p.patch", "--index", "-1"],
], ids=" ".join)
def test_every_numeric_option_is_bounded(tmp_path: Path, option: list[str]):
    proc = run("--db", str(tmp_path / "fleet.db"), *option)
    assert proc.returncode == 2, proc.stderr
    assert "must be" in proc.stderr
    assert os.listdir(tmp_path) == []


def test_radar_limit_within_bounds_cuts_and_says_so(tmp_path: Path):
    root = tmp_path / "code"
    for name in ("a", "b", "c"):
        repo = init_repo(root / name)
        (repo / "new.txt").write_text("x\n")
    db = str(tmp_path / "fleet.db")
    assert run("--db", db, "scan", str(root)).returncode == 0
    import json

    view = json.loads(run("--db", db, "radar", "--json", "--limit", "1").stdout)
    assert len(view["entries"]) == 1 and view["truncated"] is True and view["omitted_count"] == 2


def _fake_git(folder: Path, version: str) -> Path:
    """A `git` that answers `git version` itself and hands every other command to the real git."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    folder.mkdir(parents=True)
    script = folder / "git"
    script.write_text(f'#!/bin/sh\nfor a; do last="$a"; done\n'
                      f'if [ "$last" = version ]; then echo "git version {version}"; exit 0; fi\n'
                      f'exec {real} "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.slow
def test_git_is_looked_up_in_path_order_and_shown_by_version(tmp_path: Path):
    newer = _fake_git(tmp_path / "newer" / "bin", "9.99.0")
    _fake_git(tmp_path / "rel" / "bin", "0.0.1-relative")
    env = {"PATH": os.pathsep.join(["rel/bin", str(newer.parent), os.environ["PATH"]])}
    # a process of its own: which git is found is decided once per process, from its PATH
    proc = run("--version", env=env, cwd=tmp_path, process=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("fleetdeck ")
    assert lines[1] == f"git version 9.99.0 ({newer})"   # the relative PATH entry is never used
    # the git it found runs every command: a scan works through the wrapper
    init_repo(tmp_path / "code" / "one")
    scan = run("--db", str(tmp_path / "fleet.db"), "scan", str(tmp_path / "code"), env=env, cwd=tmp_path,
               process=True)
    assert scan.returncode == 0, scan.stderr
