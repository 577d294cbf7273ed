"""Proposals in a real browser over a real `fleetdeck serve`: a new proposal appears live (list and header
count), a person clicks Approve on its page and sees the outcome; a high-risk one needs the second
confirmation. The agent's answer links to this dashboard (approve_url, without the token)."""

from __future__ import annotations

import time

import pytest

from fleet.index.store import open_index
from fleet.ops import service
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import build
from tests.fleets.serving import Server, wait_for

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("ops-browser")
    built = build(base)
    built["index"].close()
    server = Server(built["db"], [built["root"]])
    index = open_index(built["db"])
    yield server, index, built
    index.close()
    server.stop()


def test_click_approve_runs_it_and_the_page_shows_the_outcome(page, served):
    server, index, built = served
    work = built["work"]
    page.goto(server.base + "/proposals")
    page.wait_for_selector("#live-status.on")
    made = service.propose(index, "claude-code", "stage", str(work), {"paths": ["README.md"]}, "stage the edit")
    assert made["approve_url"] == f"{server.base}/proposals/{made['proposal_id']}"
    assert "token" not in made["approve_url"]
    started = time.monotonic()
    page.wait_for_selector(f"a.proposal-link:has-text('{made['proposal_id']}')", timeout=5000)
    assert time.monotonic() - started < 2.0  # proposal stored -> SSE -> list patched
    assert page.locator("#pending-count").inner_text() == "1"
    page.click(f"a.proposal-link:has-text('{made['proposal_id']}')")
    page.wait_for_selector("#approve-button")
    assert "+edited" in page.locator("pre.diff").inner_text()
    started = time.monotonic()
    page.click("#approve-button")
    page.wait_for_selector("text=Outcome", timeout=10000)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, elapsed  # approve -> executed -> page shows the outcome
    print(f"approve -> outcome shown: {elapsed * 1000:.0f} ms")
    assert "completed" in page.locator(".lede").inner_text()
    assert git(work, "diff", "--cached", "--name-only") == "README.md\n"
    wait_for(lambda: page.locator("#pending-count").is_hidden(), "the header count cleared", 5)


def test_high_risk_needs_the_checkbox(page, served):
    server, index, built = served
    work = built["work"]
    made = service.propose(index, "codex", "discard", str(work), {"paths": ["notes.txt"], "include_untracked": True},
                           "drop the scratch notes")
    page.goto(made["approve_url"])
    page.click("#approve-button")  # the required checkbox keeps the form from being sent
    time.sleep(0.5)
    assert service.show(index, made["proposal_id"])["status"] == "pending"
    assert (work / "notes.txt").exists()
    page.check("input[name=confirm_high_risk]")
    page.click("#approve-button")
    page.wait_for_selector("text=Outcome", timeout=10000)
    assert not (work / "notes.txt").exists()
    assert service.show(index, made["proposal_id"])["status"] == "completed"


def test_reject_with_a_reason(page, served):
    server, index, built = served
    made = service.propose(index, "codex", "branch", str(built["work"]), {"name": "nope"}, "a branch")
    page.goto(made["approve_url"])
    page.fill("#reject-reason", "not this one")
    page.click("#reject-button")
    page.wait_for_selector("text=Outcome", timeout=10000)
    row = service.show(index, made["proposal_id"])
    assert (row["status"], row["decision_reason"], row["decided_by"]) == ("rejected", "not this one", "dashboard")
