"""Team mode against a real PostgreSQL the tests start: two machines (separate settings, indexes and fleets)
push to one hub through the CLI; the hub holds exactly their rows (the local index is the oracle), row-level
security keeps each machine to its own rows (tried with raw SQL), a hub stopped mid-push loses and doubles
nothing, `share = "names"` sends no absolute path, and an unreachable hub is one line without a password."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.index.store import open_index
from fleet.team import config as team_config
from fleet.team.push import Push, hub_connection
from tests.fleets import template
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream
from tests.fleets.postgres import shared_server

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
# each test starts machines through the CLI (fleets built, scanned, enrolled, joined) on a real PostgreSQL
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    """This process's PostgreSQL (tests/fleets/postgres.shared_server): one initdb per run, not per module."""
    return shared_server()


_INITIALISED: dict[int, str] = {}


def initialised_hub(server, prefix: str) -> str:
    """A new hub database with `team init`'s schema: a copy (CREATE DATABASE … TEMPLATE) of one this process
    initialised through the CLI once, which costs a fraction of init's DDL (the roles are the cluster's, made
    by that init; test_init_twice_changes_nothing inits a blank database)."""
    if server.port not in _INITIALISED:
        dsn = server.fresh_database("hub_initialised")
        Machine(server.base, "hub-admin").run("team", "init", dsn)          # its home goes with the cluster
        _INITIALISED[server.port] = dsn.rsplit("/", 1)[1]
    return server.fresh_database(prefix, template=_INITIALISED[server.port])


@pytest.fixture
def hub(server, request):
    """A hub of the test's own on that cluster, left running after a test that stopped it."""
    yield initialised_hub(server, "hub_" + request.node.name.lower().replace("[", "_").replace("]", "")[:40])
    server.ensure_running()


class Machine:
    """One machine: its own HOME, settings, index and fleet, driven through the CLI."""

    def __init__(self, base: Path, name: str) -> None:
        self.name, self.base = name, base / name
        self.home = self.base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n"
                                              "[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n")
        self.env = fleetdeck_env(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"),
                                 XDG_DATA_HOME=str(self.home / ".local/share"), FLEETDECK_DB="",
                                 GIT_CONFIG_GLOBAL=str(self.home / ".gitconfig"))
        self.env.pop("FLEETDECK_DB")
        self.fleet = self.base / "code"
        self.db = self.home / ".local/share/fleetdeck/fleet.db"

    def run(self, *args: str, check: bool = True, process: bool = False) -> subprocess.CompletedProcess:
        """The CLI in this machine's environment, exactly (nothing of the test process's own that it lacks), in
        the test's process unless `process` (tests/fleets/cli.run_cli)."""
        env = {**dict.fromkeys(os.environ), **self.env}
        proc = run_cli(*args, env=env, timeout=180, process=process)
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def json(self, *args: str) -> dict:
        return json.loads(self.run(*args, "--json").stdout)

    def decide(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """`team decide ARGS --yes --json` as the person's own script (a non-interactive approver set up)."""
        settings = self.home / ".config/fleetdeck/settings.toml"
        text = settings.read_text() if settings.exists() else ""
        if "[approval]" not in text:
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text(text + "\n[approval]\nnoninteractive = true\n")
        return self.run("team", "decide", *args, "--yes", "--json", check=check)

    def decided(self, *args: str) -> dict:
        """`decide`'s answer, which must be a success."""
        return json.loads(self.decide(*args).stdout)

    def local(self, sql: str, args: tuple = ()) -> list[tuple]:
        with sqlite3.connect(self.db) as conn:
            return conn.execute(sql, args).fetchall()


def build_fleet(machine: Machine) -> None:
    """A few repos in different states: ahead of origin, dirty, a second branch, a linked worktree."""
    root = machine.fleet
    env_home = {"HOME": str(machine.home), "GIT_CONFIG_GLOBAL": str(machine.home / ".gitconfig")}
    old = {k: os.environ.get(k) for k in env_home}
    os.environ.update(env_home)
    try:
        ahead = with_upstream(root / "work", f"{machine.name}-api", ahead=2)
        dirty = init_repo(root / f"{machine.name}-web", commits=2)
        (dirty / "scratch.txt").write_text("not yet\n")
        git(dirty, "branch", "feature")
        wt = init_repo(root / f"{machine.name}-lib", commits=1)
        git(wt, "worktree", "add", "-q", str(root / f"{machine.name}-lib-hotfix"), "-b", "hotfix")
        commit_file(ahead, "more.txt", "more\n")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    machine.run("scan", str(root))


PAIR = ("laptop", "desktop")


def _build_pair(base: Path) -> None:
    for name in PAIR:
        build_fleet(Machine(base, name))


def enrolled_pair(base: Path, hub: str, push: bool = False) -> list[Machine]:
    """laptop and desktop, each with its fleet built and scanned (a copy of this process's template of the two,
    tests/fleets/template.py: as a build at `base`, which must be empty, would leave them), enrolled on `hub` by
    an admin and joined (`enrolled`: what enroll answered); with `push`, each pushed once."""
    template.shared().copy("team-pair", _build_pair, base)
    pair = [Machine(base, name) for name in PAIR]
    admin = Machine(base, "admin")
    admin.run("team", "init", hub)
    for m in pair:
        m.enrolled = admin.json("team", "enroll", m.name, "--dsn", hub)
        m.run("team", "join", m.enrolled["dsn"], "--machine", m.name)
        if push:
            m.run("team", "push", "--once")
    return pair


@pytest.fixture
def machines(tmp_path, hub):
    return enrolled_pair(tmp_path, hub)


def hub_rows(dsn: str, sql: str, args: tuple = ()) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, args).fetchall()


