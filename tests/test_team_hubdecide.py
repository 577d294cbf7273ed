"""Deciding on the hub's dashboard (`serve --team DSN --key PEM --as alice`), against a real PostgreSQL the tests
start and two machines driven through the CLI: the person's tab approves a laptop proposal, the server signs
it with alice's key through `team decide`'s code, and only the laptop runs it (git is the oracle); the page
shows each decision's state. Attacked as the local dashboard is: no session, a foreign Origin or Host, no CSRF
token, no decision key, the bearer token; a proposal changed on the hub after the page showed it; a high-risk
approval without its confirmation, and without the passkey this machine's settings ask for."""

from __future__ import annotations

import contextlib
import json
import re

import httpx
import pytest

from fleet.index.store import open_index
from tests.fleets.gitbuild import git
from tests.fleets.serving import Server, sign_in
from tests.test_team import _pin, enrolled_pair, hub_rows, initialised_hub, server  # noqa: F401  (server)
from tests.test_team_hubview import dashboard_dsn

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
pytestmark = pytest.mark.slow   # a real PostgreSQL, two machines through the CLI and a `serve --team`

PASSKEY = {"id": "planted", "name": "hub key", "public_key": "AA", "created_at": "2026-12-01T00:00:00Z",
           "sign_count": 0}


@pytest.fixture(scope="module")
def team(server, tmp_path_factory):  # noqa: F811
    """laptop and desktop pushed to a hub; laptop accepts alice's pinned key; a hub dashboard signing as alice,
    whose own index holds a passkey (so a high-risk approval asks for it, as `[passkeys] require = "high"`
    does on its own dashboard)."""
    from fleet.audit.keys import keygen

    hub = initialised_hub(server, "hub_decide")
    base = tmp_path_factory.mktemp("hub-decide")
    laptop, desktop = enrolled_pair(base, hub, push=True)
    _, private, public = keygen(base / "alice-keys")
    _pin(laptop, public)
    settings = laptop.home / ".config/fleetdeck/settings.toml"     # the laptop's person decides by script too
    settings.write_text(settings.read_text() + "\n[approval]\nnoninteractive = true\n")
    db = base / "dash.db"
    with open_index(db) as idx:
        idx.set_meta_texts({"passkey:planted": json.dumps(PASSKEY)})
    dsn = dashboard_dsn(hub)
    dash = Server(db, [], extra=["--team", dsn, "--key", str(private), "--as", "alice"])
    yield {"hub": hub, "laptop": laptop, "desktop": desktop, "dash": dash, "private": private, "dsn": dsn}
    dash.stop()


def propose(machine, op: str, args: dict, repo: str = "web") -> str:
    """A pending proposal an agent makes on `machine` (in its own home), pushed to the hub."""
    from fleet.ops import service

    with pytest.MonkeyPatch.context() as env:
        for key in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "GIT_CONFIG_GLOBAL"):
            env.setenv(key, machine.env[key])
        with open_index(machine.db) as index:
            pid = service.propose(index, "claude-code", op, str(machine.fleet / f"{machine.name}-{repo}"), args,
                                  "for the hub to decide")["proposal_id"]
    machine.run("team", "push", "--once")
    return pid


def page_path(pid: str, machine: str = "laptop") -> str:
    return f"/machines/{machine}/proposals/{pid}"


def seen_on(page: str) -> str:
    found = re.search(r'name="seen" value="([0-9a-f]+)"', page)
    assert found, page[:2000]
    return found.group(1)


@contextlib.contextmanager
def on_the_page(team: dict, branch: str):
    """A `branch` proposal of the laptop's, a signed-in client of the hub dashboard, and the digest its page showed:
    (proposal id, client, login, seen)."""
    pid = propose(team["laptop"], "branch", {"name": branch})
    with httpx.Client(base_url=team["dash"].base, timeout=30) as client:
        login = sign_in(client, team["dash"].db)
        yield pid, client, login, seen_on(client.get(page_path(pid)).text)


def decisions(hub: str, pid: str) -> list[tuple]:
    return hub_rows(hub, "select action, approver, outcome, outcome_reason from fleetdeck.decisions "
                         "where proposal_id = %s order by id", (pid,))


