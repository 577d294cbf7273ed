"""Every dashboard page, in light and in dark, free of axe-core WCAG 2.1 A/AA findings.

The pages come from the app's own route listing, not from a list kept here: a new page without path
parameters is checked as it is; a new page with parameters fails `test_every_page_has_axe_coverage` until
VISITS says which instances to open. The fleet is `tests/fleetstates.py` (one repo in each state git can be
in) served by a real `fleetdeck serve`."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Callable

import pytest
from starlette.routing import Route

from fleet.index.recheck import RECHECK_DELAY_ENV
from fleet.index.store import open_index
from tests.browser.axe import assert_clean, assert_none, preload, report, violations
from tests.browser.conftest import sign_in_tab
from tests.browser.test_dashboard_browser import watcher_backlog
from tests.fleets.cli import run_cli
from tests.fleets.every_state import build_fleet
from tests.fleets.gitbuild import commit_file, git
from tests.fleets.serving import Server, wait_for
from tests.test_warm_start import scanned_dashboard_fleet
from fleet.ops import service
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from web.app import routes
from web.guards import API_PREFIXES
from web.pages import PAGES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCHEMES = ("light", "dark")
NOT_PAGES = (*API_PREFIXES, "/fragments/", "/static")
REPO_STATES = ("merging", "rebasing", "detached", "worktrees", "super", "empty", "stashes", "dirty", "branches",
               "history", "bare", "broken")

Fleet = tuple[Server, object, dict]
Visit = Callable[[Fleet], str]


def page_routes() -> list[Route]:
    """The dashboard's HTML pages: every GET route that is not the API, a fragment or a static file."""
    return [r for r in routes() if isinstance(r, Route) and "GET" in (r.methods or ())
            and not r.path.startswith(NOT_PAGES)]


def repo_visit(state: str) -> Visit:
    return lambda fleet: f"/repos/{fleet[1].repo(str(fleet[2][state].resolve()))['id']}"


# Pages with path parameters, and pages worth opening in more than one state: route name -> {label: visit}.
VISITS: dict[str, dict[str, Visit]] = {
    "queue": {"all": lambda f: "/", "no-match": lambda f: "/?q=no-such-repository-anywhere",
              "attention": lambda f: "/?attention=1&reason=conflict"},
    "repo": {state: repo_visit(state) for state in REPO_STATES},
    "proposal": {"pending-stage": lambda f: f"/proposals/{f[2]['proposals']['stage']}",
                 "pending-discard": lambda f: f"/proposals/{f[2]['proposals']['discard']}",
                 "undone": lambda f: f"/proposals/{f[2]['proposals']['undone']}",
                 "repo-code": lambda f: f"/proposals/{f[2]['proposals']['repo_code']}",
                 "pending-plan": lambda f: f"/proposals/{f[2]['proposals']['plan']}",
                 "pending-checkout": lambda f: f"/proposals/{f[2]['proposals']['checkout']}"},
    "proposal_patch": {},  # the whole patch as text/plain: no HTML to check
    "snapshot": {"previous": lambda f: _snap(f, "found"), "now": lambda f: _snap(f, "found", "?against=now"),
                 "oldest": lambda f: _snap(f, "kept")},
    "snapshot_restore_confirm": {"all": lambda f: _snap(f, "kept", "/restore"),
                                 "one-file": lambda f: _snap(f, "kept", "/restore?path=README.md")},
    "snapshot_diff_text": {},  # the diff as text/plain: no HTML to check
    "digest": {"events": lambda f: "/digest?since=custom&custom=2025-01-01T00:00:00%2B00:00",  # gitbuild's clock
               "bad-form": lambda f: "/digest?since=custom"},
}
# Pages no route names: the error page and the refusal a browser without the cookie gets.
EXTRA = {"error-404-repo": lambda f: "/repos/987654321", "error-404-path": lambda f: "/no/such/page"}