def test_init_twice_changes_nothing(server, tmp_path):
    hub = server.fresh_database("hub_init_twice")
    admin = Machine(tmp_path, "admin")
    first = admin.json("team", "init", hub)
    assert first["applied"] == ["0001 tables", "0002 roles and row-level security", "0003 decisions made on the hub",
                                "0004 the index a machine's rows came from", "0005 the hub dashboard's indexes",
                                "0006 the digest's one pass over every machine", "0007 audit chains told apart",
                                "0008 the digest's pass in order, not sorted whole"]
    tables = hub_rows(hub, "select table_name from information_schema.tables where table_schema = 'fleetdeck' "
                           "order by 1")
    policies = hub_rows(hub, "select count(*) from pg_policies where schemaname = 'fleetdeck'")
    again = admin.json("team", "init", hub)
    assert again["applied"] == []
    assert hub_rows(hub, "select table_name from information_schema.tables where table_schema = 'fleetdeck' "
                         "order by 1") == tables
    assert hub_rows(hub, "select count(*) from pg_policies where schemaname = 'fleetdeck'") == policies


def test_both_machines_rows_reach_the_hub_exactly(machines, hub):
    for m in machines:
        out = m.json("team", "push", "--once")
        assert out["machine"] == m.name and out["sent"]["repos"] == len(m.local("select id from repos"))
    for m in machines:
        local = {(r[0], r[1], r[2]) for r in m.local("select id, name, generation from repos")}
        remote = {(r[0], r[1], r[2]) for r in hub_rows(
            hub, "select repo_id, name, generation from fleetdeck.repos where machine_id = %s", (m.name,))}
        assert remote == local
        assert {r[0] for r in hub_rows(hub, "select id from fleetdeck.events where machine_id = %s", (m.name,))} \
            == {r[0] for r in m.local("select id from events")}
        branches = {(r[0], r[1]) for r in m.local("select repo_id, name from branches")}
        assert {(r[0], r[1]) for r in hub_rows(
            hub, "select repo_id, name from fleetdeck.branches where machine_id = %s", (m.name,))} == branches
        worktrees = {(r[0], r[1]) for r in m.local("select repo_id, path from worktrees")}
        assert {(r[0], r[1]) for r in hub_rows(
            hub, "select repo_id, path from fleetdeck.worktrees where machine_id = %s", (m.name,))} == worktrees
        record = hub_rows(hub, "select record from fleetdeck.repos where machine_id = %s and name = %s",
                          (m.name, f"{m.name}-web"))[0][0]
        assert record["untracked"] == 1 and record["path"] == str(m.fleet / f"{m.name}-web")
    pushed = hub_rows(hub, "select name, last_push_at is not null from fleetdeck.machines order by name")
    assert pushed == [("desktop", True), ("laptop", True)]
    # a second push sends nothing new; a change is sent, and only it
    laptop = machines[0]
    assert laptop.json("team", "push", "--once")["sent"] == {}
    commit_file(laptop.fleet / "laptop-web", "new.txt", "new\n")
    laptop.run("scan")
    again = laptop.json("team", "push", "--once")["sent"]
    assert again["repos"] >= 1 and again["events"] >= 1
    head = git(laptop.fleet / "laptop-web", "rev-parse", "HEAD").strip()
    assert hub_rows(hub, "select record->>'head' from fleetdeck.repos where machine_id = 'laptop' and "
                         "name = 'laptop-web'") == [(head,)]


