"""The hub's dashboard (`fleetdeck serve --team DSN --key PEM --as alice`) in Chromium: a change on machine A,
pushed to the hub, appears on the hub's queue page live (LISTEN/NOTIFY → the event stream → the fragment
patched in place, no reload); a person approves a laptop proposal on its hub page and sees the laptop apply it,
live; a page on another local server, holding the session cookie, cannot make the hub decide; every hub page is
axe-core clean in light and dark. Two machines, each with its own home, index and fleet, push to a PostgreSQL
the tests start."""

from __future__ import annotations

import re

import httpx
import pytest
from starlette.routing import Route

from tests.browser.axe import assert_clean, assert_none, preload, violations
from tests.browser.conftest import sign_in_tab
from tests.browser.test_accessibility import SCHEMES, settle, visit_and_settle
from tests.fleets.gitbuild import git, init_repo
from tests.fleets.postgres import shared_server
from tests.fleets.localsite import LocalSite, QuietHandler
from tests.fleets.serving import Server
from tests.test_team import _pin, enrolled_pair, hub_rows
from tests.test_team_hubdecide import propose
from tests.test_team_hubview import dashboard_dsn
from web.guards import API_PREFIXES
from web.hub import routes

pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
pytestmark = [pytest.mark.browser, pytest.mark.slow]

GITBUILD_TIME = "/digest?since=custom&custom=2025-01-01T00:00:00%2B00:00"   # tests/fleets/gitbuild's clock


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """(the hub dashboard signing as alice, the machines, the laptop's proposals by purpose: `pending`,
    `high` and `click` wait for a person, `decided` was approved through the hub and applied)."""
    from fleet.audit.keys import keygen

    hub = shared_server().fresh_database("hub_browser")  # the process's cluster: no initdb of its own
    base = tmp_path_factory.mktemp("hub-browser")
    pair = enrolled_pair(base, hub, push=True)
    laptop = pair[0]
    _, private, public = keygen(base / "alice-keys")
    _pin(laptop, public)
    pids = {"pending": propose(laptop, "branch", {"name": "axe-pending"}),
            "high": propose(laptop, "reset", {"mode": "hard", "target": "HEAD"}),
            "click": propose(laptop, "branch", {"name": "clicked-on-the-hub"}),
            "decided": propose(laptop, "branch", {"name": "axe-decided"})}
    laptop.decide("laptop", pids["decided"], "approve", "--dsn", hub, "--key", str(private), "--as", "alice")
    laptop.run("team", "push", "--once")
    server = Server(base / "dash.db", [], extra=["--team", dashboard_dsn(hub), "--key", str(private),
                                                 "--as", "alice"])
    yield server, pair, pids, hub
    server.stop()


def _repo_path(team) -> str:
    import httpx

    server = team[0]
    entries = httpx.get(server.base + "/api/radar?machine=laptop", headers=server.auth, timeout=30).json()["entries"]
    return f"/machines/laptop/repos/{next(e['id'] for e in entries if e['name'] == 'laptop-web')}"


VISITS = {
    "queue": [lambda t: "/", lambda t: "/?machine=desktop", lambda t: "/?q=no-such-repository-anywhere"],
    "repo": [_repo_path],
    "digest": [lambda t: GITBUILD_TIME],
    "agents": [lambda t: "/agents"],
    "proposals": [lambda t: "/proposals"],
    "proposal": [lambda t: f"/machines/laptop/proposals/{t[2]['pending']}",
                 lambda t: f"/machines/laptop/proposals/{t[2]['high']}",
                 lambda t: f"/machines/laptop/proposals/{t[2]['decided']}"],
    "audit": [lambda t: "/audit?machine=laptop"],
}


def test_every_hub_page_has_axe_coverage() -> None:
    pages = {r.name for r in routes() if isinstance(r, Route) and "GET" in (r.methods or ())
             and not r.path.startswith((*API_PREFIXES, "/fragments/", "/static"))}
    assert pages == set(VISITS)


