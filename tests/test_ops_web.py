"""Proposals on the dashboard (Starlette TestClient over a real fleet): the pages, the JSON API, approving and
rejecting with the person's tab (session + CSRF + Origin + the tab's decision key) or the approver token, never
with the MCP bearer token; the high-risk second confirmation; the header's pending count; the SSE event."""

from __future__ import annotations

import json
import re

import pytest
from starlette.testclient import TestClient

from fleet.ops import service
from fleet.ops.approver import approver_token
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import build
from tests.fleets.serving import sign_in
from web.app import create_app

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuv"
BASE = "http://127.0.0.1:8765"
ORIGIN = {"Origin": BASE}
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    built = build(tmp_path)
    yield built
    built["index"].close()


@pytest.fixture
def client(fleet):
    with TestClient(create_app(fleet["db"], TOKEN), base_url=BASE, follow_redirects=False) as c:
        yield c


@pytest.fixture
def login(client, fleet):
    return sign_in(client, fleet["db"])


@pytest.fixture
def browser(client, login):
    return client


def propose(fleet, op="stage", args=None, agent="claude-code"):
    return service.propose(fleet["index"], agent, op, str(fleet["work"]), args or {"paths": ["README.md"]},
                           "please stage the readme")["proposal_id"]


def test_pages_show_pending_first_with_the_preview(browser, fleet):
    pid = propose(fleet)
    page = browser.get("/proposals")
    assert page.status_code == 200 and pid in page.text and "Waiting for you" in page.text
    assert re.search(r'id="pending-count"[^>]*>1<', browser.get("/").text)  # the header, on every page
    one = browser.get(f"/proposals/{pid}")
    assert one.status_code == 200
    assert '<span class="d-add">+edited</span>' in one.text and "please stage the readme" in one.text
    assert 'name="csrf_token"' in one.text and "confirm_high_risk" not in one.text
    api = browser.get("/api/proposals").json()   # paged summary rows (tests/test_ops_limits.py), not the page's groups
    assert [(p["id"], p["status"]) for p in api["proposals"]] == [(pid, "pending")]
    assert browser.get(f"/api/proposals/{pid}").json()["proposal"]["status"] == "pending"
    assert browser.get("/proposals/p-nothing").status_code == 404
    assert browser.get("/api/proposals/p-nothing").json()["error"]["code"] == "NOT_FOUND"


def test_the_tab_approves_with_its_decision_key_and_runs(browser, login, fleet):
    pid = propose(fleet)
    r = browser.post(f"/proposals/{pid}/approve", data={"csrf_token": login.csrf}, headers=login.decide)
    assert r.status_code == 200 and r.json()["status"] == "completed"
    assert git(fleet["work"], "diff", "--cached", "--name-only") == "README.md\n"
    row = browser.get(f"/api/proposals/{pid}").json()["proposal"]
    assert (row["status"], row["decided_by"]) == ("completed", "dashboard")
    page = browser.get(f"/proposals/{pid}").text
    assert "Undo: <code>fleetdeck proposals undo" in page
    trail = browser.get(f"/api/proposals/{pid}").json()["trail"]["entries"]  # the proposal's own audit entries
    assert [e["event"] for e in trail] == ["proposal.pending", "proposal.approved", "proposal.executing",
                                           "proposal.completed"]
    assert trail[1]["actor"] == "dashboard" and "Audit trail" in page and "proposal.approved" in page


def test_a_session_without_the_decision_key_cannot_decide(browser, login, fleet):
    """The cookie and the CSRF token (which another local port can get: the cookie, then a page) are not
    enough; a plain form post, without the page's script, gets a page saying why."""
    pid = propose(fleet)
    for extra in ({}, {"X-Fleetdeck-Decision": "guess"}):
        r = browser.post(f"/proposals/{pid}/approve", data={"csrf_token": login.csrf}, headers={**ORIGIN, **extra})
        assert r.status_code == 403 and "decision key" in r.text and r.headers["content-type"].startswith("text/html")
        r = browser.post(f"/api/proposals/{pid}/reject", json={"reason": "x"}, headers={**login.form, **extra})
        assert r.status_code == 403 and r.json()["error"]["code"] == "DECISION_KEY_REQUIRED"
    assert service.show(fleet["index"], pid)["status"] == "pending"