def test_the_hub_page_approves_and_only_the_owning_machine_runs_it(team):
    hub, laptop, dash = team["hub"], team["laptop"], team["dash"]
    pid = propose(laptop, "branch", {"name": "from-the-hub-page"})
    with httpx.Client(base_url=dash.base, timeout=30) as client:
        login = sign_in(client, dash.db)
        listed = client.get("/proposals").text
        assert f'href="{page_path(pid)}"' in listed and "signed as <strong>alice</strong>" in listed
        page = client.get(page_path(pid)).text
        assert "What will run" in page and "from-the-hub-page" in page and "Approve (laptop runs it)" in page
        r = client.post(page_path(pid) + "/approve", json={"seen": seen_on(page)}, headers=login.decide)
        assert r.status_code == 200, r.text
        assert r.json()["approver"] == "alice" and r.json()["machine"] == "laptop"
        assert decisions(hub, pid) == [("approve", "alice", None, None)]
        assert "waiting" in client.get(page_path(pid)).text
        assert git(laptop.fleet / "laptop-web", "branch", "--list", "from-the-hub-page") == ""   # not run here
        team["desktop"].run("team", "push", "--once")           # another machine never acts on it
        assert decisions(hub, pid)[0][2] is None
        laptop.run("team", "push", "--once")                   # the laptop settles it, then pushes the result
        assert decisions(hub, pid) == [("approve", "alice", "applied", None)]
        assert git(laptop.fleet / "laptop-web", "branch", "--list", "from-the-hub-page").strip() == "from-the-hub-page"
        shown = laptop.json("proposals", "show", pid)
        assert shown["status"] == "completed" and shown["decided_by"] == "hub:alice"
        after = client.get(page_path(pid)).text
        assert "applied" in after and 'name="seen"' not in after            # decided: no form any more
        assert client.post(page_path(pid) + "/approve", json={"seen": seen_on(page)},
                           headers=login.decide).json()["error"]["code"] == "NOT_PENDING"


def test_a_refused_decision_shows_its_reason_on_the_hub_page(team):
    hub, laptop, dash = team["hub"], team["laptop"], team["dash"]
    with on_the_page(team, "raced-on-the-hub") as (pid, client, login, seen):
        r = client.post(page_path(pid) + "/reject", json={"seen": seen}, headers=login.decide)
        assert r.json()["error"]["code"] == "BAD_ARGUMENT"                    # a rejection needs a reason
        r = client.post(page_path(pid) + "/approve", json={"seen": seen}, headers=login.decide)
        assert r.status_code == 200, r.text
        laptop.run("proposals", "reject", pid, "--reason", "not now", "--yes")   # the person, locally, first
        laptop.run("team", "push", "--once")
        outcome = decisions(hub, pid)[-1]
        assert outcome[2] == "refused" and "rejected here, not pending" in outcome[3]
        page = client.get(page_path(pid)).text
        assert "refused" in page and "rejected here, not pending" in page
        assert git(laptop.fleet / "laptop-web", "branch", "--list", "raced-on-the-hub") == ""


def test_no_other_page_or_client_can_make_the_hub_decide(team):
    """Raw requests as another local page's script or another program would send them: each is refused and
    no decision row is written."""
    hub, laptop, dash = team["hub"], team["laptop"], team["dash"]
    with on_the_page(team, "never-decided") as (pid, client, login, seen):
        url = page_path(pid) + "/approve"
        body = {"seen": seen}
        evil = "http://127.0.0.1:1"
        for headers, code in (
                ({**login.decide, "Origin": evil}, "ORIGIN_REFUSED"),          # another local server's page
                ({k: v for k, v in login.decide.items() if k != "Origin"}, "ORIGIN_REFUSED"),
                ({**login.decide, "X-CSRF-Token": "guessed"}, "CSRF_REFUSED"),
                ({k: v for k, v in login.decide.items() if k != "X-CSRF-Token"}, "CSRF_REFUSED"),
                ({**login.form, "Accept": "application/json"}, "DECISION_KEY_REQUIRED"),   # the cookie, no key
                ({**login.decide, "X-Fleetdeck-Decision": "guessed"}, "DECISION_KEY_REQUIRED"),
                ({**login.decide, "Host": "evil.example"}, "HOST_REFUSED")):
            r = client.post(url, json=body, headers=headers)
            assert r.json()["error"]["code"] == code, (headers, r.text)
        form = client.post(url, data={"csrf_token": login.csrf, "seen": seen},    # a plain form: no key
                           headers={"Origin": login.origin, "Accept": "text/html"})
        assert form.status_code == 403 and "decision key" in form.text
    with httpx.Client(base_url=dash.base, timeout=30) as stranger:
        assert stranger.post(url, json=body, headers={"Origin": dash.base}).status_code == 401   # no session
        r = stranger.post(url, json=body, headers={**dash.auth, "Accept": "application/json"})
        assert r.json()["error"]["code"] == "BEARER_CANNOT_DECIDE"
    assert decisions(hub, pid) == []


