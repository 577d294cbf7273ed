"""The hub's digest in one pass over every machine (fleet/team/hubpass.py) answers what each machine's own digest
answers: three machines' generated rows (dirty, gone, bare and failing repos, names shared across and within
machines, unpushed and pushed branches (with and without an upstream, `ahead` known or not), rewrites, fetches, events on both sides of the 24 h window's first
second) pushed through the real code path to a real PostgreSQL; per machine, the one-pass answer equals the
machine's alone on the hub and its local index's, and the pass asks the hub a fixed number of statements
whatever the number of machines."""

from __future__ import annotations

import itertools
import math
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from fleet.index.store import open_index
from fleet.team import admin, config, pg
from fleet.team.hubread import Hub, HubConnections
from fleet.team import hubview
from fleet.team.hubview import _asked, hub_digest, hub_report
from fleet.timespec import parse_since
from fleet.team.push import push_once
from fleet.views.digest import digest, report
from tests.fleets.postgres import shared_server

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
pytestmark = pytest.mark.slow   # a real PostgreSQL and three pushed machines

MACHINES = ("alpha", "bravo", "charlie")
SINCE_S = int(time.time()) - 86400          # the 24 h window's first second, fixed for the whole module


def fill(index, k: int) -> None:
    """Machine k's rows, shaped like a scanned fleet's and different on each machine."""
    kinds = ("commit", "fetch", "reset", "checkout", "merge", "fetch")
    with index.write() as conn:
        for i in range(1, 41):
            name = "api" if i in (1, 2) else f"svc-{(i + k) % 25}"   # two `api` repos here, names shared across
            conn.execute(
                "insert into repos (id, path, root, name, branch, head, generation, scanned_at, gone, score, bare, "
                "staged, unstaged, untracked, conflicted, error) values (?, ?, '/fleet', ?, 'main', ?, ?, "
                "'2026-12-01T00:00:00Z', ?, ?, ?, ?, ?, ?, 0, ?)",
                (i, f"/fleet/{k}/{i}/{name}", name, f"{i:040x}", i, int(i % 9 == k), i % 7, int(i % 11 == 0),
                 i % 3 if i % 4 == k else 0, int(i % 5 == 0), i % 6 if i % 8 == 1 else 0,
                 "cannot read HEAD" if i % 13 == k + 1 else None))
            conn.executemany(
                "insert into branches (repo_id, name, head, upstream, ahead, current) values (?, ?, ?, ?, ?, ?)",
                [(i, "main", f"{i:040x}", "origin/main", (i + k) % 4, 1),
                 (i, f"topic-{i % 3}", f"{i + 1:040x}", None, None, 0),     # never pushed: two a repo, more than
                 (i, f"topic-{(i + 1) % 3}", f"{i + 4:040x}", None, None, 0),   # the 50 listed; same-named repos' interleave
                 (i, "done", f"{i + 2:040x}", "origin/done", 0, 0)]
                + ([(i, "wip", f"{i + 3:040x}", None, i % 3, 0)] if i % 10 == k + 2 else []))   # no upstream, `ahead` known
        at = [SINCE_S - 1, SINCE_S, SINCE_S + 1] * 3 + [SINCE_S - 3600 + 37 * e for e in range(2600)]
        conn.executemany(
            "insert into event_rows (id, repo_id, ref, kind, at, rewrote, old_sha, new_sha, identity, message) "
            "values (?, ?, ?, ?, ?, ?, ?, ?, 'A <a@x>', ?)",
            [(e + 1, (e * 7 + k) % 40 + 1, f"refs/heads/b{e % 5}" if kinds[e % 6] != "fetch" else
              f"refs/remotes/origin/r{e % 9}", kinds[(e + k) % 6], t, int(kinds[(e + k) % 6] == "reset" and e % 4 < 2),
              f"{e:040x}", f"{e + 1:040x}", f"{kinds[(e + k) % 6]}: change {e}")
             for e, t in enumerate(t for t in at if t <= time.time())])


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    dsn = shared_server().fresh_database("digest_pass")
    admin.init(dsn)
    work = tmp_path_factory.mktemp("machines")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FLEETDECK_AUDIT", "off")
        for k, name in enumerate(MACHINES):
            made = admin.enroll(dsn, name)
            env.setenv("FLEETDECK_SETTINGS", str(work / f"{name}.toml"))
            plain, password = pg.without_password(made["dsn"])
            config.save(plain, name, "paths", password)
            with open_index(work / f"{name}.db") as index:
                fill(index, k)
                push_once(index, config.load())
    return dsn, {name: work / f"{name}.db" for name in MACHINES}


