"""The attacks on the dashboard's decisions, as an agent holding the MCP bearer token would run them against a
real `fleetdeck serve` (uvicorn, real git): the token as a landing link, the cookie and the CSRF token computed
from it offline, and the token POSTed straight at the decision routes. Each must leave the repository as git
had it and the proposal pending."""

from __future__ import annotations

import hashlib
import hmac
import re

import httpx
import pytest

from fleet.index.store import open_index
from fleet.ops import service
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import build, state
from tests.fleets.serving import Server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("decision-attacks")
    built = build(base)
    built["index"].close()
    server = Server(built["db"], [built["root"]], ["--no-watch"])
    index = open_index(built["db"])
    yield server, index, built
    index.close()
    server.stop()


def _propose(served, op: str, args: dict) -> str:
    _server, index, built = served
    return service.propose(index, "claude-code", op, str(built["work"]), args, f"attack {op}")["proposal_id"]


def _port(server: Server) -> int:
    return int(server.base.rsplit(":", 1)[1])


def _derive(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def _assert_untouched(served, pid: str, before: dict) -> None:
    _server, index, built = served
    assert service.show(index, pid)["status"] == "pending"
    assert state(built["work"]) == before


def test_the_mcp_token_as_a_landing_link_opens_no_session(served):
    server, _index, _built = served
    with httpx.Client(base_url=server.base, follow_redirects=False) as agent:
        r = agent.get(f"/?token={server.token}", headers={"Accept": "text/html"})
        assert "set-cookie" not in r.headers
        assert not agent.cookies
        assert agent.get("/proposals", headers={"Accept": "text/html"}).status_code == 401


def test_the_landing_cookie_and_the_page_csrf_cannot_approve_a_stage_or_a_hard_reset(served):
    """The attack of issue 23 step by step: `GET /?token=`, keep the cookie, read the CSRF token from the
    proposal page, approve a stage and a high-risk `reset --hard` that would throw away uncommitted work."""
    server, _index, built = served
    stage = _propose(served, "stage", {"paths": ["README.md"]})
    reset = _propose(served, "reset", {"mode": "hard", "target": "HEAD"})
    before = state(built["work"])
    with httpx.Client(base_url=server.base, follow_redirects=False) as agent:
        agent.get(f"/?token={server.token}")
        page = agent.get(f"/proposals/{stage}", headers={"Authorization": f"Bearer {server.token}"}).text
        found = re.search(r'name="csrf-token" content="([^"]*)"', page)
        csrf = found.group(1) if found else _derive(server.token, "fleetdeck-csrf-v1")
        for pid, extra in ((stage, {}), (reset, {"confirm_high_risk": "yes"})):
            r = agent.post(f"/proposals/{pid}/approve", data={"csrf_token": csrf, **extra},
                           headers={"Origin": server.base, "X-CSRF-Token": csrf, "Accept": "application/json"})
            assert r.status_code in (401, 403), r.text
    _assert_untouched(served, stage, before)
    _assert_untouched(served, reset, before)
    assert (built["work"] / "README.md").read_text() == "edited\n"


def test_a_cookie_and_csrf_computed_offline_from_the_mcp_token_cannot_approve(served):
    server, _index, built = served
    pid = _propose(served, "stage", {"paths": ["README.md"]})
    before = state(built["work"])
    port = _port(server)
    cookie = {f"fleetdeck_{port}": _derive(server.token, f"fleetdeck-cookie-v1:{port}")}
    csrf = _derive(server.token, "fleetdeck-csrf-v1")
    with httpx.Client(base_url=server.base, cookies=cookie, follow_redirects=False) as agent:
        assert agent.get("/api/proposals").status_code == 401  # the computed cookie opens nothing
        r = agent.post(f"/api/proposals/{pid}/approve", data={"csrf_token": csrf},
                       headers={"Origin": server.base, "X-CSRF-Token": csrf})
        assert r.status_code in (401, 403)
    _assert_untouched(served, pid, before)


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_the_bearer_token_posting_a_decision_route_is_refused_outright(served, action):
    server, _index, built = served
    pid = _propose(served, "stage", {"paths": ["README.md"]})
    before = state(built["work"])
    bearer = {"Authorization": f"Bearer {server.token}", "Accept": "application/json"}
    for path in (f"/api/proposals/{pid}/{action}", f"/proposals/{pid}/{action}"):
        r = httpx.post(server.base + path, headers=bearer, json={"reason": "mine", "confirm_high_risk": True})
        assert r.status_code == 403 and r.json()["error"]["code"] == "BEARER_CANNOT_DECIDE", r.text
        r = httpx.post(server.base + path, headers={**bearer, "Origin": server.base, "X-Fleetdeck-Decision": "x"},
                       json={"reason": "mine"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "BEARER_CANNOT_DECIDE"
    assert httpx.get(server.base + f"/api/proposals/{pid}", headers=bearer).status_code == 200  # reads stay
    _assert_untouched(served, pid, before)
    assert git(built["work"], "diff", "--cached", "--name-only") == ""


@pytest.mark.slow
def test_neither_the_bearer_token_nor_a_keyless_session_can_register_a_passkey(served):
    """A passkey of the agent's own would confirm its own high-risk approvals: registering is a decision."""
    server, index, _built = served
    bearer = {"Authorization": f"Bearer {server.token}", "Accept": "application/json", "Origin": server.base}
    for path in ("/api/passkeys/options", "/api/passkeys"):
        r = httpx.post(server.base + path, headers=bearer, json={})
        assert r.status_code == 403 and r.json()["error"]["code"] == "BEARER_CANNOT_DECIDE", r.text
    with httpx.Client(base_url=server.base) as tab:
        login = server.sign_in(tab)
        r = tab.post("/api/passkeys/options", headers=login.form, json={})
        assert r.status_code == 403 and r.json()["error"]["code"] == "DECISION_KEY_REQUIRED"
        r = tab.post("/api/passkeys/options", headers=login.decide, json={})  # the tab itself, on 127.0.0.1
        assert r.status_code == 403 and r.json()["error"]["code"] == "PASSKEY_NEEDS_LOCALHOST"
    assert index.conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'passkey:%'").fetchone()[0] == 0
