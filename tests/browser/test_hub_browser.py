"""The hub's dashboard (`fleetdeck serve --team DSN`) in Chromium: a change on machine A, pushed to the hub,
appears on the hub's queue page live (LISTEN/NOTIFY → the event stream → the fragment patched in place, no
reload), and every hub page is axe-core clean in light and dark. Two machines, each with its own home, index
and fleet, push to a PostgreSQL the tests start."""

from __future__ import annotations

import pytest
from starlette.routing import Route

from tests.browser.axe import assert_clean
from tests.browser.conftest import sign_in_tab
from tests.browser.test_accessibility import SCHEMES, settle, visit_and_settle
from tests.fleets.gitbuild import init_repo
from tests.fleets.postgres import PgServer
from tests.fleets.serving import Server
from tests.test_team import enrolled_pair
from tests.test_team_hubview import dashboard_dsn
from web.guards import API_PREFIXES
from web.hub import routes

pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
pytestmark = [pytest.mark.browser, pytest.mark.slow]

GITBUILD_TIME = "/digest?since=custom&custom=2025-01-01T00:00:00%2B00:00"   # tests/fleets/gitbuild's clock


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    pg = PgServer()
    hub = pg.create_database("hub_browser")
    base = tmp_path_factory.mktemp("hub-browser")
    pair = enrolled_pair(base, hub, push=True)
    server = Server(base / "dash.db", [], extra=["--team", dashboard_dsn(hub)])
    yield server, pair
    server.stop()
    pg.close()


def _repo_path(team) -> str:
    import httpx

    server, _ = team
    entries = httpx.get(server.base + "/api/radar?machine=laptop", headers=server.auth, timeout=30).json()["entries"]
    return f"/machines/laptop/repos/{next(e['id'] for e in entries if e['name'] == 'laptop-web')}"


VISITS = {
    "queue": [lambda t: "/", lambda t: "/?machine=desktop", lambda t: "/?q=no-such-repository-anywhere"],
    "repo": [_repo_path],
    "digest": [lambda t: GITBUILD_TIME],
    "agents": [lambda t: "/agents"],
    "proposals": [lambda t: "/proposals"],
    "audit": [lambda t: "/audit?machine=laptop"],
}


def test_every_hub_page_has_axe_coverage() -> None:
    pages = {r.name for r in routes() if isinstance(r, Route) and "GET" in (r.methods or ())
             and not r.path.startswith((*API_PREFIXES, "/fragments/", "/static"))}
    assert pages == set(VISITS)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_hub_pages_have_no_axe_violations(browser, team, scheme) -> None:
    server, _ = team
    context = browser.new_context(color_scheme=scheme)
    try:
        tab = context.new_page()
        sign_in_tab(tab, server)
        for name, visits in VISITS.items():
            for visit in visits:
                path = visit(team)
                visit_and_settle(tab, server, path)
                assert_clean(tab, f"hub {name} {path} in the {scheme} scheme")
        visit_and_settle(tab, server, "/machines/laptop/repos/987654321")   # the error page
        assert_clean(tab, f"hub error page in the {scheme} scheme")
    finally:
        context.close()


def test_a_change_on_machine_a_appears_on_the_hub_page_live(browser, team) -> None:
    server, (laptop, _desktop) = team
    context = browser.new_context()
    try:
        tab = context.new_page()
        sign_in_tab(tab, server)
        settle(tab)
        tab.evaluate("window.__notReloaded = true")
        assert tab.locator("text=laptop-live").count() == 0
        init_repo(laptop.fleet / "laptop-live", commits=1)
        laptop.run("scan", str(laptop.fleet))
        laptop.run("team", "push", "--once")
        tab.wait_for_selector('tr[data-machine="laptop"] a.repo-link:text-is("laptop-live")', timeout=15_000)
        assert tab.evaluate("window.__notReloaded === true")          # patched in place by the stream
        assert_clean(tab, "hub queue after a live update")
    finally:
        context.close()
