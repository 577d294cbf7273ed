"""Regenerate the README's screenshots (docs/dashboard.png, docs/proposal.png) from `fleetdeck demo`.

    python docs/make_screenshots.py [--chromium /usr/bin/chromium]

Runs the real demo (its fleet in a temp folder, deleted when it stops), opens the access link it prints in
headless Chromium through Playwright, waits until the queue is live and the demo's agents are shown, and
takes the queue and one pending proposal's page. Nothing is drawn by hand, so the pictures never go stale.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEWPORT = {"width": 1360, "height": 860}


def start_demo() -> tuple[subprocess.Popen, str]:
    """`fleetdeck demo` on a free port; returns the process and the access link it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "fleet", "demo", "--port", "0"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("fleetdeck dashboard: "):
            return proc, line.split(": ", 1)[1].strip()
    raise SystemExit(f"the demo stopped before serving (exit {proc.wait()})")


def shoot(url: str, chromium: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT, color_scheme="light")
        page.goto(url)
        page.wait_for_selector("#live-status.on")
        page.wait_for_selector("td.agents .agent", timeout=60_000)  # the watcher found the demo's agents
        page.wait_for_selector("td.next a[href^='/proposals/']", timeout=60_000)
        page.screenshot(path=str(ROOT / "docs" / "dashboard.png"))
        page.click("td.next a[href^='/proposals/']")
        page.wait_for_selector("#approve-button")
        page.screenshot(path=str(ROOT / "docs" / "proposal.png"))
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium to drive")
    args = parser.parse_args()
    proc, url = start_demo()
    try:
        shoot(url, args.chromium)
    finally:
        proc.send_signal(signal.SIGINT)  # the demo deletes its fleet on the way out
        proc.wait(timeout=60)
    print("wrote docs/dashboard.png and docs/proposal.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
