"""The `fleetdeck` CLI as a user runs it: JSON on stdout, exit codes 0/1/2 (a real process where the test is
about the process: its exit status, `python -m fleet`, what it imports, a terminal)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet import cli
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.gitbuild import init_repo, write


def run(*args: str, db: Path, check_rc: int | None = 0, process: bool = False) -> subprocess.CompletedProcess:
    proc = run_cli(*args, db=db, process=process)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stderr
    return proc


@pytest.fixture
def small_fleet(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    init_repo(root / "alpha", commits=2)
    beta = init_repo(root / "team" / "beta", commits=1)
    write(beta / "new.txt", "x\n")
    init_repo(root / "node_modules" / "skipped", commits=1)
    init_repo(root / "scratch" / "ignored-by-pattern", commits=1)
    return root


def test_scan_json_summary_then_repos_and_radar(small_fleet: Path, tmp_path: Path):
    db = tmp_path / "f.db"
    summary = json.loads(run("scan", str(small_fleet), "--skip", "scratch", "--json", db=db).stdout)
    assert summary["repos"] == 2 and summary["error_count"] == 0 and summary["elapsed_s"] >= 0
    assert summary["roots"] == [os.path.realpath(small_fleet)]

    records = json.loads(run("repos", "--json", db=db).stdout)
    assert [r["name"] for r in records] == ["alpha", "team/beta"]
    required = {"path", "name", "root", "branch", "detached", "head", "upstream", "ahead", "behind", "staged",
                "unstaged", "untracked", "conflicted", "stashes", "operation", "worktrees", "submodules",
                "last_activity", "error"}
    assert required <= set(records[0])

    radar = json.loads(run("radar", "--json", db=db).stdout)
    assert radar["total"] == len(radar["entries"]) and radar["truncated"] is False
    assert radar["entries"][0]["name"] == "team/beta" and radar["entries"][0]["status"] == "local_changes"
    assert all(r["reasons"] and r["next_step"] for r in radar["entries"])
    table = run("radar", db=db).stdout
    assert "team/beta" in table and "uncommitted" in table

    # the skip pattern was saved: a scan of the saved roots still skips it
    again = json.loads(run("scan", "--json", db=db).stdout)
    assert again["repos"] == 2


@pytest.mark.slow
def test_roots_commands(tmp_path: Path, small_fleet: Path):
    db = tmp_path / "f.db"
    run("roots", "add", str(small_fleet), db=db)
    assert json.loads(run("roots", "list", "--json", db=db).stdout) == [os.path.realpath(small_fleet)]
    run("roots", "remove", str(small_fleet), db=db)
    assert run("roots", db=db).stdout.strip() == ""
    assert run("roots", "remove", str(small_fleet), db=db, check_rc=1).stderr.count("NOT_FOUND") == 1


@pytest.mark.slow
def test_exit_codes_and_version(tmp_path: Path):
    db = tmp_path / "f.db"
    assert run("--version", db=db, process=True).stdout.startswith("fleetdeck ")
    assert run("no-such-command", db=db, check_rc=2, process=True).returncode == 2
    assert run("roots", "add", db=db, check_rc=2, process=True).returncode == 2
    missing = run("scan", str(tmp_path / "nope"), db=db, check_rc=1, process=True)
    assert "not a directory" in missing.stderr and missing.stdout == ""
    assert "no index yet" in run("scan", db=db, check_rc=1, process=True).stderr
    assert not db.exists()
    run("roots", "add", str(tmp_path), db=db, process=True)
    run("roots", "remove", str(tmp_path), db=db, process=True)
    assert "no roots saved" in run("scan", db=db, check_rc=1, process=True).stderr


def test_fleetdeck_db_env_is_honoured(tmp_path: Path, small_fleet: Path):
    db = tmp_path / "env.db"
    proc = run_cli("scan", str(small_fleet), "--json", env={"FLEETDECK_DB": str(db)})
    assert proc.returncode == 0, proc.stderr
    assert db.exists()


def test_default_db_lives_under_xdg_data_home(tmp_path: Path, small_fleet: Path):
    data = tmp_path / "xdg"
    proc = run_cli("roots", "add", str(small_fleet), env={"XDG_DATA_HOME": str(data)})
    assert proc.returncode == 0, proc.stderr
    assert (data / "fleetdeck" / "fleet.db").exists()


def test_symlinked_folders_are_not_followed(tmp_path: Path):
    root = tmp_path / "root"
    outside = init_repo(tmp_path / "outside" / "repo", commits=1)
    root.mkdir()
    (root / "link").symlink_to(outside.parent, target_is_directory=True)
    init_repo(root / "inside", commits=1)
    db = tmp_path / "f.db"
    summary = json.loads(run("scan", str(root), "--json", db=db).stdout)
    assert summary["repos"] == 1


def test_python_dash_m_fleet_is_the_same_cli(tmp_path: Path):
    proc = run_cli("--help", process=True)
    assert proc.returncode == 0 and "scan" in proc.stdout and "radar" in proc.stdout


@pytest.mark.slow
def test_scan_on_a_terminal_shows_progress_and_still_forks_its_workers(small_fleet: Path, tmp_path: Path):
    """The progress bar must not start a thread: with one, the scan falls back from processes to threads."""
    import pty

    db = tmp_path / "tty.db"
    code = ("import threading, fleet.index.scan as s, fleet.cli as c; real = s._read_and_store\n"
            "def spy(*a, **k):\n"
            "    print('threads-at-scan', threading.active_count(), file=open(%r, 'w'))\n"
            "    return real(*a, **k)\n"
            "s._read_and_store = spy\n"
            "raise SystemExit(c.main(['--db', %r, 'scan', %r]))") % (str(tmp_path / "threads.txt"), str(db),
                                                                   str(small_fleet))
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(fleetdeck_env())
        os.execv(fleetdeck_argv()[0], [fleetdeck_argv()[0], "-c", code])
    output = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output
    assert b"scanning" in output and b"indexed 3 repositories" in output
    assert (tmp_path / "threads.txt").read_text().split() == ["threads-at-scan", "1"]


@pytest.mark.slow
def test_a_core_command_builds_only_its_own_parsers_and_every_command_still_parses(tmp_path: Path):
    """`scan`, `repos`... import nothing of fleet/ops, fleet/patch or fleet/audit to build their command line;
    the commands those packages define still parse, whatever global options come first."""
    code = ("import sys, fleet.cli as c\n"
            "c.build_parser(sys.argv[1:])\n"
            "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith(('fleet.ops', 'fleet.patch', "
            "'fleet.audit'))}))")
    env = fleetdeck_env()

    def loaded(*argv: str) -> str:
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert loaded("--db", "x.db", "scan", "root") == "[]"
    assert loaded("--po", "radar", "repos", "--json") == "[]"           # --po(licy) takes `radar` as its value
    assert loaded("--db", "scan", "proposals", "list") == "['audit', 'ops']"      # the proposals group alone
    assert loaded("audit", "verify") == "[]"                            # its own group only: no write side
    assert loaded("--help") == "['audit', 'ops', 'patch']"
    for argv in (("--db", str(tmp_path / "f.db"), "proposals", "list", "--json"), ("--db=scan", "patch", "--help"),
                 ("--verbose", "audit", "--help")):
        proc = run_cli(*argv)
        assert proc.returncode in (0, 1) and "invalid choice" not in proc.stderr, (argv, proc.stderr)
    proc = run_cli("--help")
    assert all(name in proc.stdout for name in ("scan", "patch", "proposals", "audit"))


def _commands(*argv: str) -> list[str]:
    """The command words of the parser built for `argv`, in `--help`'s order."""
    parser = cli.build_parser(list(argv))
    return list(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)


def test_each_lazy_command_builds_its_own_group_and_none_builds_them_all():
    """`LAZY_GROUPS` names exactly the commands each group adds: a command line naming one gets that group's
    parsers (no other group's), any other gets every group, in the order `--help` lists them."""
    core, every = _commands("scan"), _commands()
    assert [w for w in every if w not in core] == [w for _m, _f, words in cli.LAZY_GROUPS for w in words]
    assert _commands("--help") == _commands("typo") == every
    for _module, _function, words in cli.LAZY_GROUPS:
        for word in words:
            owners = [w for _m, _f, ws in cli.LAZY_GROUPS if word in ws for w in ws]
            assert _commands("--db", "x.db", word) == core + owners, word