def _snap(fleet: Fleet, which: str, rest: str = "") -> str:
    """A page of one of the snapshots `_discarded` took of the `history` repo."""
    return f"{repo_visit('history')(fleet)}/snapshots/{fleet[2]['snapshots'][which]}{rest}"


def visits() -> list:
    found = []
    for route in page_routes():
        chosen = VISITS.get(route.name) or ({} if route.param_convertors else {"page": lambda f, p=route.path: p})
        found += [pytest.param(visit, id=f"{route.name}-{label}") for label, visit in chosen.items()]
    found += [pytest.param(visit, id=label) for label, visit in EXTRA.items()]
    return found


def test_every_page_has_axe_coverage() -> None:
    missing = [r.path for r in page_routes() if r.param_convertors and r.name not in VISITS]
    assert not missing, f"pages with path parameters need entries in VISITS (which instances to check): {missing}"
    names = {r.name for r in page_routes()}
    assert {page.name for page in PAGES} <= names and {"queue", "repo", "digest", "agents"} <= names
    assert set(VISITS) <= names, f"VISITS names routes that no longer exist: {set(VISITS) - names}"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("a11y-fleet")
    repos = build_fleet(base / "root", base / "side")
    for name, age_s in (("dirty", 0), ("ahead", 300)):  # agents on the agents page and in the queue: one
        trace = repos[name] / ".aider.chat.history.md"  # working now, one recently active (written before serve
        trace.write_text("\n# aider chat started at 2026-05-01 10:00:00\n\n#### a question\n\nSure.\n")
        os.utime(trace, (time.time() - age_s,) * 2)  # starts: its first presence refresh finds them, no 5 s wait)
    server = Server(base / "fleet.db", [base / "root"])
    index = open_index(base / "fleet.db")
    wanted = [str(p.resolve()) for p in repos.values()]
    wait_for(lambda: all(index.repo(p) for p in wanted) and watcher_backlog(index) == 0, "the first read", 60)
    wait_for(lambda: {r[0] for r in index.conn.execute("select state from presence")} == {"working", "recent"},
             "both aider traces", 30)
    # Pending proposals for the proposal pages: a low-risk one and a high-risk one (second confirmation shown).
    dirty = str(repos["dirty"])
    repos = {**repos, "proposals": {
        "stage": service.propose(index, "claude-code", "stage", dirty, {"paths": ["tracked.txt"]},
                                 "stage the edit", declared="cursor")["proposal_id"],  # an agent note: declared
        "discard": service.propose(index, "unknown:codex", "discard", dirty, {"paths": ["tracked.txt"]},
                                   "drop the edit", declared="codex")["proposal_id"],  # and: no credential
        "undone": _undone(index, str(repos["branches"])),
        "repo_code": _with_repo_code(index, repos["ahead"]),
        "plan": service.propose(index, "codex", "plan", dirty, {"steps": [
            {"op": "stage", "args": {"paths": ["tracked.txt"]}},
            {"op": "commit", "args": {"message": "a subject\n\nand a body"}}]}, "commit the edit")["proposal_id"],
        "checkout": _over_ignored(index, repos["stashes"])},
        "snapshots": _discarded(base / "fleet.db", repos["history"])}
    yield server, index, repos
    index.close()
    server.stop()


def _with_repo_code(index, repo) -> str:
    """A proposal in a repository defining a hook and a filter: its page lists the repository's code."""
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write('[filter "strip"]\n\tclean = cat\n')
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("*.ipynb filter=strip\n")
    return service.propose(index, "claude-code", "branch", str(repo), {"name": "a11y-hooked"},
                           "a branch where the repository defines code")["proposal_id"]


