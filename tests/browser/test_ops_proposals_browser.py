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

pytestmark = [pytest.mark.browser, pytest.mark.slow]


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
    page.wait_for_url("**decided=approved", timeout=10000)  # the script sent it with the tab's decision key
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
    page.wait_for_url("**decided=approved", timeout=10000)
    assert not (work / "notes.txt").exists()
    assert service.show(index, made["proposal_id"])["status"] == "completed"


def test_reject_with_a_reason(page, served):
    server, index, built = served
    made = service.propose(index, "codex", "branch", str(built["work"]), {"name": "nope"}, "a branch")
    page.goto(made["approve_url"])
    page.fill("#reject-reason", "not this one")
    page.click("#reject-button")
    page.wait_for_url("**decided=rejected", timeout=10000)
    row = service.show(index, made["proposal_id"])
    assert (row["status"], row["decision_reason"], row["decided_by"]) == ("rejected", "not this one", "dashboard")


def _repo_url(server, index, repo) -> str:
    return f"{server.base}/repos/{index.repo(str(repo))['id']}"


def test_the_repo_page_shows_its_pending_proposals_and_decides_them_inline(page, served):
    server, index, built = served
    work = built["work"]
    made = service.propose(index, "claude-code", "branch", str(work), {"name": "from-repo-page"}, "a branch here")
    other = service.propose(index, "codex", "branch", str(work), {"name": "rejected-here"}, "another one")
    page.goto(_repo_url(server, index, work))
    item = page.locator(f"[data-proposal-id='{made['proposal_id']}']")
    assert "claude-code" in item.inner_text() and "a branch here" in item.inner_text()
    assert item.locator("a.proposal-link").get_attribute("href") == f"/proposals/{made['proposal_id']}"
    page.fill(f"#reject-reason-{other['proposal_id']}", "not from here")
    page.click(f"#reject-button-{other['proposal_id']}")
    page.wait_for_selector("text=Outcome", timeout=10000)
    assert service.show(index, other["proposal_id"])["status"] == "rejected"
    page.goto(_repo_url(server, index, work))
    page.click(f"#approve-button-{made['proposal_id']}")
    page.wait_for_selector("text=Outcome", timeout=10000)
    row = service.show(index, made["proposal_id"])
    assert (row["status"], row["decided_by"]) == ("completed", "dashboard")
    assert git(work, "rev-parse", "--verify", "-q", "refs/heads/from-repo-page", check=False).strip()
    page.goto(_repo_url(server, index, work))
    assert page.locator("[data-proposal-id]").count() == 0


def test_inline_high_risk_approval_needs_the_checkbox(page, served):
    server, index, built = served
    work = built["work"]
    write_notes = work / "scratch.txt"
    write_notes.write_text("scratch\n")
    made = service.propose(index, "codex", "discard", str(work), {"paths": ["scratch.txt"], "include_untracked": True},
                           "drop the scratch file")
    page.goto(_repo_url(server, index, work))
    page.click(f"#approve-button-{made['proposal_id']}")
    time.sleep(0.5)
    assert service.show(index, made["proposal_id"])["status"] == "pending" and write_notes.exists()
    page.locator(f"[data-proposal-id='{made['proposal_id']}'] input[name=confirm_high_risk]").check()
    page.click(f"#approve-button-{made['proposal_id']}")
    page.wait_for_selector("text=Outcome", timeout=10000)
    assert not write_notes.exists()


def test_the_queue_links_the_next_step_to_the_proposal_it_names(page, served):
    server, index, built = served
    made = service.propose(index, "claude-code", "branch", str(built["work"]), {"name": "queued-link"}, "link me")
    page.goto(server.base + "/")
    link = page.locator(f"td.next a[href='/proposals/{made['proposal_id']}']")
    link.wait_for(timeout=5000)
    ident = link.locator("code.id")
    assert ident.inner_text() == made["proposal_id"]
    box = ident.bounding_box()
    line = float(ident.evaluate("el => parseFloat(getComputedStyle(el).lineHeight) || el.offsetHeight"))
    assert box["height"] < 1.6 * line  # one line: the id does not wrap
    page.set_viewport_size({"width": 900, "height": 800})
    ident.wait_for(state="visible")  # a live update may have just re-rendered the queue's rows
    box = ident.bounding_box()
    assert box is not None and box["height"] < 1.6 * line
    link.click()
    page.wait_for_selector("#approve-button")
    service.reject(index, made["proposal_id"], "cli", "done testing")


def test_an_undone_proposal_says_undone_and_offers_no_undo(page, served):
    server, index, built = served
    made = service.propose(index, "claude-code", "branch", str(built["work"]), {"name": "to-undo"}, "then undo it")
    service.approve(index, made["proposal_id"], "cli")
    undo = service.undo(index, made["proposal_id"], "cli")
    page.goto(made["approve_url"])
    assert "undone" in page.locator(".lede").inner_text()
    outcome = page.locator("section[aria-labelledby=outcome-title]").inner_text()
    assert f"Undone by {undo['id']}" in outcome and "proposals undo" not in outcome
    api = page.evaluate("id => fetch('/api/proposals/' + id).then(r => r.json())", made["proposal_id"])
    assert (api["proposal"]["status"], api["proposal"]["undone_by"]) == ("undone", undo["id"])
    page.click(f"a[href='/proposals/{undo['id']}']")
    page.wait_for_selector("text=Outcome")
    assert "completed" in page.locator(".lede").inner_text()
