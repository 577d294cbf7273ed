"""`[team] share = "names"` on the whole hub path: a machine with a fleet in every state (a linked worktree outside
its roots and home, a dropped commit, a pending proposal, audit entries) pushes through the CLI; no text of any
column of any table of the hub's schema holds an absolute path of the machine (every table and column is
listed from the catalog, so a table added later is searched too), and the hub's pages still show its repos,
by name."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from fleet.index.store import open_index
from fleet.team.hubread import Hub
from fleet.team.listen import Listener
from tests.fleets.gitbuild import commit_file, git
from tests.test_team import Machine, _propose, build_fleet, hub, hub_rows, server  # noqa: F401  (fixtures)
from web.hub import create_hub_app

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
pytestmark = pytest.mark.slow   # a real PostgreSQL, a fleet built with git and the CLI
TOKEN = "names-token"


def every_text(dsn: str) -> list[tuple[str, str, str]]:
    """(table, column, value) of every non-null text, json or jsonb value in the hub's schema."""
    columns = hub_rows(dsn, "select table_name, column_name from information_schema.columns where table_schema = "
                            "'fleetdeck' and data_type in ('text', 'jsonb', 'json', 'character varying', 'ARRAY') "
                            "order by 1, 2")
    found = []
    for table, column in columns:
        for (value,) in hub_rows(dsn, f'select "{column}"::text from fleetdeck."{table}" where "{column}" is not null'):
            found.append((table, column, value))
    return found


@pytest.fixture
def private(tmp_path, hub, monkeypatch):  # noqa: F811
    admin = Machine(tmp_path, "admin")
    admin.run("team", "init", hub)
    m = Machine(tmp_path, "private")
    build_fleet(m)
    outside = tmp_path / "elsewhere" / "private-lib-spike"
    git(m.fleet / "private-lib", "worktree", "add", "-q", str(outside), "-b", "spike")
    web = m.fleet / "private-web"
    commit_file(web, "dropped.txt", "soon unreachable\n")
    git(web, "reset", "-q", "--hard", "HEAD~1")                       # a commit only the reflog still reaches
    m.run("agents", "add", "codex")                                    # an audit entry
    m.run("scan")
    m.pid = _propose(m, monkeypatch, "from-names")                     # a pending proposal, its preview
    made = admin.json("team", "enroll", m.name, "--dsn", hub)
    m.run("team", "join", made["dsn"], "--machine", m.name, "--share", "names")
    m.run("team", "push", "--once")
    return m


def test_no_absolute_path_of_the_machine_reaches_any_hub_table(private, hub, tmp_path):  # noqa: F811
    found = every_text(hub)
    tables = {t for t, _, _ in found}
    assert {"repos", "branches", "worktrees", "events", "lost", "proposals", "audit", "machines"} <= tables
    leaks = [(t, c, v[:200]) for t, c, v in found if str(tmp_path) in v or str(private.home) in v]
    assert leaks == []
    shown = json.dumps(found)
    assert "private-web" in shown and "private-lib-spike" in shown and private.pid in shown


def test_the_hub_pages_show_a_names_only_machines_repos_by_name(private, hub, tmp_path):  # noqa: F811
    settings = private.home / ".config/fleetdeck/settings.toml"
    settings.write_text(settings.read_text() + "\n[approval]\nnoninteractive = true\n")
    private.run("proposals", "reject", private.pid, "--reason", "not now", "--yes")   # decided: mirrored, not pending
    private.run("team", "push", "--once")
    with open_index(private.db) as idx:
        names = {r["name"]: r["id"] for r in idx.summaries()}
    app = create_hub_app(Hub(hub), Listener(hub), TOKEN, redeem=lambda _code: False)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        radar = client.get("/api/radar", headers=auth).json()
        assert {e["name"] for e in radar["entries"]} == set(names)
        assert {e["path"] for e in radar["entries"]} == {f"…/{n}" for n in names}
        pages = {"/": None, "/digest?since=30d": None, "/agents": None, "/proposals": None,
                 "/audit?machine=private": None}
        for name, repo_id in names.items():
            pages[f"/machines/private/repos/{repo_id}"] = name
        for path, name in pages.items():
            page = client.get(path, headers={**auth, "Accept": "text/html"})
            assert page.status_code == 200, (path, page.text[:300])
            assert str(tmp_path) not in page.text, path
            if name:
                assert f">{name}<" in page.text, path                 # the repo page, headed by its name
        queue = client.get("/", headers={**auth, "Accept": "text/html"}).text
        assert all(name in queue for name in names)
        assert "private-web" in client.get("/proposals", headers={**auth, "Accept": "text/html"}).text
