"""Browser fixtures: headless Debian Chromium through Playwright, and a real `fleetdeck serve` subprocess.

Without /usr/bin/chromium the browser tests are skipped with the reason shown, except under `CI=true`,
where a missing browser is a failure (CI must run them).
"""

from __future__ import annotations

import os
import select
import subprocess
from pathlib import Path

import pytest

from tests.conftest import fleetdeck_argv, fleetdeck_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
START_TIMEOUT_S = 60


def _require_chromium() -> None:
    if os.path.exists(CHROMIUM):
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium package to run the browser tests"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: browser tests must run)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def playwright_instance():
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def browser(playwright_instance):
    instance = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield instance
    instance.close()


class Server:
    """A `fleetdeck serve` child process; `url` is the printed access link (with its token)."""

    def __init__(self, db: Path, roots: list[Path], extra: list[str] | None = None) -> None:
        argv = fleetdeck_argv("--db", str(db), "serve", *map(str, roots), "--port", "0", *(extra or []))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=fleetdeck_env())
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if "http://" not in line:
            self.stop()
            raise AssertionError(f"serve did not start: {line!r} {self.proc.stderr.read()}")
        self.url = line.split()[-1]
        self.base = self.url.split("/?", 1)[0]
        self.token = self.url.split("token=", 1)[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