def _over_ignored(index, repo) -> str:
    """A checkout that would overwrite an excluded `.env`: its page marks the file among those it writes."""
    git(repo, "checkout", "-q", "-b", "a11y-env")
    (repo / ".env").write_text("SECRET=branch\n")
    git(repo, "add", "-f", ".env")
    git(repo, "commit", "-q", "-m", "track .env", "--", ".env")
    git(repo, "checkout", "-q", "-")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    with open(repo / ".git" / "info" / "exclude", "a", encoding="utf-8") as fh:
        fh.write(".env\n")
    (repo / ".env").write_text("SECRET=mine\n")
    return service.propose(index, "claude-code", "checkout", str(repo), {"ref": "a11y-env"},
                           "switch to the branch that tracks .env")["proposal_id"]


def _discarded(db, repo) -> dict:
    """Work discarded in the `history` repo (an edit and an untracked file, then reset --hard and clean): its
    Timeline shows the discard, and its snapshots have pages."""
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    (repo / "README.md").write_text("an unsaved edit\n")
    (repo / "scratch.txt").write_text("untracked notes\n")
    kept = take(tree, db, "hook:claude-code", agents=["claude-code"], command="git reset --hard")
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-q", "-f")
    return {"kept": kept["id"], "found": take(tree, db, "sweep")["id"]}


def _undone(index, repo: str) -> str:
    """A branch proposal that ran and was undone: its page shows the undone state."""
    made = service.propose(index, "claude-code", "branch", repo, {"name": "a11y-undone"}, "made, then undone")
    service.approve(index, made["proposal_id"], "cli")
    service.undo(index, made["proposal_id"], "cli")
    return made["proposal_id"]


NARROW = {"width": 390, "height": 844}  # a phone: tables and the chart scroll sideways


@pytest.fixture(scope="module")
def contexts(browser, fleet):
    """One signed-in browser context per colour scheme (the access link sets the cookie once), its first tab
    the one the checks visit their pages in (`tabs`)."""
    made = {}
    for scheme in SCHEMES:
        made[scheme] = browser.new_context(color_scheme=scheme)
        preload(made[scheme])
        sign_in_tab(made[scheme].new_page(), fleet[0])
    yield made
    for context in made.values():
        context.close()


@pytest.fixture
def tabs(contexts):
    """`tabs(scheme)` is that scheme's tab (checked: the browser really prefers it), left on a blank page after
    the test with its first viewport: each visit is a new document, as in a new tab, without the renderer a new
    tab starts (~0.35 s of each check)."""
    used = {}

    def open_tab(scheme: str):
        tab = contexts[scheme].pages[0]
        used[scheme] = (tab, tab.viewport_size)
        assert tab.evaluate(f"matchMedia('(prefers-color-scheme: {scheme})').matches")
        return tab

    yield open_tab
    for tab, size in used.values():
        tab.goto("about:blank")
        if tab.viewport_size != size:
            tab.set_viewport_size(size)


def visit_and_settle(tab, server: Server, path: str) -> None:
    response = tab.goto(server.base + path)
    assert response.headers["content-type"].startswith("text/html"), f"{path}: not the site's page"
    settle(tab)


def settle(tab) -> None:
    """Wait until the page script has run and, on a live page, the event stream is connected."""
    tab.wait_for_function("() => document.documentElement.classList.contains('js') && "
                          "(!document.querySelector('main[data-live]') || "
                          "document.querySelector('#live-status.on'))")


@pytest.fixture(scope="module")
def in_both_schemes(contexts, fleet) -> Callable[[str], dict[str, list[dict]]]:
    """`in_both_schemes(path)`: axe's findings on the page at `path` in each scheme, from one visit (~0.45 s
    of each pair of checks): checked, its colour scheme switched (the browser's emulated preference, checked
    as `tabs` checks it), checked again. The same check as a page opened in that scheme: the stylesheet's
    `prefers-color-scheme` rules and the `color-scheme` property apply at once, and no script reads the
    scheme (`test_no_script_reads_the_colour_scheme`). Remembered per path: both schemes' tests ask."""
    found: dict[str, dict[str, list[dict]]] = {}

    def check(path: str) -> dict[str, list[dict]]:
        if path not in found:
            tab = contexts["light"].pages[0]
            visit_and_settle(tab, fleet[0], path)
            try:
                seen = {}
                for scheme in SCHEMES:
                    tab.emulate_media(color_scheme=scheme)
                    assert tab.evaluate(f"matchMedia('(prefers-color-scheme: {scheme})').matches")
                    seen[scheme] = violations(tab)
                found[path] = seen
            finally:
                tab.emulate_media(color_scheme="light")
                tab.goto("about:blank")
        return found[path]

    return check


