"""The decision credential in Chromium: a server on another localhost port receives the dashboard's cookie
(cookies are not port-scoped), reads a proposal page with it, takes the CSRF token from the HTML and
approves; it must not decide anything. The person's own tab still decides (its key never appears in a page)."""

from __future__ import annotations

import re

import httpx
import pytest

from fleet.index.store import open_index
from fleet.ops import service
from tests.fleets.localsite import LocalSite, QuietHandler
from tests.fleets.ops_fleet import build, state
from tests.fleets.serving import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("decision-browser")
    built = build(base)
    built["index"].close()
    server = Server(built["db"], [built["root"]], ["--no-watch"])
    index = open_index(built["db"])
    yield server, index, built
    index.close()
    server.stop()


class OtherPort(LocalSite):
    """Another local web server (the attacker's): on each page load it replays the cookies the browser sent
    it against fleetdeck, reads the proposal page's CSRF token and POSTs approve, as a browser would not."""

    def __init__(self, fleetdeck: str, proposal_id: str) -> None:
        self.cookies: list[str] = []
        self.pages: list[str] = []
        self.answers: list[tuple[int, str]] = []
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                cookie = self.headers.get("Cookie", "")
                outer.cookies.append(cookie)
                headers = {"Cookie": cookie, "Accept": "text/html"}
                page = httpx.get(f"{fleetdeck}/proposals/{proposal_id}", headers=headers).text
                outer.pages.append(page)
                found = re.search(r'name="csrf-token" content="([^"]*)"', page)
                csrf = found.group(1) if found else ""
                r = httpx.post(f"{fleetdeck}/proposals/{proposal_id}/approve", data={"csrf_token": csrf},
                               headers={**headers, "Origin": fleetdeck, "X-CSRF-Token": csrf,
                                        "Accept": "application/json"})
                outer.answers.append((r.status_code, r.text))
                self.reply("text/html", "<!doctype html><title>elsewhere</title><p>nothing to see")

        super().__init__(Handler)


def test_a_server_on_another_port_holding_the_cookie_cannot_approve(page, served):
    server, index, built = served
    pid = service.propose(index, "claude-code", "stage", str(built["work"]), {"paths": ["README.md"]},
                          "stage the readme")["proposal_id"]
    before = state(built["work"])
    port = server.base.rsplit(":", 1)[1]
    with OtherPort(server.base, pid) as other:
        page.goto(other.url)
        page.wait_for_selector("text=nothing to see")
    assert any(f"fleetdeck_{port}=" in c for c in other.cookies), other.cookies  # the premise: it got the cookie
    assert other.pages and pid in other.pages[0]  # and the cookie reads the dashboard (the documented limit)
    status, text = other.answers[0]
    assert status == 403, text
    assert service.show(index, pid)["status"] == "pending"
    assert state(built["work"]) == before


def test_the_decision_key_lives_in_the_tabs_storage_only(page, served):
    """No page, fragment or API answer carries the key; the session cookie is out of every script's reach."""
    server, index, built = served
    pid = service.propose(index, "claude-code", "branch", str(built["work"]), {"name": "keyless"},
                          "a branch")["proposal_id"]
    key = page.evaluate("() => localStorage.getItem('fleetdeck.decision')")
    assert key and len(key) >= 40
    assert "fleetdeck_" not in page.evaluate("() => document.cookie")  # HttpOnly
    for path in ("/", "/proposals", f"/proposals/{pid}", f"/fragments/proposals/{pid}", "/api/proposals",
                 f"/api/proposals/{pid}", "/agents", "/audit"):
        body = page.evaluate("p => fetch(p, {credentials: 'same-origin'}).then(r => r.text())", path)
        assert key not in body, path
    assert key != server.token and key not in server.printed[0]


def test_a_tab_without_the_key_cannot_decide_and_says_why(page, served):
    server, index, built = served
    pid = service.propose(index, "claude-code", "branch", str(built["work"]), {"name": "no-key"},
                          "a branch")["proposal_id"]
    page.evaluate("() => localStorage.removeItem('fleetdeck.decision')")
    page.goto(f"{server.base}/proposals/{pid}")
    page.click("#approve-button")
    alert = page.locator("#decide-error")
    alert.wait_for(state="visible")
    assert "no decision key" in alert.inner_text() and "fleetdeck dashboard link" in alert.inner_text()
    page.evaluate("() => localStorage.setItem('fleetdeck.decision', 'guessed')")
    page.click("#approve-button")
    page.wait_for_function("() => document.getElementById('decide-error').textContent.includes('decision key')")
    assert "dashboard link" in alert.inner_text() and "guessed" not in alert.inner_text()
    assert service.show(index, pid)["status"] == "pending"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_landing_and_sign_in_pages_say_how_to_get_in_and_are_axe_clean(browser, served, scheme):
    from tests.browser.axe import assert_clean

    server, _index, _built = served
    context = browser.new_context(color_scheme=scheme)
    try:
        tab = context.new_page()
        link = server.link("/proposals")
        tab.goto(link)
        tab.wait_for_url(f"{server.base}/proposals")  # the script traded the code and went on
        used = context.new_page()
        used.goto(link)  # the same link again: spent
        used.wait_for_function("() => document.getElementById('landing-status').textContent.includes('already used')")
        assert used.locator("#landing").is_hidden() and "fleetdeck dashboard link" in used.content()
        assert_clean(used, f"a spent landing link ({scheme})")
        fresh = browser.new_context(color_scheme=scheme)
        try:
            stranger = fresh.new_page()
            response = stranger.goto(f"{server.base}/proposals?token={server.token}")  # the old link: no door
            assert response.status == 401 and "fleetdeck dashboard link" in stranger.content()
            assert_clean(stranger, f"the no-session page ({scheme})")
        finally:
            fresh.close()
    finally:
        context.close()
