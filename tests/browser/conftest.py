"""Browser fixtures: headless Debian Chromium through Playwright, and a real `fleetdeck serve` subprocess.

Without /usr/bin/chromium the browser tests are skipped with the reason shown, except under `CI=true`,
where a missing browser is a failure (CI must run them).
"""

from __future__ import annotations

import os

import pytest

from tests.fleets.serving import Server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def _require_chromium() -> None:
    if os.path.exists(CHROMIUM):
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium package to run the browser tests"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: browser tests must run)")
    pytest.skip(message)


def sign_in_tab(tab, server: Server, path: str = "/") -> None:
    """Open a fresh dashboard link in `tab` and wait until its script has traded the code."""
    tab.goto(server.link(path))
    tab.wait_for_url(lambda url: "code=" not in url)


@pytest.fixture(scope="package")
def playwright_instance():
    """Package-scoped: Playwright's sync API keeps an asyncio loop running on the main thread until it stops,
    which would break every asyncio test (the MCP ones) collected after this package."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright_instance):
    instance = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield instance
    instance.close()


@pytest.fixture
def page(browser, served):
    """A tab signed in to the module's `served` (server, index, fleet) dashboard: a fresh link's landing
    page trades its code for the session and the decision key, then goes to the clean URL; the context is
    closed after the test."""
    server = served[0]
    context = browser.new_context()
    tab = context.new_page()
    sign_in_tab(tab, server)
    yield tab
    context.close()
