"""Run every fleetdeck benchmark, one after another, and print the README's performance table.

    python bench/run_all.py [--quick] [--out bench/results.json]

Each script runs in its own process (so one's caches and threads never touch another's numbers) and prints
JSON; this collects them into one file and renders the Markdown rows the README carries. `--quick` runs
fewer repetitions (for a smoke check, not for the README).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPTS = {
    "scan": (["bench_scan.py", "--profiles", "realistic,simple", "--sizes", "1000", "--query-sizes", "1000,10000",
              "--runs", "5"],
             ["--runs", "1", "--sizes", "40", "--query-sizes", "1000"]),
    "floor": (["bench_floor.py", "--repos", "1000", "--runs", "5"], ["--runs", "1", "--repos", "40"]),
    "scan_10000": (["bench_scan.py", "--profiles", "simple", "--sizes", "10000", "--query-sizes", "", "--runs", "3"],
                   ["--runs", "1", "--sizes", "2000"]),
    "watcher": (["bench_watcher.py", "--rounds", "3"], ["--rounds", "1", "--repos", "200"]),
    "watcher_10000": (["bench_watcher.py", "--repos", "10000", "--rounds", "3", "--digest-runs", "3"],
                      ["--rounds", "1", "--repos", "2000"]),
    "warm": (["bench_warm.py", "--repos", "1000", "--runs", "3"], ["--runs", "1", "--repos", "40"]),
    "cold_serve": (["bench_cold_serve.py", "--repos", "1000", "--runs", "5"], ["--runs", "1", "--repos", "40"]),
    "presence": (["bench_presence.py", "--runs", "7"], ["--runs", "3"]),
    "dashboard": (["bench_dashboard.py", "--runs", "15", "--latency-runs", "9"],
                  ["--runs", "3", "--latency-runs", "3", "--repos", "200"]),
    "dashboard_10000": (["bench_dashboard.py", "--repos", "10000", "--runs", "9", "--latency-runs", "5"],
                        ["--runs", "3", "--latency-runs", "3", "--repos", "2000"]),
    "mcp": (["bench_mcp.py", "--runs", "15", "--connect-runs", "5"], ["--runs", "3", "--connect-runs", "2"]),
    "mcp_10000": (["bench_mcp.py", "--runs", "9", "--connect-runs", "1", "--fleet-size", "10000"],
                  ["--runs", "3", "--connect-runs", "1", "--fleet-size", "2000"]),
    "ops": (["bench_ops.py", "--runs", "9"], ["--runs", "2", "--large-files", "2000"]),
    "snapshots": (["bench_snapshots.py", "--runs", "21"], ["--runs", "3", "--files", "2000", "--store-snapshots", "50"]),
    "snapshot_watch": (["bench_snapshot_watch.py"], ["--repos", "50", "--present", "5", "--seconds", "10"]),
    "large": (["bench_large.py", "--commits", "50000", "--files", "3000", "--runs", "31"],
              ["--commits", "5000", "--files", "600", "--runs", "3"]),
    "libstatus": (["bench_libstatus.py", "--runs", "21"], ["--runs", "3", "--sizes", "100,1000"]),
    "client": (["bench_client.py", "--commits", "50000", "--files", "3000", "--runs", "21"],
               ["--commits", "5000", "--files", "600", "--runs", "3"]),
    "audit": (["bench_audit.py", "--verify-entries", "1000000"], ["--verify-entries", "20000", "--no-signed-verify"]),
}


def run(name: str, quick: bool) -> dict:
    argv, quick_args = SCRIPTS[name]
    cmd = [sys.executable, str(HERE / argv[0]), *argv[1:], *(quick_args if quick else [])]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
    if proc.returncode != 0:
        raise SystemExit(f"{name} benchmark failed:\n{proc.stderr[-4000:]}")
    text = proc.stdout.strip()
    result = json.loads(text[text.index("{"):])
    print(f"{name}: {time.perf_counter() - started:.0f}s", file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", choices=sorted(SCRIPTS),
                        help="run just these (their results replace the same keys in --out)")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    results = json.loads(args.out.read_text()) if args.only and args.out.exists() else {}
    results.update({name: run(name, args.quick) for name in (args.only or SCRIPTS)})
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
