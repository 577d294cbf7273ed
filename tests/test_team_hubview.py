"""The hub view against a real PostgreSQL the tests start: machines simulated by separate homes, indexes and
fleets push through the CLI; the hub's answers are the local index's (the same view code over the hub's rows,
fleet/team/hubread.py), across machines with `machine` on every record; a machine that stopped pushing is
shown as such; `serve --team` serves the pages and JSON behind the same guards, read-only; `digest --team`."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from fleet.index.reader import DigestSource, FleetRead, PendingSource, PresenceSource
from fleet.index.store import open_index
from fleet.team.hubread import Hub
from fleet.views.digest import digest, report
from fleet.views.queue import QueueFilter, attention_queue
from fleet.presence import presence
from tests.fleets.gitbuild import commit_file, git
from tests.test_team import Machine, build_fleet, server  # noqa: F401  (server: the module's PostgreSQL)

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")


def dashboard_dsn(admin_dsn: str) -> str:
    """A dashboard login (roles are the cluster's: one per hub database), a member of fleetdeck_hub."""
    name = "dash_" + admin_dsn.rsplit("/", 1)[1][-40:]
    password = "pw-" + name
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        conn.execute(f"GRANT fleetdeck_hub TO {name}")
    return re.sub(r"//[^@]+@", f"//{name}:{password}@", admin_dsn)


@pytest.fixture(scope="module")
def hub(server):
    return server.create_database("hub_view")


@pytest.fixture(scope="module")
def pushed(server, hub, tmp_path_factory):
    """Two machines, each with its own home, index and fleet, enrolled, joined and pushed once (the module's
    tests read it; those that change a machine say what they change)."""
    base = tmp_path_factory.mktemp("team")
    pair = [Machine(base, "laptop"), Machine(base, "desktop")]
    admin = Machine(base, "admin")
    admin.run("team", "init", hub)
    for m in pair:
        build_fleet(m)
        made = admin.json("team", "enroll", m.name, "--dsn", hub)
        m.run("team", "join", made["dsn"], "--machine", m.name)
        m.run("team", "push", "--once")
    return pair


@pytest.fixture(scope="module")
def dash(hub, pushed):
    return dashboard_dsn(hub)


@pytest.fixture
def reader(dash):
    h = Hub(dash)
    yield h
    h.close()


def _without_machine(value):
    if isinstance(value, dict):
        return {k: _without_machine(v) for k, v in value.items() if k != "machine"}
    if isinstance(value, list):
        return [_without_machine(v) for v in value]
    return value


def test_both_engines_implement_the_read_interface(reader, pushed):
    m = reader.machine(reader.machines()[0])
    with open_index(pushed[0].db) as idx:
        for engine in (idx, m):
            assert isinstance(engine, FleetRead)
            assert isinstance(engine.digest, DigestSource)
            assert isinstance(engine.presence, PresenceSource)
            assert isinstance(engine.proposals, PendingSource)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_same_rows_give_the_same_queue_digest_and_search(reader, pushed, engine):
    """Per machine: the hub's answers from its pushed rows equal the local index's, whichever engine."""
    for m in pushed:
        with open_index(m.db) as idx:
            row = next(r for r in reader.machines() if r["name"] == m.name)
            source = idx if engine == "sqlite" else reader.machine(row)
            for params in ({}, {"attention": "1"}, {"q": "main"}, {"reason": "ahead"}):
                f = QueueFilter.from_params(params)
                assert attention_queue(source, f, presence(source)) == attention_queue(idx, f, presence(idx))
            assert len(attention_queue(source, QueueFilter(), [])["entries"]) == len(idx.summaries()) >= 4
            assert digest(source, 0)["event_count"] >= 5   # tests/fleets/gitbuild dates its commits in 2025
            for since in (0, 1760001000, "1h"):
                assert digest(source, since) == digest(idx, since)
                ours, theirs = report(source, since), report(idx, since)
                for part in (ours, theirs):
                    part.pop("generated_at")
                    part["fleet"].pop("stale_stashes"), part["fleet"].pop("stale_stash_count")
                assert ours == theirs


def test_the_hub_queue_holds_both_machines_with_machine_on_every_entry(reader, pushed):
    from fleet.team import hubview

    both = hubview.queue(reader, {})
    local = {}
    for m in pushed:
        with open_index(m.db) as idx:
            local[m.name] = attention_queue(idx, QueueFilter(), presence(idx))
    assert {e["machine"] for e in both["entries"]} == {"laptop", "desktop"}
    assert both["counts"]["repos"] == sum(q["counts"]["repos"] for q in local.values())
    for name, q in local.items():
        theirs = [e for e in both["entries"] if e["machine"] == name]
        assert _without_machine(theirs) == q["entries"]        # each machine's own ranking, merged
        only = hubview.queue(reader, {"machine": name})
        assert _without_machine(only["entries"]) == q["entries"] and only["filter"]["machine"] == name
    assert [m["name"] for m in both["machines"]] == ["desktop", "laptop"]
    assert all(m["state"] == "live" for m in both["machines"])


def test_the_hub_digest_merges_the_machines(reader, pushed):
    from fleet.team import hubview

    merged = hubview.hub_digest(reader, 0, max_events=1000)
    per = {}
    for m in pushed:
        with open_index(m.db) as idx:
            per[m.name] = digest(idx, 0, max_events=1000)
    assert merged["event_count"] == sum(d["event_count"] for d in per.values())
    for name, d in per.items():
        assert _without_machine([e for e in merged["events"] if e["machine"] == name]) == d["events"]
    assert hubview.hub_digest(reader, 0, machine="laptop")["event_count"] == per["laptop"]["event_count"]
    text = hubview.hub_report(reader, 0)
    assert {e["repo"].split(": ")[0] for e in text["digest"]["events"]} == {"laptop", "desktop"}
