"""The index file itself: private permissions, and a file fleetdeck cannot use (corrupt, truncated, a
directory, read-only) refused by every command with one clear line naming it and saying what to do."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.index.pool import IndexPool
from fleet.index.scan import scan
from fleet.index.store import Index, open_index
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.gitbuild import init_repo

# Every command that uses the index, with arguments that would otherwise make it run (or serve) normally.
COMMANDS = {
    "scan": ["scan"], "repos": ["repos"], "radar": ["radar"], "presence": ["presence"], "roots": ["roots"],
    "digest": ["digest"], "lost": ["lost"], "prune-events": ["prune-events", "--older-than", "90d"],
    "watch": ["watch"], "serve": ["serve", "--port", "0", "--no-watch"], "mcp": ["mcp"],
    "demo": ["demo", "--port", "0", "--no-watch"],
}
# Commands that would serve (or watch) if the refusal regressed run as processes, so a regression fails on the
# timeout instead of hanging the run; the others run in this process (tests/fleets/cli.run_cli) unless a
# read-only bind mount needs a process of their own.
SERVING = frozenset({"watch", "serve", "mcp", "demo"})


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_index_is_private(tmp_path: Path) -> None:
    db = tmp_path / "data" / "fleetdeck" / "fleet.db"
    with open_index(db) as index:
        index.set_meta("probe", {"written": True})  # makes SQLite create the -wal and -shm files
        assert mode_of(db) == 0o600 and mode_of(db.parent) == 0o700
        assert mode_of(Path(f"{db}-wal")) == 0o600 and mode_of(Path(f"{db}-shm")) == 0o600
    assert mode_of(Path(f"{db}.migrate.lock")) == 0o600


def test_an_existing_world_readable_index_is_tightened(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.delenv("FLEETDECK_DB", raising=False)
    folder = tmp_path / "share" / "fleetdeck"
    with open_index(None) as index:
        assert index.path == folder / "fleet.db"
    os.chmod(folder, 0o755)
    os.chmod(folder / "fleet.db", 0o644)
    open_index(None).close()
    assert mode_of(folder) == 0o700 and mode_of(folder / "fleet.db") == 0o600
    # a folder the person chose (--db) is theirs: only the file is tightened
    own = tmp_path / "shared"
    own.mkdir(mode=0o755)
    os.chmod(own, 0o755)
    open_index(own / "f.db").close()
    os.chmod(own / "f.db", 0o644)
    open_index(own / "f.db").close()
    assert mode_of(own) == 0o755 and mode_of(own / "f.db") == 0o600


def test_meta_values_round_trip_as_json(db_path: Path) -> None:
    with open_index(db_path) as index:
        assert index.meta("absent") is None and index.meta("absent", 7) == 7
        index.set_meta("k", {"a": [1, 2]})
        assert index.meta("k") == {"a": [1, 2]}
        with index.write():
            index.set_meta("k", "inside another transaction")  # joins it instead of failing
        assert index.meta("k") == "inside another transaction"


def test_the_pool_gives_each_thread_its_own_handle_and_closes_them_all(db_path: Path) -> None:
    pool = IndexPool(db_path)
    mine = pool.get()
    assert pool.get() is mine
    theirs: list[Index] = []
    worker = threading.Thread(target=lambda: theirs.append(pool.get()))
    worker.start()
    worker.join()
    assert theirs[0] is not mine and theirs[0].path == mine.path == db_path
    pool.close()
    for handle in (mine, theirs[0]):
        with pytest.raises(Exception, match="closed"):
            handle.conn.execute("select 1")


# --- unusable files --------------------------------------------------------------------------------------

def _corrupt(db: Path) -> None:
    db.write_bytes(os.urandom(3) + b"not a database at all" * 400)


def _truncated(db: Path) -> None:
    with open(db, "r+b") as fh:
        fh.truncate(os.path.getsize(db) // 2)


def _directory(db: Path) -> None:
    db.unlink()
    db.mkdir()


CASES = {"corrupt": (_corrupt, "move it aside"), "truncated": (_truncated, "is truncated"),
         "directory": (_directory, "is a directory"), "read-only": (None, "is read-only")}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real index of a small fleet (big enough to be several pages), closed cleanly."""
    base = tmp_path_factory.mktemp("indexed")
    for n in range(6):
        init_repo(base / "root" / f"r{n}", commits=3)
    with open_index(base / "good" / "fleet.db") as index:
        scan(index, [str(base / "root")])
    assert not Path(f"{base / 'good' / 'fleet.db'}-wal").exists()
    return base / "good" / "fleet.db", base / "root"


