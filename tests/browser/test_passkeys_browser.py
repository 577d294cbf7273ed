"""Passkey confirmation in Chromium with the DevTools virtual authenticator (user verification on): the
person registers a passkey from their tab on `localhost`, then a high-risk approval needs a fresh assertion
bound to that proposal; the session and decision key alone (what a stolen tab state would give) no longer
approve it, an assertion made for another proposal is refused, the CLI refuses, and a low-risk one still
needs only the tab. The page is axe-clean in light and dark; on 127.0.0.1 it says passkeys need localhost."""

from __future__ import annotations

import pytest

from fleet.index.store import open_index
from fleet.ops import service
from tests.browser.axe import assert_clean
from tests.browser.conftest import sign_in_tab
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, noninteractive_approver
from tests.fleets.ops_fleet import build, state
from tests.fleets.serving import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("passkeys")
    built = build(base)
    built["index"].close()
    server = Server(built["db"], [built["root"]], ["--no-watch"])
    server.base = server.base.replace("127.0.0.1", "localhost")  # WebAuthn needs a host name
    index = open_index(built["db"])
    yield server, index, built
    index.close()
    server.stop()


def _authenticator(context, tab) -> None:
    cdp = context.new_cdp_session(tab)
    cdp.send("WebAuthn.enable")
    cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserVerified": True, "automaticPresenceSimulation": True}})


@pytest.fixture(scope="module")
def person(browser, served):
    """The person's tab on localhost, with an authenticator and one registered passkey."""
    server, index, _built = served
    context = browser.new_context()
    tab = context.new_page()
    _authenticator(context, tab)
    sign_in_tab(tab, server)
    tab.goto(server.base + "/passkeys")
    tab.fill("#passkey-name", "laptop")
    tab.click("#passkey-button")
    tab.wait_for_selector("table#passkey-list td:has-text('laptop')")
    yield tab
    context.close()


def _propose(index, built, op, args) -> str:
    return service.propose(index, "claude-code", op, str(built["work"]), args, f"passkey {op}")["proposal_id"]


def test_a_high_risk_approval_needs_a_fresh_assertion(person, served):
    server, index, built = served
    pid = _propose(index, built, "discard", {"paths": ["notes.txt"], "include_untracked": True})
    other = _propose(index, built, "reset", {"mode": "hard", "target": "HEAD"})
    before = state(built["work"])
    # the tab's session and decision key without an assertion: refused
    bare = person.evaluate("""p => fetch('/api/proposals/' + p + '/approve', {method: 'POST', headers: {
        'Content-Type': 'application/json', Accept: 'application/json',
        'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content,
        'X-Fleetdeck-Decision': localStorage.getItem('fleetdeck.decision')},
        body: JSON.stringify({confirm_high_risk: 'yes'})}).then(r => r.json().then(j => [r.status, j.error.code]))""", pid)
    assert bare == [403, "PASSKEY_REQUIRED"]
    # an assertion signed for another proposal: refused (the challenge is bound to the proposal, used once)
    crossed = person.evaluate("""([a, b]) => {
        const h = {'Content-Type': 'application/json', Accept: 'application/json',
                   'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content,
                   'X-Fleetdeck-Decision': localStorage.getItem('fleetdeck.decision')};
        const post = (u, body) => fetch(u, {method: 'POST', headers: h, body: JSON.stringify(body)});
        return post('/api/proposals/' + a + '/passkey?action=approve', {})  // a challenge for a is waiting too
          .then(() => post('/api/proposals/' + b + '/passkey?action=approve', {})).then(r => r.json())
          .then(need => navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(need.options)}))
          .then(cred => post('/api/proposals/' + a + '/approve', {confirm_high_risk: 'yes', passkey: cred.toJSON()}))
          .then(r => r.json().then(j => [r.status, j.error && j.error.code]));
    }""", [pid, other])
    assert crossed == [403, "PASSKEY_REFUSED"]  # signed over b's challenge, checked against a's
    assert service.show(index, pid)["status"] == "pending" and state(built["work"]) == before
    # the person clicks: the page asks the authenticator (user verified) and the approval runs
    person.goto(f"{server.base}/proposals/{pid}")
    person.check("input[name=confirm_high_risk]")
    person.click("#approve-button")
    person.wait_for_url("**decided=approved", timeout=15000)
    assert service.show(index, pid)["status"] == "completed"
    assert not (built["work"] / "notes.txt").exists()


def test_low_risk_needs_only_the_tab_and_the_cli_refuses_high_risk(person, served, tmp_path):
    server, index, built = served
    low = _propose(index, built, "branch", {"name": "with-passkeys"})
    person.goto(f"{server.base}/proposals/{low}")
    person.click("#approve-button")
    person.wait_for_url("**decided=approved", timeout=15000)
    high = _propose(index, built, "reset", {"mode": "hard", "target": "HEAD"})
    import subprocess

    noninteractive_approver(tmp_path / "config")
    run = subprocess.run(fleetdeck_argv("--db", str(built["db"]), "proposals", "approve", high, "--yes"),
                         capture_output=True, text=True, start_new_session=True, timeout=120,
                         env=fleetdeck_env(XDG_CONFIG_HOME=str(tmp_path / "config")))
    assert run.returncode == 1 and "[PASSKEY_REQUIRED]" in run.stderr
    assert service.show(index, high)["status"] == "pending"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_passkeys_page_is_axe_clean_and_says_localhost(browser, served, person, scheme):
    server, _index, _built = served
    context = browser.new_context(color_scheme=scheme)
    try:
        tab = context.new_page()
        sign_in_tab(tab, server)
        tab.goto(server.base + "/passkeys")
        assert "laptop" in tab.content()
        assert_clean(tab, f"the passkeys page ({scheme})")
        ip_base = server.base.replace("localhost", "127.0.0.1")
        tab.goto(server.link().replace(server.base, ip_base))
        tab.wait_for_url(lambda url: "code=" not in url)
        tab.goto(ip_base + "/passkeys")
        assert "WebAuthn needs a host name" in tab.content() and "localhost" in tab.content()
        assert_clean(tab, f"the passkeys page on 127.0.0.1 ({scheme})")
    finally:
        context.close()