@pytest.fixture(scope="module")
def hub_findings(browser, team) -> dict[str, dict[str, list[dict]]]:
    """axe's findings on every hub page and its error page in each scheme ({scheme: {page: findings}}), from one
    visit per page in one signed-in tab: checked, its emulated colour scheme switched, checked again, as
    tests/browser/test_accessibility.py's `in_both_schemes` checks the local pages (the stylesheet alone reads
    the scheme: `test_no_script_reads_the_colour_scheme`). Was: a tab per scheme visiting every page."""
    server = team[0]
    pages = [(f"hub {name} {path}", path) for name, visits in VISITS.items() for path in (v(team) for v in visits)]
    pages.append(("hub error page", "/machines/laptop/repos/987654321"))
    found: dict[str, dict[str, list[dict]]] = {scheme: {} for scheme in SCHEMES}
    context = browser.new_context(color_scheme=SCHEMES[0])
    preload(context)
    try:
        tab = context.new_page()
        sign_in_tab(tab, server)
        for what, path in pages:
            visit_and_settle(tab, server, path)
            for scheme in SCHEMES:
                tab.emulate_media(color_scheme=scheme)
                assert tab.evaluate(f"matchMedia('(prefers-color-scheme: {scheme})').matches")
                found[scheme][what] = violations(tab)
    finally:
        context.close()
    return found


@pytest.mark.parametrize("scheme", SCHEMES)
def test_hub_pages_have_no_axe_violations(hub_findings, scheme) -> None:
    assert len(hub_findings[scheme]) == sum(map(len, VISITS.values())) + 1
    for what, findings in hub_findings[scheme].items():
        assert_none(findings, f"{what} in the {scheme} scheme")


def test_a_change_on_machine_a_appears_on_the_hub_page_live(browser, team) -> None:
    server, (laptop, _desktop) = team[:2]
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


def test_a_person_approves_on_the_hub_page_and_sees_the_machine_apply_it(browser, team) -> None:
    server, (laptop, _desktop), pids, hub = team
    pid = pids["click"]
    context = browser.new_context()
    try:
        tab = context.new_page()
        sign_in_tab(tab, server, f"/machines/laptop/proposals/{pid}")
        settle(tab)
        assert "clicked-on-the-hub" in tab.locator("h1").inner_text()          # the mirrored preview's summary
        tab.click("#approve-button")
        tab.wait_for_url(lambda url: "decided=approve" in url)
        settle(tab)
        assert tab.locator("#hub-decisions .decision-waiting").count() == 1
        assert_clean(tab, "hub proposal page after approving, waiting for the machine")
        tab.evaluate("window.__notReloaded = true")
        laptop.run("team", "push", "--once")                         # the laptop settles it and pushes the result
        tab.wait_for_selector("#hub-decisions .decision-applied", timeout=15_000)   # live, no reload
        assert tab.evaluate("window.__notReloaded === true")
        assert git(laptop.fleet / "laptop-web", "branch", "--list", "clicked-on-the-hub").strip() == \
            "clicked-on-the-hub"
        assert hub_rows(hub, "select approver, outcome from fleetdeck.decisions where proposal_id = %s",
                        (pid,)) == [("alice", "applied")]
        assert_clean(tab, "hub proposal page after the machine applied it")
    finally:
        context.close()


class AttackerSite(LocalSite):
    """Another local web server: its page (on another port of 127.0.0.1, so the browser sends it the hub's
    cookie too) reads the hub's proposal page with that cookie (the CSRF token and the page's digest), then
    makes the person's browser post an approval to the hub: a form submitted by script, and a `fetch` with
    the browser's credentials."""

    def __init__(self, hub_base: str, pid: str) -> None:
        outer = self
        self.target = f"{hub_base}/machines/laptop/proposals/{pid}"

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/attack.js":
                    self._send("text/javascript", ATTACK_JS)
                    return
                page = httpx.get(outer.target, headers={"Cookie": self.headers.get("Cookie", ""),
                                                        "Accept": "text/html"}).text
                csrf = re.search(r'name="csrf-token" content="([^"]*)"', page)
                seen = re.search(r'name="seen" value="([^"]*)"', page)
                fields = {"csrf_token": csrf.group(1) if csrf else "", "seen": seen.group(1) if seen else ""}
                inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
                self._send("text/html", f'<!doctype html><title>elsewhere</title><form id="f" method="post" '
                                        f'action="{outer.target}/approve">{inputs}</form>'
                                        f'<p id="fields" data-csrf="{fields["csrf_token"]}" '
                                        f'data-seen="{fields["seen"]}"></p><script src="/attack.js"></script>')

            def _send(self, kind: str, body: str) -> None:
                self.reply(kind, body.replace("TARGET", outer.target))

        super().__init__(Handler)