def _read_only_prefix(folder: Path) -> list[str]:
    """Run the command with `folder` read-only: a read-only bind mount for root (who may write any file
    mode allows), plain permissions for anyone else."""
    if os.geteuid() != 0:
        os.chmod(folder / "fleet.db", 0o444)
        os.chmod(folder, 0o555)
        return []
    if shutil.which("unshare") is None:
        pytest.skip("root without unshare: cannot make a read-only index")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a mount namespace for a read-only bind mount here")
    return ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
            f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}" && exec "$@"', "sh"]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_unusable_index_is_one_clear_line_and_exit_1(indexed, tmp_path: Path, case: str, command: str) -> None:
    good, root = indexed
    db = tmp_path / "idx" / "fleet.db"
    db.parent.mkdir()
    shutil.copy(good, db)
    spoil, expected = CASES[case]
    prefix: list[str] = []
    if spoil is None:
        prefix = _read_only_prefix(db.parent)
    else:
        spoil(db)
    args = list(COMMANDS[command])
    if command in ("scan", "watch", "serve"):
        args.append(str(root))
    if command == "demo":
        args += ["--dir", str(tmp_path / "demo")]
    try:
        if prefix or command in SERVING:
            proc = subprocess.run(prefix + fleetdeck_argv("--db", str(db), *args), capture_output=True, text=True,
                                  env=fleetdeck_env(), timeout=60, stdin=subprocess.DEVNULL)
        else:
            proc = run_cli(*args, db=db, timeout=60)
    finally:
        if spoil is None and os.geteuid() != 0:
            os.chmod(db.parent, 0o755)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("demo fleet built in")]
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("fleetdeck: error: the index ") and str(db) in lines[0] and expected in lines[0]
    assert proc.stdout == ""


def test_opening_an_unusable_index_raises_a_fleet_error(indexed, tmp_path: Path) -> None:
    good, _root = indexed
    for case, (spoil, expected) in CASES.items():
        if spoil is None:
            continue
        db = tmp_path / case / "fleet.db"
        db.parent.mkdir()
        shutil.copy(good, db)
        spoil(db)
        with pytest.raises(FleetError) as err:
            open_index(db)
        assert err.value.code == "BAD_PATH" and str(db) in err.value.message and expected in err.value.message


def test_damage_found_mid_command_is_the_same_one_line_error(indexed, tmp_path: Path) -> None:
    """A file that opens but whose events table is garbage: the query fails part-way through the command."""
    good, _root = indexed
    db = tmp_path / "fleet.db"
    shutil.copy(good, db)
    with open_index(db) as index:
        page_size = index.conn.execute("PRAGMA page_size").fetchone()[0]
        [(root_page,)] = index.conn.execute("select rootpage from sqlite_master where name = 'event_rows'")
    with open(db, "r+b") as fh:
        fh.seek((root_page - 1) * page_size)
        fh.write(b"\xa5" * page_size)
    open_index(db).close()  # it still opens
    for command in (["digest", "--since", "3650d"], ["lost"]):
        proc = run_cli(*command, db=db, timeout=60)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 1 and len(lines) == 1, proc.stderr
        assert str(db) in lines[0] and "malformed" in lines[0] and "move it aside" in lines[0]
