"""Dashboard benchmark: server-side render time of `/` and `/api/radar`, and index change → browser update.

    python bench/bench_dashboard.py [--repos 1000] [--runs 15] [--latency-runs 9] [--screenshot PNG]

Prints one JSON object (medians of several runs, plus every run). The index is filled with synthetic records
(copies of one real repo's record with varied state, `bench_scan.synthetic_index`) for speed. Render time is
measured in-process through Starlette's TestClient (the whole ASGI stack, security middleware included, no
socket); latency is measured end to end: a repo record is stored in the index, the server's SSE poller
notices the new generation, the page in headless Chromium re-fetches its fragment and patches the DOM.
`--screenshot` also saves the queue over the demo fleet (`fleetdeck demo`'s builder) as a PNG.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from bench.bench_scan import synthetic_index  # noqa: E402
from fleet.demo import build_demo_fleet  # noqa: E402
from fleet.discovery import Found  # noqa: E402
from fleet.index import open_index  # noqa: E402
from fleet.scan import scan  # noqa: E402
from web.app import create_app  # noqa: E402
from web.security import COOKIE, new_token  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def median_ms(samples: list[float]) -> dict:
    return {"median_ms": round(statistics.median(samples), 1), "runs_ms": [round(s, 1) for s in samples]}


def bench_render(db: Path, runs: int) -> dict:
    token = new_token()
    app = create_app(db, token)
    out = {}
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        client.cookies.set(COOKIE, token)
        for path in ("/", "/api/radar"):
            client.get(path)  # warm up: template compilation, first connection
            samples = []
            for _ in range(runs):
                start = time.perf_counter()
                response = client.get(path)
                samples.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200, (path, response.status_code)
            out[path] = median_ms(samples)
    return out


class ThreadedServer:
    """uvicorn in a background thread, on a free loopback port."""

    def __init__(self, app) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.sock = sock
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    def __enter__(self) -> "ThreadedServer":
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def bench_latency(db: Path, runs: int, size: int) -> dict:
    from playwright.sync_api import sync_playwright

    token = new_token()
    index = open_index(db)
    target = index.repo("r00000")
    found = Found(target["path"], f"{target['path']}/.git", f"{target['path']}/.git", False, target["root"])
    samples = []
    with ThreadedServer(create_app(db, token)) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.port}/?token={token}")
        page.wait_for_selector("#live-status.on")
        row = f'tr[data-repo-id="{target["id"]}"] .summary'
        for i in range(runs):
            record = dict(target, conflicted=10 + i)
            start = time.perf_counter()
            index.store_repo(found, record)
            page.wait_for_function(f"() => document.querySelector('{row}')?.textContent.includes('{10 + i} conflicted')",
                                   timeout=10000, polling="raf")
            samples.append((time.perf_counter() - start) * 1000)
            time.sleep(0.3)
        browser.close()
    index.close()
    return {"repos": size, "rows_on_page": 100, **median_ms(samples)}


def screenshot(path: Path, workdir: Path) -> None:
    from playwright.sync_api import sync_playwright

    demo = workdir / "demo"
    roots = build_demo_fleet(demo)
    db = demo / "fleet.db"
    with open_index(db) as index:
        scan(index, roots)
    token = new_token()
    with ThreadedServer(create_app(db, token)) as server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900}, device_scale_factor=1)
        page.goto(f"http://127.0.0.1:{server.port}/?token={token}")
        page.wait_for_selector("#live-status.on")
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--latency-runs", type=int, default=9)
    parser.add_argument("--screenshot", type=Path, help="also save the demo fleet's queue page as this PNG")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleetdeck-bench-dash-") as tmp:
        work = Path(tmp)
        sample_roots = build_demo_fleet(work / "sample")
        db = work / "dash.db"
        synthetic_index(db, args.repos, Path(sample_roots[0]) / "cli-tools")
        result = {
            "repos": args.repos,
            "render": bench_render(db, args.runs),
            "update_latency": bench_latency(db, args.latency_runs, args.repos),
            "targets": {"render_ms": 100, "update_latency_ms": 1000},
        }
        if args.screenshot:
            screenshot(args.screenshot, work)
            result["screenshot"] = str(args.screenshot)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
