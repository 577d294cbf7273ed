"""Warm start: `fleetdeck serve` over an index that already holds the fleet (the realistic profile).

    python bench/bench_warm.py [--repos 1000] [--runs 3] [--workdir bench/out] [--fleet DIR]

Per run: a cold `fleetdeck scan` into a new index (timed), then `fleetdeck serve` on it as a child process:
seconds from the start of `serve` until `/` answers 200 with the queue (bearer token, plain HTTP on
127.0.0.1) — target ≤ 1 s —, whether that first page already shows the re-check's progress banner, and
seconds until the watcher's start-up re-check of the whole fleet is finished (`reverify.finished_at` in its
`meta` record; the `done` counts it reports on the way are the progress the dashboard shows), seconds until
the watcher is live (`live_at`: its watch set is up and every repo the re-check read before that is checked
against its watch mark, so from then on no change is missed), with the CPU
`serve` and its children used in all (its start-up, MCP bridge, audit check and shutdown included), the CPU
they had used when the re-check finished (`serve` and its live and finished descendants, from /proc: the
work inside the timed window), and the slowest `/` asked for every second during the last run's re-check. The re-check against the cold scan:
target ≤ 0.7 (wall; beside it against the CPU, and against the scan's own `elapsed_s`, which leaves out the
CLI process's start and exit). `--fleet` uses an existing realistic fleet instead of generating one under
the workdir. Prints JSON with medians.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.bench_scan import children_cpu  # noqa: E402
from bench.common import wait, watcher_meta  # noqa: E402
from bench.realfleet import generate_realistic  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(PROJECT)}


def page_request(mcp_line: str) -> urllib.request.Request:
    """A request for `/` with the bearer token `serve` prints on its "MCP over HTTP: <base>/mcp with
    Authorization: Bearer <token>" line (the landing link is for a browser's script, and single-use)."""
    words = mcp_line.split()
    parts = urllib.parse.urlsplit(next(w for w in words if w.startswith("http://")))
    return urllib.request.Request(f"{parts.scheme}://{parts.netloc}/", headers={"Authorization": f"Bearer {words[-1]}"})


def first_page(mcp_line: str, deadline_s: float = 120) -> tuple[float, str]:
    """Poll `/` until it answers 200; returns when it did (time.perf_counter()) and the page."""
    request = page_request(mcp_line)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = response.read()
                if response.status == 200 and body:
                    return time.perf_counter(), body.decode("utf-8", "replace")
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.02)
    raise SystemExit("bench: the dashboard never answered")


def cold_scan(root: Path, db: Path) -> tuple[float, float, float]:
    """A cold `fleetdeck scan` into `db`: (wall, CPU of it and its children, the scan's own `elapsed_s`, which
    leaves out the process's start and exit)."""
    cpu, start = children_cpu(), time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "fleet", "--db", str(db), "scan", str(root), "--json"], env=ENV,
                         check=True, capture_output=True, text=True)
    return time.perf_counter() - start, children_cpu() - cpu, json.loads(run.stdout)["elapsed_s"]


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by process `pid` and its descendants, live ones included (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # after the command: state, ppid, ..., utime (12th), stime, cutime, cstime
            stats[int(entry)] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / tick)
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += stats.get(current, (0, 0.0))[1]
        todo += [child for child, (parent, _cpu) in stats.items() if parent == current]
    return total