def test_no_script_reads_the_colour_scheme() -> None:
    """What lets `in_both_schemes` switch a loaded page: the scheme is the stylesheet's alone. A script that
    read it (matchMedia, a `prefers-color-scheme` query) could draw a page loaded in dark unlike one switched."""
    scripts = sorted((Path(__file__).parents[2] / "web" / "static").glob("*.js"))
    assert scripts
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        assert "matchMedia" not in text and "prefers-color-scheme" not in text, script


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("visit", visits())
def test_page_has_no_axe_violations(in_both_schemes, fleet, visit, scheme) -> None:
    path = visit(fleet)
    assert_none(in_both_schemes(path)[scheme], f"{path} in the {scheme} scheme")


@pytest.mark.parametrize("label", ["queue-all", "repo-worktrees", "repo-super", "digest-events", "agents-page"])
def test_narrow_page_has_no_axe_violations(tabs, fleet, label) -> None:
    """On a phone-sized screen the wide tables and the chart scroll: they must be reachable by keyboard."""
    visit = next(p.values[0] for p in visits() if p.id == label)
    tab, path = tabs("dark"), visit(fleet)
    tab.set_viewport_size(NARROW)
    visit_and_settle(tab, fleet[0], path)
    assert_clean(tab, f"{path} on a narrow screen")


def test_the_check_finds_violations(tabs, fleet) -> None:
    """The harness can fail: faint text and an unnamed image on a real page are reported, readably."""
    tab = tabs("light")
    visit_and_settle(tab, fleet[0], "/")
    tab.evaluate("""() => {
        const p = document.createElement('p'); p.textContent = 'faint'; p.style.color = '#d0d0d0';
        const img = document.createElement('img'); img.src = '/static/favicon.svg';
        document.querySelector('main').append(p, img);
    }""")
    found = violations(tab)
    assert {"color-contrast", "image-alt"} <= {v["id"] for v in found}
    text = report(found)
    assert "color-contrast (serious)" in text and "faint" in text and "Element has insufficient" in text


@pytest.mark.parametrize("scheme", SCHEMES)
def test_refusal_page_has_no_axe_violations(browser, fleet, scheme) -> None:
    context = browser.new_context(color_scheme=scheme)  # no cookie: refused
    try:
        tab = context.new_page()
        assert tab.goto(fleet[0].base + "/").status == 401
        assert_clean(tab, f"the 401 refusal in the {scheme} scheme")
    finally:
        context.close()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_queue_after_a_live_update_has_no_axe_violations(tabs, fleet, scheme) -> None:
    """The patched fragment (rows marked `updated`, mid-animation) is checked, not just the first render."""
    server, _index, repos = fleet
    tab = tabs(scheme)
    visit_and_settle(tab, server, "/")
    tab.evaluate("window.__patched = 0; document.addEventListener('fleetdeck:patched', () => window.__patched++)")
    commit_file(repos["ahead"], f"live-{scheme}.txt", "x\n", f"a live commit ({scheme})")
    tab.wait_for_function("() => window.__patched > 0 && document.querySelector('#queue-live tr.updated')",
                          timeout=10000)
    assert_clean(tab, f"the queue after a live update in the {scheme} scheme")
    tab.wait_for_function("() => document.getAnimations().length === 0")  # the highlight has faded: the resting
    # colours too (its 1.2 s animation over, waited for rather than slept past)
    assert_clean(tab, f"the queue after the update's highlight faded in the {scheme} scheme")


