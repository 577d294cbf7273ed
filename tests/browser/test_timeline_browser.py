"""The safety net's Timeline in a real browser over a real `fleetdeck serve`: a `git reset --hard` and a
`git clean -f` throw work away; the repo page's Timeline shows the discard, "Restore all that was lost" opens
the confirmation naming what it would overwrite, Restore (sent by the page's script with the tab's decision
key, like Approve) brings the bytes back, checked with git. Each page axe-clean in light and dark."""

from __future__ import annotations

import pytest

from fleet.index.store import open_index
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from tests.browser.axe import assert_clean
from tests.browser.conftest import sign_in_tab
from tests.fleets.gitbuild import git, write
from tests.fleets.ops_fleet import build
from tests.fleets.serving import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("timeline-browser")
    built = build(base)
    built["index"].close()
    server = Server(built["db"], [built["root"]])
    index = open_index(built["db"])
    yield server, index, built
    index.close()
    server.stop()


def _discard(built: dict) -> dict:
    work = built["work"]
    tree = WorkTree(str(work), str(work / ".git"), str(work / ".git"))
    write(work / "README.md", "the person's unsaved thought\n")
    write(work / "notes.txt", "untracked notes\n")
    kept = take(tree, built["db"], "hook:claude-code", agents=["claude-code"], command="git reset --hard")
    git(work, "reset", "-q", "--hard")
    git(work, "clean", "-q", "-f")
    found = take(tree, built["db"], "sweep", agents=["claude-code"])
    assert found["discarded"]["count"] == 2
    return found


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_timeline_shows_a_discard_and_restore_all_brings_it_back(browser, served, scheme) -> None:
    server, index, built = served
    work = built["work"]
    found = _discard(built)
    context = browser.new_context(color_scheme=scheme)
    try:
        tab = context.new_page()
        repo_id = index.repo(str(work))["id"]
        sign_in_tab(tab, server, f"/repos/{repo_id}")
        tab.wait_for_selector("#live-status.on")
        row = tab.locator("#snapshots tr.discarded").first
        assert "discarded" in row.inner_text() and "2 files" in row.inner_text()
        assert_clean(tab, f"the repo page's Timeline with a discard ({scheme})")
        row.locator("text=Restore all that was lost").click()
        tab.wait_for_selector("#restore-confirm")
        assert tab.locator("#overwritten").inner_text().strip() == "README.md"
        assert tab.locator("#recreated").inner_text().strip() == "notes.txt"
        assert "+the person's unsaved thought" in tab.locator("pre.diff").inner_text()
        assert_clean(tab, f"the restore confirmation ({scheme})")
        assert (work / "README.md").read_bytes() != b"the person's unsaved thought\n"   # nothing written yet
        tab.click("#restore-button")
        tab.wait_for_url("**restored=*", timeout=10000)
        tab.wait_for_selector("text=Restored from snapshot")
        assert (work / "README.md").read_bytes() == b"the person's unsaved thought\n"
        assert (work / "notes.txt").read_bytes() == b"untracked notes\n"
        assert git(work, "status", "--porcelain", "-uall") == " M README.md\n?? notes.txt\n"
        assert_clean(tab, f"the repo page after a restore ({scheme})")
        tab.goto(f"{server.base}/repos/{repo_id}/snapshots/{found['id']}")    # what the reset took away
        files = tab.locator("table.snapshot-files tbody td:first-child")
        assert files.all_inner_texts() == ["README.md", "notes.txt"]
        assert "-the person's unsaved thought" in tab.locator("pre.diff").inner_text()
        assert_clean(tab, f"a snapshot's diff page ({scheme})")
    finally:
        context.close()
    git(work, "checkout", "-q", "--", "README.md")
    (work / "notes.txt").unlink()