@pytest.fixture
def reader(hub):
    h = Hub(hub[0])
    yield h
    h.close()


def _local(answer: dict) -> dict:
    answer.pop("generated_at", None)
    return answer


# ids that do not hold the clock: each xdist worker imports this module at its own second, and workers must
# collect the same test ids
@pytest.mark.parametrize("since", [SINCE_S * 1000, (SINCE_S + 1) * 1000, SINCE_S * 1000 - 1, 0],
                         ids=["window-start", "a-second-in", "a-ms-before", "all-time"])
@pytest.mark.parametrize("scoped", [False, True])
@pytest.mark.parametrize("ahead", [False, True])
def test_the_one_pass_digest_is_each_machines_own(reader, hub, since, scoped, ahead):
    """On each side of the window's first second (an event at SINCE_S - 1, SINCE_S and SINCE_S + 1 on every
    machine), scoped to some repos or not, the report's statements asked ahead side by side or not: one pass,
    each machine alone on the hub and its own index agree."""
    rows = reader.machines()
    scopes = {row["name"]: ([3, 4, 9, 2] if scoped else None) for row in rows}
    asks = _asked(parse_since(since), None, 50, True, scoped) if ahead else []
    assert bool(asks) == ahead
    shared = {m.name: m for m in reader.in_one_pass([(row, scopes[row["name"]]) for row in rows], asks)}
    repos = None
    for row in rows:
        alone = reader.machine(row)
        with open_index(hub[1][row["name"]]) as idx:
            if scoped:
                repos = [idx.repo(rid)["path"] for rid in scopes[row["name"]]]
            mine = _local(report(idx, since, repos=repos, max_events=50))
            mine["fleet"].pop("stale_stashes"), mine["fleet"].pop("stale_stash_count")
            for engine in (shared[row["name"]], alone):
                ours = _local(report(engine, since, repos=repos, max_events=50))
                ours["fleet"].pop("stale_stashes"), ours["fleet"].pop("stale_stash_count")
                assert ours == mine
                assert digest(engine, since, repos=repos, max_events=50) == digest(idx, since, repos=repos,
                                                                                     max_events=50)
        assert mine["digest"]["truncated"] and mine["fleet"]["unpushed_count"]
        if not scoped:   # the caps matter here, and every part of the report has rows
            assert mine["fleet"]["unpushed_count"] > 50 and mine["fleet"]["dirty_count"] and mine["fleet"]["rewrite_count"] and mine["bulk"]["groups"]
            assert mine["digest"]["errors"] and mine["digest"]["gone_repos"]


def test_the_window_starts_at_its_first_second(reader, hub):
    """An event at the window's first second is in it, one a second before is not (the SQLite index's rule)."""
    first = math.ceil(SINCE_S)
    counts = {}
    for since in (first - 1, first, first + 1):
        counts[since] = hub_digest(reader, since * 1000, max_events=1)["event_count"]
    assert counts[first - 1] - counts[first] == 3 * len(MACHINES)    # the three events at SINCE_S - 1 each
    assert counts[first] - counts[first + 1] == 3 * len(MACHINES)
    local = 0
    for path in hub[1].values():
        with open_index(path) as idx:
            local += digest(idx, first * 1000, max_events=1)["event_count"]
    assert counts[first] == local


def _statements(monkeypatch) -> list[str]:
    """The statements the hub is asked from now on (from any thread), in a list."""
    asked: list[str] = []
    query = HubConnections.query

    def counted(self, sql, args=()):
        asked.append(sql)
        return query(self, sql, args)

    monkeypatch.setattr(HubConnections, "query", counted)
    return asked


