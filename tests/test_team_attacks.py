"""Team mode, attacked: what an attack-minded review found and each fix keeps shut (real PostgreSQL, real git,
the CLI). The harness (machines, the hub, the fleet) is tests/test_team.py's."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.fleets.cli import fleetdeck_argv
from tests.fleets.gitbuild import commit_file, git
from tests.test_team import Machine, build_fleet, hub, hub_rows, machines, server  # noqa: F401  (fixtures)

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")

ALL_TABLES = ("repos", "branches", "worktrees", "submodules", "events", "lost", "presence", "proposals", "audit")


def hub_dump(dsn: str) -> str:
    return json.dumps(hub_rows(dsn, " union all ".join(f"select to_jsonb(t) from fleetdeck.{t} t"
                                                       for t in ALL_TABLES)), default=str)


@pytest.mark.slow  # a real PostgreSQL and the CLI of several machines
def test_share_names_hides_a_worktree_outside_the_fleet_and_home(tmp_path, hub):  # noqa: F811
    admin = Machine(tmp_path, "admin")
    admin.run("team", "init", hub)
    m = Machine(tmp_path, "private")
    build_fleet(m)
    outside = tmp_path / "elsewhere" / "private-lib-spike"          # neither under the fleet's root nor home
    git(m.fleet / "private-lib", "worktree", "add", "-q", str(outside), "-b", "spike")
    m.run("scan")
    made = admin.json("team", "enroll", m.name, "--dsn", hub)
    m.run("team", "join", made["dsn"], "--machine", m.name, "--share", "names")
    m.run("team", "push", "--once")
    assert hub_rows(hub, "select count(*) from fleetdeck.worktrees where machine_id = 'private'")[0][0] == 2  # hotfix, spike
    dump = hub_dump(hub)
    assert "private-lib-spike" in dump                              # the worktree is there, by name
    assert str(tmp_path) not in dump and str(outside) not in dump


@pytest.mark.slow  # a real PostgreSQL and the CLI of several machines
def test_enroll_never_sends_the_password_in_clear(tmp_path, hub, server):  # noqa: F811
    """A hub that logs DDL (`log_statement = 'ddl'`, common on a shared server) logs `CREATE ROLE … PASSWORD`:
    the statement must carry the SCRAM verifier, never the password itself."""
    db = hub.rsplit("/", 1)[1]
    with psycopg.connect(hub, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{db}" SET log_statement = \'ddl\'')
    admin = Machine(tmp_path, "admin")
    admin.run("team", "init", hub)
    made = admin.json("team", "enroll", "laptop", "--dsn", hub)
    password = psycopg.conninfo.conninfo_to_dict(made["dsn"])["password"]
    log = (server.base / "log").read_text(errors="replace")
    assert 'ROLE "fleetdeck_machine_laptop"' in log                 # the server did log the statement
    assert password not in log
    with psycopg.connect(made["dsn"]) as conn:                      # and the password still logs in
        assert conn.execute("select fleetdeck.current_machine()").fetchone() == ("laptop",)


@pytest.mark.slow  # a real PostgreSQL and the CLI of several machines
def test_an_event_the_index_replaces_after_a_push_reaches_the_hub(machines, hub):  # noqa: F811
    """HEAD's reflog line read before its branch's (a scan between git's two appends): the index later replaces
    the HEAD event by the branch's. The hub must end with the index's events, not the pushed twin."""
    laptop = machines[0]
    repo = laptop.fleet / "laptop-web"
    laptop.run("team", "push", "--once")
    commit_file(repo, "twin.txt", "twin\n")
    branch_log = repo / ".git/logs/refs/heads/main"
    lines = branch_log.read_bytes().splitlines(keepends=True)
    branch_log.write_bytes(b"".join(lines[:-1]))                   # git has appended to HEAD's log only
    laptop.run("scan")
    laptop.run("team", "push", "--once")
    branch_log.write_bytes(b"".join(lines))                         # and now to the branch's
    laptop.run("scan")
    laptop.run("team", "push", "--once")
    local = sorted(laptop.local("select id, ref, kind from events"))
    remote = sorted(hub_rows(hub, "select id, ref, kind from fleetdeck.events where machine_id = 'laptop'"))
    assert remote == local


def test_join_writes_the_password_through_no_planted_temp_file(tmp_path, monkeypatch):
    """A symlink planted where `join` put its temp file (a settings folder others can write to) received the
    password before the rename; the temp file is now made exclusively (mkstemp), so nothing planted is written."""
    import os

    from fleet.team import config as team_config

    folder = tmp_path / "shared-config"
    folder.mkdir()
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(folder / "settings.toml"))
    trap = tmp_path / "attacker-reads-this"
    trap.write_text("")
    (folder / f".team-password.{os.getpid()}.tmp").symlink_to(trap)
    team_config.save("host=127.0.0.1 dbname=hub user=fleetdeck_machine_laptop", "laptop", "paths", "s3cret-pw")
    assert trap.read_text() == ""
    assert team_config.read_password() == "s3cret-pw"
    assert (folder / "team-password").stat().st_mode & 0o777 == 0o600


@pytest.mark.slow  # a real PostgreSQL and the CLI of several machines
def test_enrolling_a_name_that_maps_to_an_enrolled_role_is_a_conflict(tmp_path, hub):  # noqa: F811
    """`a-b` and `a_b` are one PostgreSQL role: enrolling the second must neither reset the first's password
    nor answer with the hub's raw constraint error."""
    admin = Machine(tmp_path, "admin")
    admin.run("team", "init", hub)
    first = admin.json("team", "enroll", "lap-top", "--dsn", hub)
    proc = admin.run("team", "enroll", "lap_top", "--dsn", hub, check=False)
    assert proc.returncode == 1 and "[CONFLICT]" in proc.stderr and "lap-top" in proc.stderr, proc.stderr
    with psycopg.connect(first["dsn"]) as conn:                      # the first machine's login still works
        assert conn.execute("select fleetdeck.current_machine()").fetchone() == ("lap-top",)


@pytest.mark.slow  # a real PostgreSQL and the CLI of several machines
def test_the_join_command_enroll_prints_puts_no_password_in_the_process_list(tmp_path, hub):  # noqa: F811
    """`enroll` printed `fleetdeck team join '<DSN with the password>'`: run as shown, the password sat in
    argv, readable by every local user in /proc/<pid>/cmdline while `join` ran. The printed command now carries
    none; the password goes in on stdin (or a terminal prompt) and the machine still joins and pushes."""
    import shlex
    import subprocess

    from tests.fleets.cli import fleetdeck_argv

    admin = Machine(tmp_path, "admin")
    admin.run("team", "init", hub)
    m = Machine(tmp_path, "laptop")
    build_fleet(m)
    text = admin.run("team", "enroll", m.name, "--dsn", hub).stdout
    password = psycopg.conninfo.conninfo_to_dict(text.split("\n  ", 1)[1].split("\n", 1)[0])["password"]
    shown = next(line for line in text.splitlines() if line.startswith("On that machine: "))
    assert password not in shown
    argv = shlex.split(shown.removeprefix("On that machine: ").split(" (", 1)[0])
    assert argv[:3] == ["fleetdeck", "team", "join"]
    joined = subprocess.run(fleetdeck_argv(*argv[1:], "--password-stdin"), input=password + "\n", env=m.env,
                            capture_output=True, text=True, timeout=120)
    assert joined.returncode == 0, joined.stderr
    assert password not in joined.stdout + joined.stderr
    assert m.json("team", "push", "--once")["sent"]["repos"] == len(m.local("select id from repos"))


def test_a_password_file_swapped_for_a_link_or_a_fifo_is_refused_not_read(tmp_path, monkeypatch):
    """The password file is opened without following links and checked on the open file: a link to another
    0600 file (the name swapped after a check) or a FIFO (a read that would block) is refused, never read."""
    import os

    from fleet.errors import FleetError
    from fleet.team import config as team_config

    monkeypatch.setenv("FLEETDECK_SETTINGS", str(tmp_path / "settings.toml"))
    secret = tmp_path / "other-secret"
    secret.write_text("not-the-hub-password\n")
    secret.chmod(0o600)
    path = team_config.password_path()
    path.symlink_to(secret)
    with pytest.raises(FleetError, match="regular file"):
        team_config.read_password()
    path.unlink()
    os.mkfifo(path, 0o600)
    with pytest.raises(FleetError, match="regular file"):
        team_config.read_password()


@pytest.mark.slow  # a real PostgreSQL and the CLI of several machines
def test_a_rebuilt_index_replaces_its_old_rows_on_the_hub(machines, hub):  # noqa: F811
    """The index deleted and the fleet scanned again numbers repos and events afresh from 1: the hub kept the
    old file's rows under the same keys (a record replaced only by a newer generation, events never), so it
    showed repos and events that no longer exist, and missed the new ones. The hub now knows which index file
    its rows came from and drops the old file's rows in the new file's first push."""
    import shutil

    laptop, desktop = machines
    laptop.run("team", "push", "--once")
    desktop.run("team", "push", "--once")
    for suffix in ("", "-wal", "-shm"):
        __import__("pathlib").Path(f"{laptop.db}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(laptop.fleet / "laptop-lib-hotfix")
    git(laptop.fleet / "laptop-lib", "worktree", "prune")
    shutil.rmtree(laptop.fleet / "work")                            # the first repo the old index numbered
    commit_file(laptop.fleet / "laptop-web", "after.txt", "after the rebuild\n")
    laptop.run("scan", str(laptop.fleet))
    laptop.run("team", "push", "--once")
    local = sorted(laptop.local("select id, name, generation from repos"))
    assert sorted(hub_rows(hub, "select repo_id, name, generation from fleetdeck.repos "
                                "where machine_id = 'laptop'")) == local
    assert sorted(hub_rows(hub, "select id, ref, kind from fleetdeck.events where machine_id = 'laptop'")) \
        == sorted(laptop.local("select id, ref, kind from events"))
    assert sorted(hub_rows(hub, "select repo_id, path from fleetdeck.worktrees where machine_id = 'laptop'")) \
        == sorted(laptop.local("select repo_id, path from worktrees"))
    assert sorted(hub_rows(hub, "select repo_id, name, generation from fleetdeck.repos where machine_id = "
                                "'desktop'")) == sorted(desktop.local("select id, name, generation from repos"))


@pytest.mark.slow
def test_events_after_a_prune_of_every_event_reach_the_hub(machines, hub):  # noqa: F811
    """`prune-events` deleting every event let SQLite number the next ones from 1 again, below the outbox's
    cursor: the hub never received them (and would have kept its old rows under those ids)."""
    laptop = machines[0]
    laptop.run("team", "push", "--once")
    newest = laptop.local("select max(at) from events")[0][0]
    import sqlite3

    from fleet.index.events import prune_events
    from fleet.index.store import open_index
    with open_index(laptop.db) as index:
        assert prune_events(index, 0, now=newest + 1)["events_deleted"] > 0
    with sqlite3.connect(laptop.db) as conn:
        assert conn.execute("select count(*) from events").fetchone() == (0,)
    commit_file(laptop.fleet / "laptop-web", "later.txt", "later\n", "made after the prune")
    laptop.run("scan")
    laptop.run("team", "push", "--once")
    ours = laptop.local("select id, ref, kind from events")
    assert ours and set(ours) <= set(hub_rows(hub, "select id, ref, kind from fleetdeck.events "
                                                   "where machine_id = 'laptop'"))


@pytest.mark.slow
def test_a_hub_decision_asks_the_person_on_the_terminal_as_a_local_one_does(machines, hub, tmp_path,
                                                                            monkeypatch):  # noqa: F811
    """`team decide` signed at once, asking nothing: whatever ran it with the key's path (an agent's shell on the
    approver's machine) turned it into a signed approval. It now shows the mirrored proposal and asks on the
    controlling terminal like `proposals approve` (stdin is never read; `--yes` only for a non-interactive
    approver the person set up); nothing reaches the hub unless the person confirmed."""
    from fleet.audit.keys import keygen
    from tests.test_cli_approval import _on_terminal
    from tests.test_team import _propose

    laptop = machines[0]
    _, private, _ = keygen(tmp_path / "alice-keys")
    pid = _propose(laptop, monkeypatch, "asked-first")
    laptop.run("team", "push", "--once")
    argv = ("team", "decide", "laptop", pid, "approve", "--dsn", hub, "--key", str(private), "--as", "alice")
    piped = subprocess.run(fleetdeck_argv(*argv, "--yes"), input="y\nyes\n", env=laptop.env, capture_output=True,
                           text=True, timeout=120, start_new_session=True)   # no controlling terminal
    assert piped.returncode == 1 and "[NO_TERMINAL]" in piped.stderr, piped.stderr
    code, _, shown = _on_terminal({"db": laptop.db}, *argv, answer="n", env=laptop.env)
    assert code == 1 and f"{pid}" in shown and "approve this" in shown and "type 'y' to confirm" in shown
    assert hub_rows(hub, "select count(*) from fleetdeck.decisions")[0][0] == 0
    code, out, shown = _on_terminal({"db": laptop.db}, *argv, "--json", answer="y", env=laptop.env)
    assert code == 0, shown
    assert hub_rows(hub, "select proposal_id, action from fleetdeck.decisions") == [(pid, "approve")]