ATTACK_JS = """
const f = document.getElementById("fields").dataset;
window.fetchDone = fetch("TARGET/approve", {method: "POST", credentials: "include", mode: "no-cors",
  headers: {"Content-Type": "text/plain"}, body: JSON.stringify({seen: f.seen, csrf_token: f.csrf})})
  .then(function () { return "sent"; }, function () { return "failed"; })
  .then(function (said) { window.fetchSaid = said; document.getElementById("f").submit(); });
"""


def test_a_page_on_another_local_server_cannot_make_the_hub_decide(browser, team) -> None:
    server, _pair, pids, hub = team
    pid = pids["pending"]
    context = browser.new_context()
    try:
        tab = context.new_page()
        sign_in_tab(tab, server)                                   # the person is signed in to the hub
        with AttackerSite(server.base, pid) as attacker:
            tab.goto(attacker.url)
            tab.wait_for_url(lambda url: url.endswith(f"/proposals/{pid}/approve"), timeout=15_000)
            assert "must come from this origin" in tab.content()   # the form's post: refused by the Origin check
    finally:
        context.close()
    assert hub_rows(hub, "select count(*) from fleetdeck.decisions where proposal_id = %s", (pid,)) == [(0,)]


def test_a_high_risk_approval_on_the_hub_takes_this_machines_passkey(browser, team) -> None:
    """The person registered a passkey on this machine's own dashboard (`serve`, on localhost); the hub's
    dashboard, served from the same machine, asks for it for a high-risk approval, as the local one does, and
    the virtual authenticator's assertion lets the signed decision through."""
    from tests.browser.test_passkeys_browser import _authenticator
    from tests.fleets.serving import fresh_code

    server, (laptop, _desktop), _pids, hub = team
    pid = propose(laptop, "reset", {"mode": "hard", "target": "HEAD"})
    own = Server(server.db, [], ["--no-watch"])                   # this machine's own dashboard, same index
    context = browser.new_context()
    try:
        tab = context.new_page()
        _authenticator(context, tab)
        for base, path in ((own.base, "/passkeys"), (server.base, f"/machines/laptop/proposals/{pid}")):
            tab.goto(f"{base.replace('127.0.0.1', 'localhost')}{path}?code={fresh_code(server.db)}")
            tab.wait_for_url(lambda url: "code=" not in url)
            settle(tab)
            if path == "/passkeys":
                tab.fill("#passkey-name", "this machine")
                tab.click("#passkey-button")
                tab.wait_for_selector("table#passkey-list td:has-text('this machine')")
        bare = tab.evaluate("""() => fetch(document.querySelector('form.approve-form').action, {method: 'POST',
            headers: {'Content-Type': 'application/json', Accept: 'application/json',
                      'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content,
                      'X-Fleetdeck-Decision': localStorage.getItem('fleetdeck.decision')},
            body: JSON.stringify({confirm_high_risk: 'yes', seen: document.querySelector('input[name=seen]').value})})
            .then(r => r.json().then(j => [r.status, j.error && j.error.code]))""")
        assert bare == [403, "PASSKEY_REQUIRED"]                   # the tab alone, without the assertion
        tab.check("input[name=confirm_high_risk]")
        tab.click("#approve-button")
        tab.wait_for_url(lambda url: "decided=approved" in url, timeout=15_000)
        assert hub_rows(hub, "select action, approver, outcome from fleetdeck.decisions where proposal_id = %s",
                        (pid,)) == [("approve", "alice", None)]
    finally:
        context.close()
        own.stop()