def test_the_pass_asks_the_hub_a_fixed_number_of_statements(reader, monkeypatch):
    """Three machines or one: the same statements, each for all of them (before, about a dozen per machine)."""
    asked = _statements(monkeypatch)
    hub_report(reader, SINCE_S * 1000, machine="alpha")
    one = len(asked)
    asked.clear()
    merged = hub_report(reader, SINCE_S * 1000)
    assert len(asked) == one <= 14, asked
    assert {e["machine"] for e in merged["digest"]["events"]} == set(MACHINES)
    ahead = sorted(asked)

    def but_names(sqls: list[str]) -> list[str]:   # asked ahead, the names are the window's repos' in one statement
        return sorted(sql for sql in sqls if not sql.startswith(("SELECT k.m, r.repo_id, r.name ",
                                                                 "SELECT r.machine_id, r.repo_id, r.name ")))

    for call in (lambda: _local(hub_report(reader, SINCE_S * 1000)),
                 lambda: hub_digest(reader, SINCE_S * 1000, kinds=["commit"], repos=["api"])):
        asked.clear()
        with monkeypatch.context() as nothing_ahead:   # what the views ask themselves: what was asked ahead
            nothing_ahead.setattr(hubview, "_asked", lambda *args: [])
            alone = call()
        own = list(asked)
        asked.clear()
        assert call() == alone                              # the same answer
        assert but_names(asked) == but_names(own) and len(asked) <= len(own), (asked, own)   # none in vain
    assert sorted(own) != ahead


def test_reports_a_second_apart_read_the_window_once(reader, monkeypatch):
    """Each machine's report ends its chart at its own "now": machines whose reports fall in different seconds
    share the pass's reading of the window all the same (keyed by the end, the pass read every machine's rows
    again for each second), and each one's chart still stops at its own end."""
    import fleet.views.digest as view

    clock = itertools.count(time.time(), 1.0)        # every report one second after the one before
    monkeypatch.setattr(view, "time", SimpleNamespace(time=lambda: next(clock)))
    asked = _statements(monkeypatch)
    merged = hub_report(reader, SINCE_S * 1000)
    times = [sql for sql in asked if sql.startswith("SELECT e.machine_id, e.repo_id, e.at ")]
    assert len(times) == 1, times
    assert merged["activity"]["rows"] and {e["machine"] for e in merged["digest"]["events"]} == set(MACHINES)


@pytest.mark.parametrize("scoped", [False, True])
def test_the_window_read_once_is_cut_at_each_ends_own_second(reader, hub, scoped):
    """The pass reads the window's event times once with no end; what each machine's source answers for an end
    is what its own index answers for it (ends inside the window, at an event's second and either side)."""
    rows = reader.machines()
    scope = [3, 4, 9, 2] if scoped else None
    shared = {m.name: m for m in reader.in_one_pass([(row, scope) for row in rows])}
    for name, m in shared.items():
        with open_index(hub[1][name]) as idx:
            sizes = []
            for end in (SINCE_S - 1, SINCE_S, SINCE_S + 0.5, SINCE_S + 3600 - 37, SINCE_S + 7200, time.time()):
                ours = m.digest.event_times(SINCE_S - 1, scope, None, end)
                assert sorted(ours) == sorted(idx.digest.event_times(SINCE_S - 1, scope, None, end)), end
                sizes.append(len(ours))
            assert sizes == sorted(sizes) and sizes[0] < sizes[-2] < sizes[-1]    # the ends cut the window


def test_asks_ahead_on_threads_shut_down_are_asked_by_the_caller(reader):
    """A hub closed while a request still holds its threads: what it asks ahead is asked on the caller's own
    session instead (a question left unasked would leave its view waiting forever), with the same answer."""
    rows = reader.machines()
    asks = _asked(float(SINCE_S), None, 50, True, False)
    closed = ThreadPoolExecutor(max_workers=1)
    closed.shutdown()
    shared = reader.in_one_pass([(row, None) for row in rows])
    shared[0].digest.shared.ask_ahead(closed, asks)
    alone = reader.in_one_pass([(row, None) for row in rows])
    for ours, theirs in zip(shared, alone):
        assert _local(report(ours, SINCE_S * 1000, max_events=50)) == _local(report(theirs, SINCE_S * 1000,
                                                                                     max_events=50))