def warm_run(root: Path, db: Path, probe: bool) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "fleet", "--db", str(db), "serve", "--port", "0"], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = ""
        # readline, not select: serve's first lines come in one write, and select cannot see the ones
        # already in the pipe reader's buffer (it waited its whole minute for the third); a serve that
        # prints nothing for a minute is killed, which ends the read
        watchdog = threading.Timer(60, proc.kill)
        watchdog.start()
        try:
            while "MCP over HTTP" not in line:
                line = proc.stdout.readline()
                if not line:
                    raise SystemExit("bench: serve did not start")
        finally:
            watchdog.cancel()
        page_at, page = first_page(line)
        request = page_request(line)
        progress: list[int] = []
        pages: list[float] = []
        asked = [time.perf_counter()]
        seen: dict[str, tuple[float, float]] = {}  # "done" / "live": (when first seen, the tree's CPU then)

        def caught_up() -> bool:
            meta = watcher_meta(db)
            check = meta.get("reverify") or {}
            if meta.get("pid") != proc.pid or not check:
                return False
            progress.append(check["done"])
            for what, stamp in (("done", check.get("finished_at")), ("live", meta.get("live_at"))):
                if stamp is not None and what not in seen:
                    seen[what] = (time.perf_counter(), tree_cpu(proc.pid))
            if len(seen) == 2:
                return True
            if probe and time.perf_counter() - asked[0] >= 1.0:  # a person looking at the page meanwhile
                asked[0] = time.perf_counter()
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
                pages.append(time.perf_counter() - asked[0])
            return False
        wait(caught_up, 900, "the watcher inside serve to re-check the fleet and go live", step=0.05)
        done_at, window_cpu = seen["done"]
        live_at = seen["live"][0]
    finally:
        proc.send_signal(signal.SIGTERM)
        _pid, status, usage = os.wait4(proc.pid, 0)  # serve stops within seconds; its CPU and its children's
        proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return {"first_page_s": page_at - started, "reverified_s": done_at - started, "live_s": live_at - started,
            "serve_cpu_s": cpu,
            "reverify_window_cpu_s": window_cpu,
            "slowest_page_during_s": max(pages, default=None), "pages_during": len(pages),
            "first_page_shows_progress": "Re-checking " in page, "progress_seen": len(set(progress)) > 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", default=str(PROJECT / "bench" / "out"))
    parser.add_argument("--fleet", help="an existing realistic fleet of --repos repos (not written to)")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(args.fleet).resolve() if args.fleet else workdir / f"real-{args.repos}"
    if not args.fleet:
        generate_realistic(root, args.repos)
    colds, warms = [], []
    for n in range(args.runs):
        db = workdir / f"warm-{os.getpid()}-{n}.db"
        colds.append(cold_scan(root, db))
        warms.append(warm_run(root, db, probe=n == args.runs - 1))
        for suffix in ("", "-wal", "-shm", ".migrate.lock"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    cold = statistics.median(c[0] for c in colds)
    cold_cpu = statistics.median(c[1] for c in colds)
    cold_elapsed = statistics.median(c[2] for c in colds)
    reverify = statistics.median(w["reverified_s"] for w in warms)
    reverify_cpu = statistics.median(w["serve_cpu_s"] for w in warms)
    print(json.dumps({
        "repos": args.repos, "profile": "realistic", "cold_scan_s": round(cold, 2), "cold_scan_cpu_s": round(cold_cpu, 2),
        "first_page_s": round(statistics.median(w["first_page_s"] for w in warms), 3),
        "cold_scan_elapsed_s": round(cold_elapsed, 2),
        "reverify_s": round(reverify, 2), "reverify_vs_cold": round(reverify / cold, 2),
        "live_s": round(statistics.median(w["live_s"] for w in warms), 2),
        "reverify_vs_cold_elapsed": round(reverify / cold_elapsed, 2),
        "reverify_cpu_s": round(reverify_cpu, 2), "reverify_vs_cold_cpu": round(reverify_cpu / cold_cpu, 2),
        "reverify_window_cpu_s": round(statistics.median(w["reverify_window_cpu_s"] for w in warms), 2),
        "reverify_window_vs_cold_cpu": round(statistics.median(w["reverify_window_cpu_s"] for w in warms) / cold_cpu, 2),
        "slowest_page_during_s": max((w["slowest_page_during_s"] or 0) for w in warms),
        "first_page_shows_progress": all(w["first_page_shows_progress"] for w in warms),
        "progress_shown": all(w["progress_seen"] for w in warms),
        "runs": [{k: round(v, 3) if isinstance(v, float) else v for k, v in w.items()} for w in warms],
        "targets": {"first_page_s": 1.0, "reverify_vs_cold": 0.7}}, indent=2))


if __name__ == "__main__":
    main()