def test_status_says_what_waits(machines):
    laptop = machines[0]
    before = laptop.json("team", "status")
    assert before["machine"] == "laptop" and before["hub"].startswith("127.0.0.1:")
    assert before["backlog"]["repos"] == len(laptop.local("select id from repos")) and before["last_push_at"] is None
    laptop.run("team", "push", "--once")
    after = laptop.json("team", "status")
    assert after["connected"] is True and after["last_error"] is None and after["last_push_at"]
    assert after["backlog"] == {"repos": 0, "events": 0, "proposals": 0, "audit": 0}
    assert set(after) == {"machine", "hub", "connected", "backlog", "last_push_at", "last_error"}


def test_a_machine_cannot_touch_another_machines_rows(machines, hub):
    laptop, desktop = machines
    for m in machines:
        m.run("team", "push", "--once")
    own = laptop.enrolled["dsn"]
    with psycopg.connect(own, autocommit=True) as conn:
        seen = {r[0] for r in conn.execute("select distinct machine_id from fleetdeck.repos")}
        assert seen == {"laptop"}                                   # reads only its own rows
        with pytest.raises(psycopg.errors.InsufficientPrivilege):   # cannot write rows as desktop
            conn.execute("insert into fleetdeck.repos (machine_id, repo_id, name, generation, record) "
                         "values ('desktop', 999, 'planted', 1, '{}')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):   # nor move its own rows to desktop
            conn.execute("update fleetdeck.repos set machine_id = 'desktop'")
        assert conn.execute("update fleetdeck.repos set name = 'x' where machine_id = 'desktop'").rowcount == 0
        assert conn.execute("delete from fleetdeck.events where machine_id = 'desktop'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("update fleetdeck.machines set last_push_at = now() where name = 'desktop'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("create table fleetdeck.planted (x int)")
    desktop_rows = hub_rows(hub, "select count(*) from fleetdeck.repos where machine_id = 'desktop'")[0][0]
    assert desktop_rows == len(desktop.local("select id from repos"))
    assert hub_rows(hub, "select count(*) from fleetdeck.repos where name in ('planted', 'x')") == [(0,)]


def test_a_viewer_login_reads_the_hub_and_writes_no_machine_row(machines, hub, server):
    """`team viewer`: a person's dashboard login, printed once (never in a DDL log), that reads every machine's
    rows and cannot write, move or delete any of them, nor settle a decision or pose as a machine (raw SQL)."""
    from fleet.team import hubview
    from fleet.team.hubread import Hub

    laptop, desktop = machines
    for m in machines:
        m.run("team", "push", "--once")
    db = hub.rsplit("/", 1)[1]
    with psycopg.connect(hub, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{db}" SET log_statement = \'ddl\'')
    admin = Machine(laptop.base.parent, "hub-admin")
    made = admin.run("team", "viewer", "alice", "--dsn", hub)
    dsn = next(line.strip() for line in made.stdout.splitlines() if "password=" in line)
    password = psycopg.conninfo.conninfo_to_dict(dsn)["password"]
    assert made.stdout.count(password) == 1 and password not in made.stderr
    assert password not in (server.base / "log").read_text(errors="replace")
    assert "role fleetdeck_viewer_alice" in made.stdout and "fleetdeck serve --team" in made.stdout
    again = admin.run("team", "viewer", "alice", "--dsn", hub, check=False)
    assert again.returncode == 1 and "CONFLICT" in again.stderr                 # never resets a login
    assert admin.run("team", "viewer", "Bad Name", "--dsn", hub, check=False).returncode == 1
    assert admin.run("team", "viewer", "--dsn", hub, check=False).returncode == 2
    reader = Hub(dsn)
    try:
        reader.check()                                                       # `serve --team` accepts it
        assert {e["machine"] for e in hubview.queue(reader, {})["entries"]} == {"laptop", "desktop"}
    finally:
        reader.close()
    before = hub_rows(hub, "select count(*), max(name) from fleetdeck.repos")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("select fleetdeck.current_machine()").fetchone() == (None,)
        for sql in ("insert into fleetdeck.repos (machine_id, repo_id, name, generation, record) "
                    "values ('laptop', 999, 'planted', 1, '{}')",
                    "update fleetdeck.repos set name = 'x'", "delete from fleetdeck.events",
                    "update fleetdeck.proposals set status = 'approved'",
                    "insert into fleetdeck.audit (machine_id, seq, hash, entry) values ('laptop', 999, 'h', '{}')",
                    "update fleetdeck.machines set last_push_at = now()", "truncate fleetdeck.presence",
                    "update fleetdeck.decisions set outcome = 'applied'",
                    "select fleetdeck.pushed('paths')", "select fleetdeck.adopt_instance('x')",
                    "create table fleetdeck.planted (x int)", "create table public.planted (x int)",
                    "create role planted", "grant fleetdeck_machines to current_user"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):         # a decision settled at birth
            conn.execute("insert into fleetdeck.decisions (machine_id, proposal_id, action, approver, key_id, "
                         "payload, signature, outcome) values ('laptop', 'p', 'approve', 'a', 'k', '{}', 's', "
                         "'applied')")
    assert hub_rows(hub, "select count(*), max(name) from fleetdeck.repos") == before


def test_audit_entries_are_append_only_on_the_hub(machines, hub):
    laptop = machines[0]
    laptop.run("agents", "add", "claude-code")          # an audit entry on the laptop
    laptop.json("team", "push", "--once")
    rows = hub_rows(hub, "select seq, entry->>'event' from fleetdeck.audit where machine_id = 'laptop'")
    assert ("agent.added",) in {(e,) for _, e in rows}
    with psycopg.connect(laptop.enrolled["dsn"], autocommit=True) as conn:  # the machine may only append
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("update fleetdeck.audit set hash = 'forged'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("delete from fleetdeck.audit")
    with psycopg.connect(hub, autocommit=True) as conn:   # not even the owner, without disabling the trigger
        for statement in ("update fleetdeck.audit set hash = 'forged'", "delete from fleetdeck.audit",
                          "truncate fleetdeck.audit"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(statement)
    assert hub_rows(hub, "select count(*) from fleetdeck.audit where machine_id = 'laptop'") == [(len(rows),)]


def test_share_names_sends_no_absolute_path(tmp_path, hub):
    admin = Machine(tmp_path, "admin")
    admin.run("team", "init", hub)
    m = Machine(tmp_path, "private")
    build_fleet(m)
    m.run("agents", "add", "codex")
    made = admin.json("team", "enroll", m.name, "--dsn", hub)
    m.run("team", "join", made["dsn"], "--machine", m.name, "--share", "names")
    m.run("team", "push", "--once")
    names = {r[0] for r in hub_rows(hub, "select name from fleetdeck.repos")}
    assert names == {r[0] for r in m.local("select name from repos")}
    dump = json.dumps(hub_rows(hub, "select to_jsonb(t) from fleetdeck.repos t union all "
                                    "select to_jsonb(t) from fleetdeck.worktrees t union all "
                                    "select to_jsonb(t) from fleetdeck.branches t union all "
                                    "select to_jsonb(t) from fleetdeck.events t union all "
                                    "select to_jsonb(t) from fleetdeck.audit t"), default=str)
    assert len(dump) > 1000
    for secret in (str(m.base), str(m.home), str(tmp_path)):
        assert secret not in dump
    assert hub_rows(hub, "select count(*) from fleetdeck.audit where line is not null") == [(0,)]
    assert hub_rows(hub, "select share from fleetdeck.machines where name = 'private'") == [("names",)]


def test_an_unreachable_hub_is_one_line_without_the_password(machines, server):
    laptop = machines[0]
    settings = laptop.home / ".config/fleetdeck/settings.toml"
    password = (laptop.home / ".config/fleetdeck/team-password").read_text().strip()
    assert password not in settings.read_text() and "hub = " in settings.read_text()
    assert (laptop.home / ".config/fleetdeck/team-password").stat().st_mode & 0o777 == 0o600
    server.stop("immediate")
    try:
        proc = laptop.run("team", "push", "--once", check=False)
    finally:
        server.start()
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the hub at 127.0.0.1:" in lines[0] and "[HUB_UNREACHABLE]" in lines[0]
    assert password not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
    status = laptop.json("team", "status")
    assert status["connected"] is False and "cannot reach the hub" in status["last_error"]
    assert password not in json.dumps(status)


def test_a_hub_stopped_mid_push_gets_every_row_exactly_once(machines, hub, server, monkeypatch):
    laptop = machines[0]
    base = laptop.local("select ifnull(max(id), 0), ifnull(max(repo_id), 0) from event_rows")[0]
    with sqlite3.connect(laptop.db) as conn:     # a week of activity the watcher stored while offline
        conn.executemany("insert into event_rows (id, repo_id, ref, kind, at, rewrote, message) "
                         "values (?, ?, 'refs/heads/main', 'commit', ?, 0, ?)",
                         [(base[0] + i + 1, base[1], 1_700_000_000 + i, f"commit {i}") for i in range(60_000)])
    want = {r[0] for r in laptop.local("select id from event_rows")}
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(laptop.home / ".config/fleetdeck/settings.toml"))
    cfg = team_config.load()
    index = open_index(laptop.db)
    conn = hub_connection(cfg.hub, cfg.machine, cfg.password())

    def stop_midway() -> None:  # once a few batches have landed, the hub dies (no shutdown checkpoint)
        while hub_rows(hub, "select count(*) from fleetdeck.events where machine_id = 'laptop'")[0][0] < 6_000:
            time.sleep(0.01)
        server.stop("immediate")

    stopper = threading.Thread(target=stop_midway)
    stopper.start()
    with pytest.raises(FleetError) as cut:
        Push(index, cfg, conn, None, batch_rows=2_000).run()
    stopper.join()
    assert cut.value.code == "HUB_UNREACHABLE"
    server.start()
    partial = hub_rows(hub, "select count(*) from fleetdeck.events where machine_id = 'laptop'")[0][0]
    assert 6_000 <= partial < len(want)          # cut short midway, what committed stayed
    laptop.run("team", "push", "--once")
    index.close()
    got = hub_rows(hub, "select id from fleetdeck.events where machine_id = 'laptop'")
    assert len(got) == len(want) and {r[0] for r in got} == want


class Blackhole:
    """A TCP proxy to the hub that can stop answering: connections stay open, nothing comes back."""

    def __init__(self, port: int) -> None:
        import socket
        self.target, self.dead = port, threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        while True:
            client, _ = self.sock.accept()
            if self.dead.is_set():
                continue                      # accepted, never answered
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a, b) -> None:
        while data := a.recv(65536):
            while self.dead.is_set():
                time.sleep(0.05)              # hold everything: the peer waits forever
            b.sendall(data)


def _watch(machine: Machine) -> subprocess.Popen:
    return subprocess.Popen(fleetdeck_argv("watch"), env=machine.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _until(check, timeout: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.05)
    return time.monotonic() - start


def test_watch_pushes_a_change_to_the_hub_live(machines, hub):
    laptop = machines[0]
    watcher = _watch(laptop)
    try:
        _until(lambda: hub_rows(hub, "select count(*) from fleetdeck.repos where machine_id = 'laptop'")[0][0]
               == len(laptop.local("select id from repos")), 60)
        head = commit_file(laptop.fleet / "laptop-web", "live.txt", "live\n")
        took = _until(lambda: hub_rows(hub, "select record->>'head' from fleetdeck.repos where machine_id = "
                                            "'laptop' and name = 'laptop-web'") == [(head,)], 20)
    finally:
        watcher.terminate()
        watcher.wait(30)
    assert took < 20
    assert hub_rows(hub, "select count(*) from fleetdeck.events where machine_id = 'laptop' and "
                         "row->>'new_sha' = %s", (head,))[0][0] >= 1


def test_a_blackholed_hub_leaves_the_local_watcher_as_fast(machines, server, tmp_path):
    laptop = machines[0]
    proxy = Blackhole(server.port)
    settings = laptop.home / ".config/fleetdeck/settings.toml"
    settings.write_text(settings.read_text().replace(f":{server.port}", f":{proxy.port}")
                        .replace(f"port={server.port}", f"port={proxy.port}"))
    laptop.run("team", "push", "--once")            # through the proxy while it answers
    watcher = _watch(laptop)
    try:
        def seen(head: str) -> bool:
            return laptop.local("select head from repos where name = 'laptop-web'") == [(head,)]

        head = commit_file(laptop.fleet / "laptop-web", "a.txt", "a\n")
        _until(lambda: seen(head), 30)                   # the watcher is up and reading
        baseline = []
        for i in range(3):
            head = commit_file(laptop.fleet / "laptop-web", f"b{i}.txt", "b\n")
            baseline.append(_until(lambda: seen(head), 30))
        proxy.dead.set()                                 # the hub stops answering mid-session
        blackholed = []
        for i in range(3):
            head = commit_file(laptop.fleet / "laptop-web", f"c{i}.txt", "c\n")
            blackholed.append(_until(lambda: seen(head), 30))
    finally:
        watcher.terminate()
        watcher.wait(30)
    assert sorted(blackholed)[1] < max(2.0, 3 * sorted(baseline)[1]), (baseline, blackholed)


def test_audit_verify_team_catches_a_hub_that_altered_dropped_or_reordered(machines, hub):
    laptop = machines[0]
    for name in ("claude-code", "codex", "gemini", "aider"):
        laptop.run("agents", "add", name)              # four audit entries on the laptop
    laptop.run("team", "push", "--once")

    def verify() -> tuple[int, dict]:
        proc = laptop.run("audit", "verify", "--team", hub, "--machine", "laptop", "--json", check=False)
        return proc.returncode, json.loads(proc.stdout)

    code, report = verify()
    assert code == 0 and report["ok"] and report["compared_with_local"] and report["entries"] >= 4
    seqs = [r[0] for r in hub_rows(hub, "select seq from fleetdeck.audit where machine_id = 'laptop' order by seq")]
    middle = seqs[len(seqs) // 2]
    with psycopg.connect(hub, autocommit=True) as admin:   # a hub whose owner tampers (trigger disabled)
        admin.execute("alter table fleetdeck.audit disable trigger audit_append_only")
        original = admin.execute("select entry, line, chain from fleetdeck.audit where machine_id = 'laptop' and "
                                 "seq = %s", (middle,)).fetchone()

        admin.execute("update fleetdeck.audit set line = replace(line, 'codex', 'c0dex'), "
                      "entry = jsonb_set(entry, '{summary}', '\"forged\"') where machine_id = 'laptop' and seq = %s",
                      (middle,))
        code, report = verify()
        assert code == 3 and report["first_bad_seq"] == middle and report["reason"].startswith("altered")

        admin.execute("delete from fleetdeck.audit where machine_id = 'laptop' and seq = %s", (middle,))
        code, report = verify()
        assert code == 3 and report["reason"].startswith("missing")
        assert any(p.startswith(f"seq {middle}: dropped") for p in report["problems"])

        admin.execute("insert into fleetdeck.audit (machine_id, chain, seq, hash, entry, line) values ('laptop', %s, %s, "
                      "%s, %s, %s)", (original[2], middle, original[0]["hash"], psycopg.types.json.Jsonb(original[0]),
                                      original[1]))
        assert verify()[0] == 0                        # put back: intact again
        a, b = middle, middle + 1                      # two entries swapped
        admin.execute("update fleetdeck.audit set seq = -1 where machine_id = 'laptop' and seq = %s", (a,))
        admin.execute("update fleetdeck.audit set seq = %s where machine_id = 'laptop' and seq = %s", (a, b))
        admin.execute("update fleetdeck.audit set seq = %s where machine_id = 'laptop' and seq = -1", (b,))
        code, report = verify()
        assert code == 3 and report["first_bad_seq"] == a
        admin.execute("alter table fleetdeck.audit enable trigger audit_append_only")


def _propose(machine: Machine, monkeypatch, name: str) -> str:
    """A pending proposal on `machine`: an agent asks to create branch `name` in its web repo."""
    from fleet.ops import service
    for key in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "GIT_CONFIG_GLOBAL"):
        monkeypatch.setenv(key, machine.env[key])
    index = open_index(machine.db)
    try:
        return service.propose(index, "claude-code", "branch", str(machine.fleet / f"{machine.name}-web"),
                               {"name": name}, "a branch for the hub to approve")["proposal_id"]
    finally:
        index.close()


def _pin(machine: Machine, public: Path, accept: bool = True) -> None:
    settings = machine.home / ".config/fleetdeck/settings.toml"
    settings.write_text(settings.read_text().replace(
        "[team]\n", f"[team]\naccept_remote_approvals = {'true' if accept else 'false'}\n"
                    f"approver_keys = [{json.dumps(str(public))}]\n"))


def _decision(hub: str, decision: int) -> tuple:
    return hub_rows(hub, "select outcome, outcome_reason from fleetdeck.decisions where id = %s", (decision,))[0]


def test_a_decision_made_on_the_hub_runs_only_on_its_machine_signed_and_pinned(machines, hub, tmp_path, monkeypatch):
    from fleet.audit.keys import keygen
    laptop, desktop = machines
    _, private, public = keygen(tmp_path / "alice-keys")
    _, stranger, _ = keygen(tmp_path / "mallory-keys")
    pid = _propose(laptop, monkeypatch, "from-hub")
    laptop.run("team", "push", "--once")
    # before the machine accepts remote decisions, a well-signed one is refused, and nothing runs
    made = laptop.decided("laptop", pid, "approve", "--dsn", hub, "--key", str(private), "--as", "alice")
    out = laptop.json("team", "push", "--once")
    assert out["decisions"][0]["outcome"] == "refused"
    assert _decision(hub, made["decision"])[0] == "refused" and "accept_remote_approvals" in _decision(
        hub, made["decision"])[1]
    _pin(laptop, public)
    # a key the machine has not pinned
    other = laptop.decided("laptop", pid, "approve", "--dsn", hub, "--key", str(stranger), "--as", "alice")
    laptop.run("team", "push", "--once")
    assert _decision(hub, other["decision"])[0] == "refused" and "not pinned" in _decision(hub, other["decision"])[1]
    # a row altered after signing (the hub's owner turns a rejection into an approval)
    forged = laptop.decided("laptop", pid, "reject", "--reason", "no", "--dsn", hub,
                            "--key", str(private), "--as", "alice")
    with psycopg.connect(hub, autocommit=True) as admin:
        admin.execute("update fleetdeck.decisions set action = 'approve' where id = %s", (forged["decision"],))
    laptop.run("team", "push", "--once")
    assert _decision(hub, forged["decision"]) [0] == "refused" and "forged" in _decision(hub, forged["decision"])[1]
    assert git(laptop.fleet / "laptop-web", "branch", "--list", "from-hub") == ""      # nothing ran so far
    # a proper one: runs on the laptop through the local approve path, credited to the hub's approver
    good = laptop.decided("laptop", pid, "approve", "--dsn", hub, "--key", str(private), "--as", "alice")
    laptop.run("team", "push", "--once")
    assert _decision(hub, good["decision"]) == ("applied", None), _decision(hub, good["decision"])[1]
    assert git(laptop.fleet / "laptop-web", "branch", "--list", "from-hub").strip() == "from-hub"
    shown = laptop.json("proposals", "show", pid)
    assert shown["status"] == "completed" and shown["decided_by"] == "hub:alice"
    assert hub_rows(hub, "select status from fleetdeck.proposals where machine_id = 'laptop' and id = %s",
                    (pid,)) == [("completed",)]
    audit = laptop.run("audit", "export").stdout
    assert '"actor":"hub:alice"' in audit.replace(" ", "") and "team.decision_refused" in audit
    # replayed: the same signed decision stored again
    with psycopg.connect(hub, autocommit=True) as admin:
        replay = admin.execute("insert into fleetdeck.decisions (machine_id, proposal_id, action, reason, approver, "
                               "key_id, payload, signature) select machine_id, proposal_id, action, reason, approver, "
                               "key_id, payload, signature from fleetdeck.decisions where id = %s returning id",
                               (good["decision"],)).fetchone()[0]
    laptop.run("team", "push", "--once")
    assert _decision(hub, replay)[0] == "refused" and "replayed" in _decision(hub, replay)[1]
    # addressed to the laptop, never acted on by the desktop (which cannot even read it)
    desktop.run("team", "push", "--once")
    with psycopg.connect(desktop.enrolled["dsn"]) as conn:
        assert conn.execute("select count(*) from fleetdeck.decisions").fetchone()[0] == 0


def test_a_hub_decision_racing_a_local_rejection_is_refused(machines, hub, tmp_path, monkeypatch):
    from fleet.audit.keys import keygen
    laptop = machines[0]
    _, private, public = keygen(tmp_path / "alice-keys")
    _pin(laptop, public)
    pid = _propose(laptop, monkeypatch, "raced")
    laptop.run("team", "push", "--once")
    made = laptop.decided("laptop", pid, "approve", "--dsn", hub, "--key", str(private), "--as", "alice")
    # the person, locally, first (`decide` above set up the non-interactive approver `--yes` needs)
    laptop.run("proposals", "reject", pid, "--reason", "not now", "--yes")
    laptop.run("team", "push", "--once")
    outcome, why = _decision(hub, made["decision"])
    assert outcome == "refused" and "rejected here, not pending" in why
    assert git(laptop.fleet / "laptop-web", "branch", "--list", "raced") == ""


def test_a_decision_for_an_expired_proposal_is_refused_on_the_hub_and_on_its_machine(machines, hub, tmp_path,
                                                                                     monkeypatch):
    """A proposal past its expiry while its machine was offline still reads `pending` on the hub: `team decide`
    signs nothing for it; a decision signed in time for a proposal that expired on the machine before it came
    back is refused there and recorded."""
    from fleet.audit.keys import keygen
    laptop = machines[0]
    _, private, public = keygen(tmp_path / "alice-keys")
    _pin(laptop, public)
    late = _propose(laptop, monkeypatch, "asked-too-late")
    laptop.run("team", "push", "--once")
    with psycopg.connect(hub, autocommit=True) as admin:       # the laptop went offline; the hour passed
        admin.execute("update fleetdeck.proposals set expires_at = extract(epoch from now()) - 60 "
                      "where machine_id = 'laptop' and id = %s", (late,))
    refused = laptop.decide("laptop", late, "approve", "--dsn", hub, "--key", str(private), "--as", "alice",
                            check=False)
    assert refused.returncode == 1 and refused.stdout == "", refused.stdout
    assert "expired at" in refused.stderr and refused.stderr.rstrip().endswith("[NOT_PENDING]"), refused.stderr
    assert hub_rows(hub, "select count(*) from fleetdeck.decisions where proposal_id = %s", (late,)) == [(0,)]
    # signed while pending; the proposal expires on the laptop before the laptop settles the decision
    pid = _propose(laptop, monkeypatch, "expired-here")
    laptop.run("team", "push", "--once")
    made = laptop.decided("laptop", pid, "approve", "--dsn", hub, "--key", str(private), "--as", "alice")
    with sqlite3.connect(laptop.db) as local:
        local.execute("update proposals set expires_at = ? where id = ?", (time.time() - 60, pid))
    laptop.run("team", "push", "--once")
    outcome, why = _decision(hub, made["decision"])
    assert outcome == "refused" and "expired here, not pending" in why
    assert git(laptop.fleet / "laptop-web", "branch", "--list", "expired-here") == ""


def test_a_hub_decision_never_stands_in_for_a_required_passkey(machines, hub, tmp_path, monkeypatch):
    """A machine whose person registered a passkey (and `[passkeys] require = "all"`) decides nothing on a hub
    decision, however well signed and pinned: a hub holds no passkey assertion, as a terminal does not."""
    from fleet.audit.keys import keygen
    laptop = machines[0]
    _, private, public = keygen(tmp_path / "alice-keys")
    _pin(laptop, public)
    settings = laptop.home / ".config/fleetdeck/settings.toml"
    settings.write_text(settings.read_text() + '\n[passkeys]\nrequire = "all"\n')
    index = open_index(laptop.db)
    index.set_meta_texts({"passkey:planted": json.dumps({"id": "planted", "name": "laptop key", "public_key": "AA",
                                                          "created_at": "2026-12-01T00:00:00Z", "sign_count": 0})})
    index.close()
    pid = _propose(laptop, monkeypatch, "needs-a-passkey")
    laptop.run("team", "push", "--once")
    made = laptop.decided("laptop", pid, "approve", "--dsn", hub, "--key", str(private), "--as", "alice")
    laptop.run("team", "push", "--once")
    outcome, why = _decision(hub, made["decision"])
    assert outcome == "refused" and "passkey" in why
    assert git(laptop.fleet / "laptop-web", "branch", "--list", "needs-a-passkey") == ""
    assert laptop.json("proposals", "show", pid)["status"] == "pending"