def test_a_proposal_changed_on_the_hub_after_the_page_showed_it_is_refused(team):
    hub, laptop, dash = team["hub"], team["laptop"], team["dash"]
    with on_the_page(team, "as-shown") as (pid, client, login, seen):
        for stale in ("", "0" * 32):
            r = client.post(page_path(pid) + "/approve", json={"seen": stale}, headers=login.decide)
            assert r.json()["error"]["code"] == "STALE", r.text
        with psycopg.connect(hub, autocommit=True) as admin:   # the row moves on the hub after the page was read
            admin.execute("update fleetdeck.proposals set row = jsonb_set(row, '{reason}', '\"changed\"') "
                          "where machine_id = 'laptop' and id = %s", (pid,))
        r = client.post(page_path(pid) + "/approve", json={"seen": seen}, headers=login.decide)
        assert r.status_code == 409 and r.json()["error"]["code"] == "STALE", r.text
        assert decisions(hub, pid) == []
        fresh = client.get(page_path(pid)).text                         # the page as it is now decides
        assert "changed" in fresh and seen_on(fresh) != seen
        r = client.post(page_path(pid) + "/approve", json={"seen": seen_on(fresh)}, headers=login.decide)
        assert r.status_code == 200, r.text


def test_a_high_risk_approval_needs_its_confirmation_and_this_machines_passkey(team):
    """The dashboard's machine holds a passkey and requires one for high risk (the default): the hub's page asks
    for the checkbox and the passkey as the local dashboard does; a rejection carries no risk."""
    hub, laptop, dash = team["hub"], team["laptop"], team["dash"]
    pid = propose(laptop, "reset", {"mode": "hard", "target": "HEAD"})
    with httpx.Client(base_url=dash.base.replace("127.0.0.1", "localhost"), timeout=30) as client:   # WebAuthn's
        login = sign_in(client, dash.db)
        page = client.get(page_path(pid)).text
        assert 'name="confirm_high_risk"' in page and "(high risk)" in page
        body = {"seen": seen_on(page)}
        r = client.post(page_path(pid) + "/approve", json=body, headers=login.decide)
        assert r.json()["error"]["code"] == "CONFIRM_REQUIRED"
        r = client.post(page_path(pid) + "/approve", json={**body, "confirm_high_risk": "yes"}, headers=login.decide)
        assert r.json()["error"]["code"] == "PASSKEY_REQUIRED"
        need = client.post(f"/api{page_path(pid)}/passkey?action=approve", headers=login.decide).json()
        assert need["required"] is True and need["options"]["userVerification"] == "required"
        r = client.post(page_path(pid) + "/approve", json={**body, "confirm_high_risk": "yes", "passkey": {
            "id": "planted", "rawId": "planted", "type": "public-key", "response": {}}}, headers=login.decide)
        assert r.json()["error"]["code"] == "PASSKEY_REFUSED"            # a made-up assertion
        assert decisions(hub, pid) == []
        assert client.post(f"/api{page_path(pid)}/passkey?action=reject", headers=login.decide).json() == {
            "required": False}
        r = client.post(page_path(pid) + "/reject", json={**body, "reason": "too risky"}, headers=login.decide)
        assert r.status_code == 200, r.text
    assert decisions(hub, pid) == [("reject", "alice", None, None)]


def test_a_hub_dashboard_without_a_key_decides_nothing(team, tmp_path):
    hub, laptop = team["hub"], team["laptop"]
    pid = propose(laptop, "branch", {"name": "read-only-hub"})
    for argv in (["--key", str(team["private"])], ["--team", team["dsn"], "--key", str(team["private"])],
                 ["--team", team["dsn"], "--as", "alice"], ["--team", team["dsn"], "--key", str(tmp_path / "none.pem"),
                                                            "--as", "alice"],
                 ["--team", team["dsn"], "--key", str(team["private"]), "--as", "Not A Name"]):
        refused = laptop.run("serve", "--port", "0", *argv, check=False, process=True)  # a regression would serve
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, (argv, refused.stderr)
    plain = Server(tmp_path / "plain.db", [], extra=["--team", team["dsn"]])
    try:
        with httpx.Client(base_url=plain.base, timeout=30) as client:
            login = sign_in(client, plain.db)
            page = client.get(page_path(pid)).text
            assert "This dashboard signs no decisions" in page and 'name="seen"' not in page
            r = client.post(page_path(pid) + "/approve", json={"seen": "x"}, headers=login.decide)
            assert r.status_code == 403 and r.json()["error"]["code"] == "NO_APPROVER"
    finally:
        plain.stop()
    assert decisions(hub, pid) == []
