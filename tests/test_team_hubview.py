"""The hub view against a real PostgreSQL the tests start: machines simulated by separate homes, indexes and
fleets push through the CLI; the hub's answers are the local index's (the same view code over the hub's rows,
fleet/team/hubread.py), across machines with `machine` on every record; a machine that stopped pushing is
shown as such; `serve --team` serves the pages and JSON behind the same guards, read-only; `digest --team`."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from fleet.errors import FleetError
from fleet.index.reader import DigestSource, FleetRead, PendingSource, PresenceSource
from fleet.index.store import open_index
from fleet.team.hubread import Hub
from fleet.timespec import parse_since
from fleet.views.digest import digest, report
from fleet.views.queue import QueueFilter, attention_queue
from fleet.presence import presence
from tests.fleets.cli import run_cli
from tests.fleets.serving import Server, sign_in
from tests.test_team import enrolled_pair, initialised_hub, server  # noqa: F401  (server: this process's PostgreSQL)

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
# a real PostgreSQL, two machines driven through the CLI and a `serve --team` (28 s of the fast lane, loaded)
pytestmark = pytest.mark.slow


def dashboard_dsn(admin_dsn: str) -> str:
    """A dashboard login as the hub's admin makes one, `team viewer` (roles are the cluster's: one per hub
    database); its one-time DSN."""
    name = "dash-" + admin_dsn.rsplit("/", 1)[1][-30:].replace("_", "-")
    return json.loads(run_cli("team", "viewer", name, "--dsn", admin_dsn, "--json", check=True).stdout)["dsn"]


@pytest.fixture(scope="module")
def hub(server):
    return initialised_hub(server, "hub_view")


@pytest.fixture(scope="module")
def pushed(server, hub, tmp_path_factory):
    """Two machines, each with its own home, index and fleet, enrolled, joined and pushed once (the module's
    tests read it; those that change a machine say what they change)."""
    return enrolled_pair(tmp_path_factory.mktemp("team"), hub, push=True)


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
            # the last hour read once, in unix ms (each read of "1h" took its own now: a second apart now and then)
            for since in (0, 1760001000, parse_since("1h") * 1000):
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


def test_digest_team_for_cron_in_every_format(pushed, dash, tmp_path):
    laptop = pushed[0]
    body = json.loads(laptop.run("digest", "--team", dash, "--since", "0", "--format", "json",
                                 "--max-events", "1000").stdout)
    with open_index(laptop.db) as idx:
        mine = digest(idx, 0, max_events=1000)
    assert {e["machine"] for e in body["events"]} == {"laptop", "desktop"}
    assert _without_machine([e for e in body["events"] if e["machine"] == "laptop"]) == mine["events"]
    md = laptop.run("digest", "--team", dash, "--since", "0").stdout
    assert "laptop: laptop-web" in md and "desktop: desktop-web" in md
    html = laptop.run("digest", "--team", dash, "--since", "0", "--format", "html", "--machine", "desktop").stdout
    assert "desktop: desktop-web" in html and "laptop-web" not in html
    password = psycopg.conninfo.conninfo_to_dict(laptop.enrolled["dsn"])["password"]
    refused = laptop.run("digest", "--team", laptop.enrolled["dsn"], "--since", "0", check=False)
    assert refused.returncode == 1 and "fleetdeck_hub" in refused.stderr and password not in refused.stderr


@pytest.fixture(scope="module")
def hub_server(dash, tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("dash") / "fleet.db", [], extra=["--team", dash])
    yield server
    server.stop()


def test_serve_team_serves_the_queue_api_and_pages_across_machines(hub_server, dash, pushed):
    password = psycopg.conninfo.conninfo_to_dict(dash)["password"]
    assert all(password not in line for line in hub_server.printed)
    with httpx.Client(base_url=hub_server.base, timeout=30) as client:
        assert client.get("/api/radar").status_code == 401                     # the same guards
        assert client.get("/api/radar", headers={**hub_server.auth, "Host": "evil.example"}).status_code == 421
        radar = client.get("/api/radar", headers=hub_server.auth).json()
        assert {e["machine"] for e in radar["entries"]} == {"laptop", "desktop"}
        with open_index(pushed[0].db) as idx:
            local = attention_queue(idx, QueueFilter(), presence(idx))
        only = client.get("/api/radar?machine=laptop", headers=hub_server.auth).json()
        assert _without_machine(only["entries"]) == local["entries"]
        assert [m["state"] for m in radar["machines"]] == ["live", "live"]
        found = client.get("/api/search?q=main&kinds=branch", headers=hub_server.auth).json()["matches"]
        assert {(x["machine"], x["name"]) for x in found} >= {("laptop", "main"), ("desktop", "main")}
        assert client.get("/api/search?q=", headers=hub_server.auth).status_code == 400
        events = client.get("/api/digest?since=0&max_events=1000", headers=hub_server.auth).json()["events"]
        assert {e["machine"] for e in events} == {"laptop", "desktop"}
        sign_in(client, hub_server.db)
        page = client.get("/", headers={"Accept": "text/html"}).text
        assert '<th scope="col">Machine</th>' in page and "last push" in page and password not in page
        entry = next(e for e in only["entries"] if e["name"] == "laptop-web")
        repo = client.get(f"/machines/laptop/repos/{entry['id']}")
        assert repo.status_code == 200 and "laptop-web" in repo.text and "read from git on laptop" in repo.text
        assert client.get(f"/machines/nobody/repos/{entry['id']}").status_code == 404
        assert client.get("/machines/laptop/repos/999999").status_code == 404
        for path in ("/digest?since=7d", "/agents", "/proposals", "/audit?machine=desktop", "/api/machines"):
            r = client.get(path)
            assert r.status_code == 200 and password not in r.text, path
        assert "intact chain" in client.get("/audit?machine=laptop").text


def test_the_hub_dashboard_cannot_write_whatever_login_it_is_given(hub):
    """Its sessions are read-only: even an admin DSN given to `serve --team` writes nothing through it."""
    h = Hub(hub)
    try:
        with pytest.raises(FleetError) as refused:
            h.conns.query("UPDATE fleetdeck.machines SET last_push_at = NULL RETURNING name")
        assert "read-only" in refused.value.message
    finally:
        h.close()


def test_a_machine_that_stopped_pushing_is_shown_offline_with_its_age(hub_server, hub, pushed):
    """desktop's last push put back three days (as if it had been off since): the hub says so everywhere."""
    with psycopg.connect(hub, autocommit=True) as conn:
        conn.execute("UPDATE fleetdeck.machines SET last_push_at = now() - interval '3 days 1 minute' "
                     "WHERE name = 'desktop'")
    try:
        with httpx.Client(base_url=hub_server.base, timeout=30) as client:
            machines = {m["name"]: m for m in client.get("/api/machines", headers=hub_server.auth).json()}
            assert machines["desktop"]["state"] == "offline" and machines["desktop"]["last_push"] == "3 days ago"
            assert machines["laptop"]["state"] == "live"
            sign_in(client, hub_server.db)
            page = client.get("/", headers={"Accept": "text/html"}).text
            assert re.search(r"<strong>desktop</strong>: last push <time[^>]*>3 days ago</time> — <strong>offline"
                             r"</strong>: its rows are as of that push, not live", page)
            assert "(offline)" in page                      # beside each of its rows in the queue
    finally:
        pushed[1].run("team", "push", "--once")


@pytest.mark.parametrize("query", ["main", "feature", "hotfix", "clone", "created", "mo", "no-such-thing"])
def test_the_hub_search_answers_as_each_machines_own(reader, pushed, query):
    """Branch names and reflog lines: the hub's search of one machine's rows equals the machine's own."""
    from fleet.index.search import search
    from fleet.team import hubview

    seen = 0
    for m in pushed:
        with open_index(m.db) as idx:
            local = search(idx, query, kinds=["branch", "reflog"], limit=500)
        ours = hubview.search(reader, query, kinds=["branch", "reflog"], limit=500, machine=m.name)
        assert {x["machine"] for x in ours["matches"]} <= {m.name}
        assert _without_machine(ours["matches"]) == local["matches"]
        assert ours["match_count"] == local["match_count"]
        seen += local["match_count"]
    both = hubview.search(reader, query, kinds=["branch", "reflog"], limit=500)
    assert both["match_count"] == seen
    assert (seen == 0) == (query == "no-such-thing")     # every other query finds something here
