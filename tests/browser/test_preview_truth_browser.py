"""The proposal page shows git's change, not a lookalike, in a real Chromium over a real `fleetdeck serve`:

- a CR inside an added line stays inside that added line, shown as `\\x0d` (it used to end the line on the
  page, and the payload after it rendered as an unchanged context line);
- a bidi override in a file name is shown as `\\u202e` (it used to show `invoice\\u202efdp.sh` as
  `invoicehs.pdf`), a zero-width space as `\\u200b`;
- a diff longer than the page's cut lists every file with git's counts, says which are not shown, is high
  risk, and links the whole patch as text/plain with the same display rule;
- a push shows the URL git will push to (pushurl), not `remote.<name>.url`.
Each page is also axe-core clean, light and dark.
"""

from __future__ import annotations

import socket
import urllib.request

import pytest

from fleet.index.store import open_index
from fleet.ops import service
from tests.browser.axe import assert_clean, preload
from tests.browser.conftest import sign_in_tab
from tests.fleets.gitbuild import bare_remote, git
from tests.fleets.ops_fleet import build
from tests.fleets.serving import Server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CR_PATCH = ("diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1,2 @@\n"
            " print('one')\n+print('two')\rimport os; os.system('touch pwned')\n")
BIDI_NAME = "invoice\u202efdp.sh"
BIDI_PATCH = (f"diff --git a/{BIDI_NAME} b/{BIDI_NAME}\nnew file mode 100644\n--- /dev/null\n+++ b/{BIDI_NAME}\n"
              "@@ -0,0 +1 @@\n+echo pay\u200bme\n")
LINES = 4000
BIG = (f"diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,{LINES} @@\n"
       + "".join(f"+filler line {i:05d} of a long change\n" for i in range(LINES)))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("preview-truth")
    built = build(base)
    remote = bare_remote(base / "remote.git")
    elsewhere = bare_remote(base / "elsewhere.git")
    work = built["work"]
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "-u", "origin", "main")
    git(work, "config", "remote.origin.pushurl", str(elsewhere))
    built["elsewhere"] = elsewhere
    built["index"].close()
    server = Server(built["db"], [built["root"]])
    index = open_index(built["db"])
    yield server, index, built
    index.close()
    server.stop()


def proposal(served, op: str, args: dict) -> tuple[str, str]:
    server, index, built = served
    made = service.propose(index, "claude-code", op, str(built["work"]), args, f"test {op}")
    return made["proposal_id"], f"{server.base}/proposals/{made['proposal_id']}"


@pytest.fixture(scope="module", params=["light", "dark"])
def signed_in(request, browser, served):
    """A context in each scheme, signed in once (its cookie and decision key serve every test's tab), with
    axe-core preloaded."""
    context = browser.new_context(color_scheme=request.param)
    preload(context)
    sign_in_tab(context.new_page(), served[0])
    yield context
    context.close()


@pytest.fixture
def tab(signed_in):
    page = signed_in.new_page()
    yield page
    page.close()


def test_a_cr_stays_inside_its_added_line(tab, served):
    _, url = proposal(served, "patch", {"patch": CR_PATCH})
    tab.goto(url)
    added = tab.locator("pre.diff span.d-add").all_inner_texts()
    assert "+print('two')\\x0dimport os; os.system('touch pwned')" in added, added
    context = tab.locator("pre.diff span.d-ctx").all_inner_texts()
    assert not [line for line in context if "import os" in line], context
    assert "\r" not in tab.locator("pre.diff").inner_text()
    assert_clean(tab, "the proposal page of a patch with a CR")


def test_bidi_and_zero_width_characters_are_shown(tab, served):
    _, url = proposal(served, "patch", {"patch": BIDI_PATCH})
    tab.goto(url)
    body = tab.locator("main").inner_text()
    assert "invoice\\u202efdp.sh" in body and "\u202e" not in body, body
    assert "+echo pay\\u200bme" in body and "\u200b" not in body
    assert "\u202e" not in tab.content() and "\u200b" not in tab.content()  # nor in the raw JSON block


def test_an_oversized_diff_lists_every_file_and_links_the_whole_patch(tab, served):
    proposal_id, url = proposal(served, "patch", {"patch": BIG + CR_PATCH})
    tab.goto(url)
    assert "high risk" in tab.locator(".lede").inner_text()
    assert "import os" not in tab.locator("pre.diff").inner_text()  # past the cut...
    rows = {r.locator("td code").first.inner_text(): r.inner_text() for r in tab.locator("table.diff-files tbody tr").all()}
    assert "not shown" in rows["src/app.py"] and "+1" in rows["src/app.py"]  # ...but listed, with git's counts
    assert f"+{LINES}" in rows["big.txt"] and "only its start" in rows["big.txt"]
    assert_clean(tab, "the proposal page of an oversized patch")
    with tab.expect_response(lambda r: r.url.endswith(f"/proposals/{proposal_id}/patch")) as answer:
        tab.click("#full-patch-link")
    response = answer.value
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text()
    assert "+print('two')\\x0dimport os; os.system('touch pwned')\n" in text and "\r" not in text
    assert text.count("\n") == (BIG + CR_PATCH).count("\n")


def test_the_full_patch_needs_the_session(served):
    server = served[0]
    proposal_id, _ = proposal(served, "patch", {"patch": BIG + CR_PATCH})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{server.base}/proposals/{proposal_id}/patch", timeout=10)
    assert err.value.code == 401


def test_a_push_shows_the_url_git_pushes_to(tab, served):
    server, index, built = served
    git(built["work"], "commit", "-q", "--allow-empty", "-m", "to push")
    _, url = proposal(served, "push", {})
    tab.goto(url)
    shown = tab.locator("ul.push-urls").inner_text()
    assert str(built["elsewhere"]) in shown
    assert "to push" in tab.locator("ul.commits").inner_text()
    assert_clean(tab, "the proposal page of a push")


def test_a_push_that_cannot_reach_its_remote_warns_before_approval(tab, served):
    server, index, built = served
    work = built["work"]
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()                                   # a port nobody listens on
    if "down" not in git(work, "remote").split():
        git(work, "remote", "add", "down", f"git://127.0.0.1:{port}/repo.git")
    else:
        git(work, "remote", "set-url", "down", f"git://127.0.0.1:{port}/repo.git")
    git(work, "commit", "-q", "--allow-empty", "-m", "to push nowhere")
    _, url = proposal(served, "push", {"remote": "down"})
    tab.goto(url)
    assert "approving this push would most likely fail" in tab.locator("p.callout.sev-critical").first.inner_text()
    reach = tab.locator("ul.push-reach li").inner_text()
    assert reach.startswith("not reached") and f"127.0.0.1:{port} refused the connection" in reach, reach
    assert_clean(tab, "the proposal page of a push that cannot reach its remote")