def test_the_access_token_alone_cannot_decide(client, fleet):
    """The token MCP clients use for /mcp opens the API but never approves, rejects or undoes."""
    pid = propose(fleet)
    for action in ("approve", "reject"):
        r = client.post(f"/api/proposals/{pid}/{action}", headers=BEARER, json={"reason": "no"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "BEARER_CANNOT_DECIDE"
    r = client.post(f"/api/proposals/{pid}/approve", headers={**BEARER, "X-Fleetdeck-Approver": "guess"})
    assert r.status_code == 403
    assert client.get(f"/api/proposals/{pid}", headers=BEARER).json()["proposal"]["status"] == "pending"
    assert git(fleet["work"], "diff", "--cached", "--name-only") == ""


def test_the_approver_token_decides_for_scripts(client, fleet):
    pid = propose(fleet)
    approver = {"X-Fleetdeck-Approver": approver_token(fleet["db"])}  # on its own: no MCP token needed
    r = client.post(f"/api/proposals/{pid}/approve", headers=approver)
    assert r.status_code == 200 and r.json()["status"] == "completed" and r.json()["decided_by"] == "api"
    again = client.post(f"/api/proposals/{pid}/approve", headers=approver)
    assert again.status_code == 409 and again.json()["error"]["code"] == "NOT_PENDING"
    other = propose(fleet, "unstage", {"paths": ["README.md"]})
    r = client.post(f"/api/proposals/{other}/reject", headers={**BEARER, **approver}, json={"reason": "keep it staged"})
    assert r.json()["status"] == "rejected" and r.json()["decision_reason"] == "keep it staged"
    assert client.get("/mcp", headers=approver).status_code == 401  # it opens no MCP door


def test_csrf_and_origin_still_guard_the_browser(browser, login, fleet):
    pid = propose(fleet)
    key = {"X-Fleetdeck-Decision": login.decision_key}
    assert browser.post(f"/proposals/{pid}/approve", headers={**ORIGIN, **key}).status_code == 403
    r = browser.post(f"/proposals/{pid}/approve", data={"csrf_token": login.csrf},
                     headers={"Origin": "http://evil.example", **key})
    assert r.status_code == 403
    assert service.show(fleet["index"], pid)["status"] == "pending"


def test_high_risk_needs_the_second_confirmation(browser, login, fleet):
    pid = propose(fleet, "discard", {"paths": ["README.md"]})
    page = browser.get(f"/proposals/{pid}").text
    assert 'name="confirm_high_risk"' in page and "required" in page
    r = browser.post(f"/proposals/{pid}/approve", data={"csrf_token": login.csrf}, headers=login.decide)
    assert r.status_code == 400 and r.json()["error"]["code"] == "CONFIRM_REQUIRED"
    assert (fleet["work"] / "README.md").read_text() == "edited\n"
    r = browser.post(f"/proposals/{pid}/approve", data={"csrf_token": login.csrf, "confirm_high_risk": "yes"},
                     headers=login.decide)
    assert r.status_code == 200
    assert git(fleet["work"], "status", "--porcelain", "--", "README.md") == ""


def test_reject_needs_a_reason(browser, login, fleet):
    pid = propose(fleet)
    r = browser.post(f"/proposals/{pid}/reject", data={"csrf_token": login.csrf, "reason": ""}, headers=login.decide)
    assert r.status_code == 400
    r = browser.post(f"/proposals/{pid}/reject", data={"csrf_token": login.csrf, "reason": "not now"},
                     headers=login.decide)
    assert r.status_code == 200
    assert service.show(fleet["index"], pid)["status"] == "rejected"


def test_events_announce_new_proposals(browser, fleet):
    with browser.stream("GET", "/api/events") as events:
        lines = events.iter_lines()
        first = next(line for line in lines if line.startswith("event:"))
        assert first == "event: status"
        propose(fleet)
        for line in lines:
            if line.startswith("event: proposals"):
                data = next(lines)
                assert json.loads(data.split(":", 1)[1]) == {"pending": 1}
                break


def test_racing_approvals_from_http_and_cli_run_once(browser, login, fleet):
    import threading

    from fleet.errors import FleetError
    from fleet.index.store import open_index

    pid = propose(fleet, "commit", {"message": "raced", "paths": ["README.md"]})
    outcomes = []

    def from_cli():
        with open_index(fleet["db"]) as idx:
            try:
                outcomes.append(service.approve(idx, pid, "cli")["status"])
            except FleetError as exc:
                outcomes.append(exc.code)

    def from_http():
        r = browser.post(f"/api/proposals/{pid}/approve", data={"csrf_token": login.csrf}, headers=login.decide)
        outcomes.append(r.json().get("status") or r.json()["error"]["code"])

    threads = [threading.Thread(target=from_cli), threading.Thread(target=from_http)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["NOT_PENDING", "completed"]
    assert git(fleet["work"], "log", "--format=%s", "-2").split("\n")[:2] == ["raced", "add app"]


def test_the_page_shows_what_runs_outside_the_raw_json(browser, fleet):
    """The message, every plan step with its arguments and the files it changes, the repo by its fleet path."""
    pid = propose(fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md", "notes.txt"]}},
        {"op": "commit", "args": {"message": "first line\n\nthe body <b>bold</b>"}}]})
    page = browser.get(f"/proposals/{pid}").text
    shown = page.split('<section class="card" id="proposal-raw"')[0]  # everything before the raw JSON
    assert 'id="proposal-runs"' in shown and "fleet/work</code>" in shown
    assert '<li class="step" id="step-2">' in shown
    assert "first line\n\nthe body &lt;b&gt;bold&lt;/b&gt;</pre>" in shown
    assert '<code>["README.md", "notes.txt"]</code>' in shown  # step 1's arguments
    step2 = shown.split('id="step-2"')[1]
    assert "Files it changes (2)" in step2 and "<code>notes.txt</code>" in step2
    assert 'id="approve-button" class="approve"' in page and 'class="ghost reject" id="reject-button"' in page


def test_branch_delete_rows_name_repos_by_their_fleet_path(browser, fleet, tmp_path):
    from fleet.index.scan import scan
    from tests.fleets.gitbuild import init_repo

    for parent in ("a", "b"):
        repo = init_repo(fleet["root"] / parent / "api", commits=2)
        git(repo, "branch", "old", "HEAD~1")
    scan(fleet["index"], [str(fleet["root"])])
    made = service.propose(fleet["index"], "codex", "branch_delete", "a/api", {"targets": [
        {"repo": "a/api", "branches": ["old"]}, {"repo": "b/api", "branches": ["old"]}]}, "tidy")
    page = browser.get(f"/proposals/{made['proposal_id']}").text
    rows = page.split("<h3>Branches</h3>")[1].split("</table>")[0]
    assert "fleet/a/api</code>" in rows and "fleet/b/api</code>" in rows
    listed = browser.get("/proposals").text
    assert ">fleet/a/api</td>" in listed  # the list too: never a bare `api`


def test_proposal_page_lists_the_files_a_checkout_writes_with_ignored_overwrites_marked(browser, fleet):
    """Outside the raw JSON: the files the checkout writes, the ignored `.env` it would overwrite marked."""
    from tests.test_undo_bytes import _envy

    _envy(fleet["work"])
    pid = propose(fleet, "checkout", {"ref": "envy"})
    page = browser.get(f"/proposals/{pid}").text
    visible = page.split('<section class="card" id="proposal-raw"')[0]  # everything before the raw JSON
    assert re.search(r"<code>\.env</code> <span class=\"muted\">added</span> <span class=\"badge sev-critical\""
                     r"[^>]*>overwrites ignored file</span>", visible)
    assert "<code>u.txt</code> <span class=\"muted\">added</span></li>" in visible
    assert "1 overwrite a file git does not track" in visible


def test_gits_stderr_is_shown_as_its_lines(browser, fleet):
    """A failed commit's git output reads as git wrote it, a line each, on the page and in `proposals show`."""
    from fleet.cli.proposal_text import describe as _describe
    from tests.fleets.gitbuild import write

    work = fleet["work"]
    hook = work / ".git" / "hooks" / "pre-commit"
    write(hook, "#!/bin/sh\necho 'first line of the hook' >&2\necho 'second <line>' >&2\nexit 1\n")
    hook.chmod(0o755)
    git(work, "add", "README.md")
    made = service.propose(fleet["index"], "claude-code", "commit", str(work), {"message": "refused"}, "try")
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed"
    shown = _describe(done)
    assert "  git: first line of the hook\n  git: second <line>" in shown and "\\n" not in shown
    page = browser.get(f"/proposals/{done['id']}").text
    said = page.split('<pre class="stderr">', 1)[1].split("</pre>", 1)[0]
    assert said.splitlines() == ["first line of the hook", "second &lt;line&gt;"]
