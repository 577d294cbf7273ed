"""While a never-seen fleet's history is still being read, the digest and a repo's timeline say so with the count,
in light and in dark, free of axe-core WCAG 2.1 A/AA findings (a real cold `fleetdeck serve`, its history pass
held back through the real path's delay)."""

from __future__ import annotations

import os

import pytest

from fleet.index.scan import HISTORY_DELAY_ENV
from fleet.index.store import open_index
from tests.browser.axe import assert_clean
from tests.browser.conftest import sign_in_tab
from tests.browser.test_accessibility import SCHEMES, visit_and_settle
from tests.fleets.gitbuild import init_repo
from tests.fleets.repo_states import busy_repo
from tests.fleets.serving import Server, wait_for

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def pending(tmp_path_factory):
    base = tmp_path_factory.mktemp("cold-a11y")
    root = base / "root"
    app = busy_repo(root)
    for n in range(3):
        init_repo(root / f"lib-{n}", commits=2)
    os.environ[HISTORY_DELAY_ENV] = "30"   # the server's history pass waits this long: the pages say so meanwhile
    try:
        server = Server(base / "fleet.db", [root])
    finally:
        del os.environ[HISTORY_DELAY_ENV]
    index = open_index(base / "fleet.db")
    wait_for(lambda: index.count() == 4 and index.history_backlog()["ids"], "every repo's state, no history", 60)
    yield server, index.repo(str(app.resolve()))["id"]
    index.close()
    server.stop()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_history_notice_is_axe_clean(browser, pending, scheme) -> None:
    server, app_id = pending
    context = browser.new_context(color_scheme=scheme)
    try:
        tab = context.new_page()
        sign_in_tab(tab, server)
        for path in ("/digest?since=custom&custom=2000-01-01T00:00:00%2B00:00", f"/repos/{app_id}"):
            visit_and_settle(tab, server, path)
            notice = tab.locator("#history-pending")
            assert notice.is_visible() and "Still reading history: 0 of 4 repos." in notice.inner_text(), path
            assert_clean(tab, f"{path} while history is read, in the {scheme} scheme")
    finally:
        context.close()


def test_a_killed_serve_takes_its_workers_with_it(pending) -> None:
    """The cold start's worker processes (forked before the web stack, held in their history pass here)
    die with the serve that made them, even when it is killed outright (SIGKILL runs no clean-up)."""
    server, _ = pending
    workers = [int(p) for p in open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read().split()]
    assert workers, "the cold start forked no workers"
    server.proc.kill()
    server.proc.wait()
    wait_for(lambda: not [w for w in workers if os.path.exists(f"/proc/{w}") and
                          open(f"/proc/{w}/stat").read().split()[2] != "Z"], "the workers gone", 10)