@pytest.fixture(scope="module")
def digest_report(fleet, tmp_path_factory) -> Path:
    """`fleetdeck digest --format html` of the fleet, written once: the schemes only change how it is shown."""
    out, db = tmp_path_factory.mktemp("a11y-digest") / "digest.html", fleet[0].db
    run_cli("digest", "--since", "2025-01-01T00:00:00+00:00", "--format", "html", "--out", str(out), db=db,
            check=True)
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
def test_html_digest_report_has_no_axe_violations(browser, digest_report, scheme) -> None:
    """`fleetdeck digest --format html` (mailed or opened from disk) shares the chart partial with /digest."""
    context = browser.new_context(color_scheme=scheme)
    try:
        tab = context.new_page()
        tab.goto(digest_report.as_uri())
        assert tab.locator("svg.chart rect.cell").count() > 0
        assert_clean(tab, f"the HTML digest report in the {scheme} scheme")
    finally:
        context.close()


@pytest.fixture(scope="module")
def recheck_seen(browser, tmp_path_factory) -> tuple[int, dict[str, dict[str, tuple]]]:
    """`serve` on a known fleet, its start-up re-check watched from a tab in each scheme at once: (the fleet's
    repo count, per scheme what its tab showed while the re-check ran — the banner's role, aria-live, text
    and axe's findings — and once it was done). The re-check is held back through the real path until both
    tabs have been looked at (hold_back's release file), so it is surely running then, however loaded the
    machine, and ends as soon as it may."""
    base = tmp_path_factory.mktemp("a11y-warm")
    _repos, db = scanned_dashboard_fleet(base)
    release = base / "the re-check may go on"
    os.environ[RECHECK_DELAY_ENV] = f"120:{release}"
    try:
        server = Server(db, [])
    finally:
        del os.environ[RECHECK_DELAY_ENV]
    contexts = {scheme: browser.new_context(color_scheme=scheme) for scheme in SCHEMES}
    for context in contexts.values():
        preload(context)
    try:
        with open_index(db) as index:
            total = index.count()
            def claimed() -> bool:  # the watcher's claim, with the re-check's total: the banner's first text
                meta = index.meta("watcher") or {}
                return meta.get("pid") == server.proc.pid and bool((meta.get("reverify") or {}).get("total"))
            wait_for(claimed, "the watcher's claim", 60)
        tabs = {scheme: context.new_page() for scheme, context in contexts.items()}
        for tab in tabs.values():
            sign_in_tab(tab, server)
            settle(tab)
        seen: dict[str, dict[str, tuple]] = {}
        for scheme, tab in tabs.items():
            banner = tab.locator("#reverify")
            seen[scheme] = {"running": (banner.get_attribute("role"), banner.get_attribute("aria-live"),
                                        banner.inner_text(), violations(tab))}
        release.touch()
        for scheme, tab in tabs.items():
            tab.wait_for_function("() => document.getElementById('reverify').textContent"
                                  ".includes('Re-check finished')", timeout=120_000)
            seen[scheme]["done"] = (tab.locator("#reverify").inner_text(), violations(tab))
        yield total, seen
    finally:
        release.touch()
        for context in contexts.values():
            context.close()
        server.stop()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_recheck_banner_has_no_axe_violations_while_it_runs_and_when_it_is_done(recheck_seen, scheme) -> None:
    """`serve` on a known fleet: the first page shows the re-check's progress in a polite status region; the
    stream moves it live to "finished". Both states are checked."""
    total, seen = recheck_seen
    role, live, text, found = seen[scheme]["running"]
    assert role == "status" and live == "polite"
    assert re.match(r"Re-checking [\d,]+ of [\d,]+ repos — figures shown are from ", text)
    assert_none(found, f"the queue with the re-check running in the {scheme} scheme")
    text, found = seen[scheme]["done"]
    assert text.startswith(f"Re-check finished: all {total} repos read again")
    assert_none(found, f"the queue after the re-check finished in the {scheme} scheme")
