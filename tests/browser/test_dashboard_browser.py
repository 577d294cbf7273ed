"""The dashboard in a real browser (headless Chromium) over a real `fleetdeck serve` and real repos.

Nothing here re-reads a repo by hand: the watcher inside `fleetdeck serve` sees every git operation the
tests make and the page updates over SSE, as it does for a person."""

from __future__ import annotations

import json
import re
import time

import pytest

from fleet.index.store import open_index
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.fleets.dashboard_fleet import build_fleet
from tests.fleets.gitbuild import commit_file, git, write
from tests.fleets.serving import Server, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser-fleet")
    repos = build_fleet(base)
    server = Server(base / "fleet.db", [repos["root"]])
    index = open_index(base / "fleet.db")
    wait_for(lambda: len(index.repos()) == 4 and watcher_backlog(index) == 0, "the watcher's first read", 30)
    yield server, index, repos
    index.close()
    server.stop()


def watcher_backlog(index) -> int | None:
    row = index.conn.execute("select value from meta where key = 'watcher'").fetchone()
    return json.loads(row[0]).get("backlog") if row else None


def row_names(page) -> list[str]:
    return page.locator("#queue-table tbody .repo-link").all_inner_texts()


def test_queue_ranks_conflicted_above_dirty_above_clean(page, served) -> None:
    assert page.url.endswith("/") and "code=" not in page.url
    names = row_names(page)
    assert names.index("conflicted") < names.index("dirty") < names.index("clean")
    assert page.locator('tr[data-status="conflict"] .badge').inner_text() == "conflict"


def test_repo_page_shows_branch_and_ahead_behind(page, served) -> None:
    page.get_by_role("link", name="tracking", exact=True).click()
    page.wait_for_url(re.compile(r"/repos/\d+$"))
    assert page.get_by_role("heading", level=1).inner_text() == "tracking"
    main_row = page.locator('#branches tr[data-branch="main"]')
    assert main_row.locator("td.num").all_inner_texts() == ["2", "1"]
    assert "current" in main_row.inner_text()
    assert page.locator("#ahead-behind").inner_text() == "↑2 ↓1"


def test_queue_updates_in_place_after_a_commit(page, served) -> None:
    server, index, repos = served
    page.evaluate("window.__notReloaded = true")
    page.wait_for_selector("#live-status.on")
    clean_row = page.locator("tr", has=page.get_by_role("link", name="clean", exact=True))
    assert clean_row.get_attribute("data-status") == "clean"
    commit_file(repos["clean"], "feature.txt", "new\n", "a local commit")
    started = time.monotonic()
    page.wait_for_function("() => document.querySelector('tr[data-status=\"ahead\"] .repo-link')?.textContent === 'clean'",
                           timeout=5000)
    assert time.monotonic() - started < 1.5  # commit -> watcher -> index -> SSE -> fragment patched
    assert page.evaluate("window.__notReloaded") is True


def test_filters_survive_a_live_update(page, served) -> None:
    server, index, repos = served
    page.wait_for_selector("#live-status.on")
    page.select_option("#f-reason", "local_changes")
    page.fill("#f-q", "dirty")
    page.wait_for_function("() => location.search.includes('reason=local_changes') && location.search.includes('q=dirty')")
    page.wait_for_function("() => document.querySelectorAll('#queue-table tbody tr').length === 1")
    before = page.locator("#queue-table tbody .summary").inner_text()
    page.evaluate("window.__patched = 0; document.addEventListener('fleetdeck:patched', () => window.__patched++)")
    write(repos["dirty"] / "another.txt", "more\n")
    git(repos["dirty"], "add", "another.txt")  # touches .git/index: the watcher sees it at once
    # a patch may come first for something else the watcher saw (a sweep, presence): wait for the one with it
    page.wait_for_function("() => window.__patched > 0 && document.querySelector('#queue-table tbody .summary')"
                           "?.textContent.includes('1 staged')", timeout=5000)
    after = page.locator("#queue-table tbody .summary").inner_text()
    assert after != before and "1 staged" in after
    assert row_names(page) == ["dirty"]
    assert page.input_value("#f-q") == "dirty" and page.input_value("#f-reason") == "local_changes"


def test_no_token_is_refused(browser, served) -> None:
    server, _, _ = served
    context = browser.new_context()
    tab = context.new_page()
    response = tab.goto(server.base + "/")
    assert response.status == 401
    assert "fleetdeck dashboard link" in tab.content()  # a page that says how to get in, not raw JSON
    assert tab.goto(server.base + "/api/radar").status == 401
    context.close()


def test_a_foreign_host_is_refused_dns_rebinding(playwright_instance, served) -> None:
    server, _, _ = served
    port = server.base.rsplit(":", 1)[1]
    rebinding = playwright_instance.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS + ["--host-resolver-rules=MAP rebind.example 127.0.0.1"])
    try:
        tab = rebinding.new_page()
        response = tab.goto(f"http://rebind.example:{port}/?code={server.link().split('code=', 1)[1]}")
        assert response.status == 421
        assert "not the address fleetdeck is bound to" in tab.content()
    finally:
        rebinding.close()


def test_a_post_without_csrf_is_refused(page, served) -> None:
    server, index, repos = served
    rid = index.repo(str(repos["dirty"].resolve()))["id"]
    url = f"/api/repos/{rid}/refresh"
    bare = page.evaluate("u => fetch(u, {method: 'POST', headers: {Accept: 'application/json'}})"
                         ".then(r => r.json().then(j => [r.status, j.error.code]))", url)
    assert bare == [403, "CSRF_REFUSED"]
    with_token = page.evaluate(
        "u => fetch(u, {method: 'POST', headers: {Accept: 'application/json', 'X-CSRF-Token':"
        " document.querySelector('meta[name=csrf-token]').content}}).then(r => r.status)", url)
    assert with_token == 200


def test_the_content_security_policy_is_enforced(page) -> None:
    blocked = page.evaluate("""() => new Promise(resolve => {
        document.addEventListener('securitypolicyviolation', e => resolve(e.violatedDirective));
        const s = document.createElement('script');
        s.textContent = 'window.__inlineRan = true';
        document.head.appendChild(s);
        setTimeout(() => resolve(window.__inlineRan ? 'ran' : 'silent'), 1000);
    })""")
    assert blocked.startswith("script-src")


def test_digest_page_charts_activity_and_shows_new_events_live(page, served) -> None:
    server, _index, repos = served
    page.goto(server.base + "/digest?since=custom&custom=2025-01-01T00:00:00%2B00:00")  # gitbuild's clock
    assert page.get_by_role("link", name="Digest").get_attribute("aria-current") == "page"
    chart = page.locator("svg.chart")
    assert chart.get_attribute("aria-label") == "events per repository per day"
    assert chart.locator("rect.cell").count() > 0
    page.evaluate("window.__notReloaded = true")
    page.wait_for_selector("#live-status.on")
    commit_file(repos["tracking"], "digest.txt", "seen live\n", "a commit for the digest page")
    git(repos["tracking"], "commit", "-q", "--amend", "-m", "the same commit, amended")
    amended = page.locator("#digest-events tr.kind-amend", has_text="the same commit, amended")
    amended.wait_for(timeout=5000)
    assert "rewrite" in amended.get_attribute("class") and "updated" in amended.get_attribute("class")
    commit = page.locator("#digest-events tr.kind-commit", has_text="a commit for the digest page")
    assert commit.count() == 1 and "rewrite" not in commit.get_attribute("class")
    assert page.evaluate("window.__notReloaded") is True
    assert page.input_value("#d-custom") == "2025-01-01T00:00:00+00:00"  # the form survives the update
