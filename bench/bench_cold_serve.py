"""Cold serve: `fleetdeck serve ROOT` on an empty index over the realistic fleet, against the `git status` loop
and a cold `fleetdeck scan`, in the same run.

    python bench/bench_cold_serve.py [--repos 1000] [--runs 3] [--workdir bench/out] [--fleet DIR]

Per run, alternating so noise hits every side alike: the loop (`xargs -P2 git status` in every working tree),
a cold `fleetdeck scan` into a new index (wall and CPU of it and its children), and `fleetdeck serve ROOT
--port 0` into another new index, timed from its start (and the CPU it and its children had used by then,
from /proc): seconds until `/api/radar` (bearer token, plain HTTP
on 127.0.0.1) lists every repo the scan found — target ≤ 1.3× the loop's wall — and until
its `freshness.predictions` says every diverged repo's merge prediction is made (reported), and until
its `freshness.history` says every repo's reflog history is read too (target ≤ 2×, reported; the CPU used by
then is reported beside the loop's, the firmer figure on a loaded machine). Ratios are of
the medians. The index file is watched (read-only, every POLL_S) and `/api/radar` asked whenever it holds
every repo, or their history: asking the API over and over would load the server being timed (each answer
ranks the whole fleet). The 1-minute load average is recorded before and after (other work on the machine inflates
every figure, the ratios less). fleetdeck is byte-compiled first, as `pip install` leaves it
(`bench.common.byte_compile`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.bench_scan import time_loop  # noqa: E402
from bench.common import byte_compile  # noqa: E402
from bench.bench_warm import cold_scan, tree_cpu  # noqa: E402
from bench.realfleet import generate_realistic  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(PROJECT)}
POLL_S = 0.02


def _fresh(db: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".migrate.lock", ".watcher.lock"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def cold_serve(root: Path, db: Path, repos: int,
               deadline_s: float = 300) -> tuple[float, float, float, float, float]:
    """(seconds until /api/radar lists all `repos`, seconds until their history is read, from serve's start;
    CPU seconds serve and its descendants had used when every repo was listed; seconds until every merge
    prediction is made too, which follow the state with the history; CPU seconds used when the history was
    read)."""
    _fresh(db)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "fleet", "--db", str(db), "serve", str(root), "--port", "0"],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = ""
        while "Bearer " not in line:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("bench: serve did not start")
        base = line.split()[4].rsplit("/mcp", 1)[0]
        request = urllib.request.Request(f"{base}/api/radar?per_page=1",
                                         headers={"Authorization": f"Bearer {line.split()[-1]}"})
        every = predicted = None
        while time.perf_counter() - started < deadline_s:
            # cheap, off the server: the API is asked once it should say so
            stored, waiting, predicting = _index_state(db)
            if stored < repos or (every is not None and waiting and (predicted is not None or predicting)):
                time.sleep(POLL_S)
                continue
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    body = json.loads(response.read())
            except (urllib.error.URLError, ConnectionError):
                time.sleep(POLL_S)
                continue
            now = time.perf_counter() - started
            if every is None and body["total"] >= repos:
                every, cpu = now, tree_cpu(proc.pid)
            if every is not None and predicted is None and body["freshness"]["predictions"]["complete"]:
                predicted = now
            if predicted is not None and body["freshness"]["history"]["complete"]:
                return every, now, cpu, predicted, tree_cpu(proc.pid)
        raise SystemExit("bench: the cold serve never listed every repo with its history")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _fresh(db)


def _index_state(db: Path) -> tuple[int, bool, bool]:
    """(repos stored, whether a history backlog waits, whether a prediction backlog waits), read from the index
    file without taking any lock."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as conn:
            stored = conn.execute("select count(*) from repos where gone = 0").fetchone()[0]
            waiting = conn.execute("select 1 from meta where key = 'history_backlog'").fetchone() is not None
            predicting = conn.execute("select 1 from meta where key = 'prediction_backlog'").fetchone() is not None
    except sqlite3.Error:  # not created yet
        return 0, True, True
    return stored, waiting, predicting


def _med(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", default=str(PROJECT / "bench" / "out"))
    parser.add_argument("--fleet", help="an existing realistic fleet (else generated under the workdir)")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(args.fleet).resolve() if args.fleet else workdir / f"real-{args.repos}"
    fleet = generate_realistic(root, args.repos)
    trees = [*fleet["repos"], *fleet["worktrees"]]
    byte_compile()
    load_before = os.getloadavg()[0]
    time_loop(trees)  # warm the page cache for every side: git status reads the trees and indexes,
    warm = workdir / "cold-scan-warm.db"  # a scan the reflogs, refs and objects git status never opens
    _fresh(warm)
    cold_scan(root, warm)
    _fresh(warm)
    loops, scans, serves = [], [], []
    found = None
    for n in range(args.runs):
        loops.append(time_loop(trees))
        db = workdir / f"cold-scan-{n}.db"
        _fresh(db)
        scans.append(cold_scan(root, db))
        if found is None:  # what a scan lists is what the radar must list
            with contextlib.closing(sqlite3.connect(db)) as conn:
                found = conn.execute("select count(*) from repos where gone = 0").fetchone()[0]
        _fresh(db)
        serves.append(cold_serve(root, workdir / f"cold-serve-{n}.db", found))
        print(json.dumps({"loop": loops[-1], "scan": scans[-1], "serve": serves[-1]}), file=sys.stderr)
    loop_wall, loop_cpu = _med([w for w, _ in loops]), _med([c for _, c in loops])
    scan_wall, scan_cpu = _med([s[0] for s in scans]), _med([s[1] for s in scans])
    every, history = _med([s[0] for s in serves]), _med([s[1] for s in serves])
    every_cpu = _med([s[2] for s in serves])
    predicted = _med([s[3] for s in serves])
    history_cpu = _med([s[4] for s in serves])
    print(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "byte_compiled": True,
        "repos": args.repos, "repos_listed": found, "linked_worktrees": len(fleet["worktrees"]),
        "bare_mirrors": len(fleet["mirrors"]), "runs": args.runs,
        "git_status_loop_s": loop_wall, "git_status_loop_cpu_s": loop_cpu,
        "serve_every_repo_s": every, "serve_every_repo_vs_loop": round(every / loop_wall, 2),
        "serve_every_repo_cpu_s": every_cpu, "serve_every_repo_cpu_vs_loop_cpu": round(every_cpu / loop_cpu, 2),
        "serve_every_repo_vs_scan": round(every / scan_wall, 2),
        "serve_predictions_s": predicted, "serve_predictions_vs_loop": round(predicted / loop_wall, 2),
        "serve_history_s": history, "serve_history_vs_loop": round(history / loop_wall, 2),
        "serve_history_cpu_s": history_cpu, "serve_history_cpu_vs_loop_cpu": round(history_cpu / loop_cpu, 2),
        "scan_s": scan_wall, "scan_cpu_s": scan_cpu, "scan_vs_loop": round(scan_wall / loop_wall, 2),
        "scan_cpu_vs_loop_cpu": round(scan_cpu / loop_cpu, 2),
        "serve_runs": [[round(v, 3) for v in s] for s in serves],
        "loop_runs": [round(w, 3) for w, _ in loops], "scan_runs": [round(s[0], 3) for s in scans],
        "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }, indent=2))


if __name__ == "__main__":
    main()
