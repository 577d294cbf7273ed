"""Dashboard benchmark: server-side render time of `/` and `/api/radar`, and change → browser update.

    python bench/bench_dashboard.py [--repos 1000] [--runs 15] [--latency-runs 9] [--screenshot PNG]

Prints one JSON object (medians of several runs, plus every run). Render time uses an index filled with
synthetic records (copies of one real repo's record with varied state, `bench_scan.synthetic_index`),
measured in-process through Starlette's TestClient (the whole ASGI stack, security middleware included, no
socket). Latency is measured end to end the way a person sees it, over `--repos` real repositories
(`bench/fleetgen.py`): `fleetdeck serve` runs as a child process with its watcher; the bench commits in a
repo with the git CLI, and the clock stops when the queue page in headless Chromium shows the new ahead
count (watcher → index → SSE → fragment fetch → DOM patch). `--screenshot` also saves the queue over the
demo fleet (`fleetdeck demo`'s builder), served the same way, as a PNG.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from starlette.testclient import TestClient  # noqa: E402

from bench.bench_scan import synthetic_index  # noqa: E402
from bench.common import wait, watcher_meta  # noqa: E402
from bench.fleetgen import ENV as GIT_ENV  # noqa: E402
from bench.fleetgen import generate  # noqa: E402
from fleet.demo import build_demo_fleet  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.index.scan import scan  # noqa: E402
from fleet.ops import landing  # noqa: E402
from web.app import create_app  # noqa: E402
from web.security import new_token  # noqa: E402

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
        with open_index(db) as index:  # a landing code, traded as the link's page does: the cookie jar fills
            code = landing.issue(index)
        client.post("/session", json={"code": code}, headers={"Origin": "http://127.0.0.1:8765"})
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






@contextlib.contextmanager
def served(db: Path, roots: list[str]) -> Iterator[str]:
    """`fleetdeck serve ROOTS` (watcher included) as a child process, until its watcher has caught up;
    yields the dashboard link it printed (its landing code works once). Stopped with SIGTERM (it must exit 0)."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.Popen([sys.executable, "-m", "fleet", "--db", str(db), "serve", *roots, "--port", "0"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        if "http://" not in line:
            raise SystemExit(f"bench: serve did not start: {line!r}")
        wait(lambda: watcher_meta(db).get("pid") == proc.pid and watcher_meta(db).get("backlog") == 0, 900,
             "the watcher inside serve to catch up")
        yield line.split()[-1]
        proc.send_signal(signal.SIGTERM)
        if proc.wait(timeout=30) != 0:
            raise SystemExit(f"bench: serve exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def bench_latency(work: Path, runs: int, size: int) -> dict:
    """Commit in an ahead-of-upstream repo; time until the queue row in the browser shows the new count."""
    from playwright.sync_api import sync_playwright

    root = work / "fleet"
    repos = generate(root, size)
    db = work / "latency.db"
    started = time.perf_counter()
    with open_index(db) as index:
        scan(index, [str(root)])
    scanned_s = time.perf_counter() - started
    target = repos[4]  # fleetgen: every fifth repo tracks an upstream it is 1 commit ahead of
    samples = []
    with served(db, [str(root)]) as url, sync_playwright() as pw:
        with open_index(db) as index:
            repo_id = index.repo(str(target))["id"]
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url)
        page.wait_for_url(lambda u: "code=" not in u)  # the landing page traded its code
        page.goto(url.split("/?")[0] + f"/?q={target.name}")
        page.wait_for_selector("#live-status.on")
        cell = f'tr[data-repo-id="{repo_id}"] .ahead'
        ahead = int(page.inner_text(cell).lstrip("↑"))
        for i in range(runs):
            (target / "src" / "module3.py").write_text(f"run {i}\n")
            subprocess.run(["git", "-C", str(target), "commit", "-q", "-am", f"bench {i}"], check=True, env=GIT_ENV)
            start = time.perf_counter()
            ahead += 1
            page.wait_for_function(f"() => document.querySelector('{cell}')?.textContent === '↑{ahead}'",
                                   timeout=10000, polling="raf")
            samples.append((time.perf_counter() - start) * 1000)
            time.sleep(0.5)
        browser.close()
    return {"repos": size, "real_repos_watched": True, "initial_scan_s": round(scanned_s, 2), **median_ms(samples)}


def screenshot(path: Path, workdir: Path) -> None:
    from playwright.sync_api import sync_playwright

    demo = workdir / "demo"
    roots = build_demo_fleet(demo)
    with served(demo / "fleet.db", roots) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900}, device_scale_factor=1)
        page.goto(url)
        page.wait_for_url(lambda u: "code=" not in u)  # the landing page traded its code
        page.wait_for_selector("#live-status.on")
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--latency-runs", type=int, default=9, help="0: render times only (no fleet, no browser)")
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
            "update_latency": bench_latency(work, args.latency_runs, args.repos) if args.latency_runs else None,
            "targets": {"render_ms": 100, "update_latency_ms": 1000},
        }
        if args.screenshot:
            screenshot(args.screenshot, work)
            result["screenshot"] = str(args.screenshot)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
