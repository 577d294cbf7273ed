"""Benchmark the index core: cold `fleetdeck scan` vs the naive `xargs -P2 git status` loop, same run,
and in-process query time of `repos`/`radar` from the index at 1,000 and 10,000 repos.

    python bench/bench_scan.py [--sizes 100,1000] [--runs 5] [--query-sizes 1000,10000] [--workdir DIR]

Prints one JSON object (medians of --runs runs, scan and loop alternating so noise hits both alike).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fleetgen import generate  # noqa: E402
from fleet.index.discovery import Found  # noqa: E402
from fleet.index.scan import ingest  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.presence.attention import collision_reasons  # noqa: E402
from fleet.views.radar import radar  # noqa: E402
from fleet.repo.record import read_repo  # noqa: E402


SOURCES = (collision_reasons,)  # the radar as the surfaces ask for it


def time_scan(fleet: Path, tmp: Path) -> float:
    db = tmp / f"scan-{time.monotonic_ns()}.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fleet", "--db", str(db), "scan", str(fleet), "--json"], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    for suffix in ("", "-wal", "-shm", ".migrate.lock"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    return elapsed


def time_loop(repos: list[Path]) -> float:
    listing = "\0".join(str(r) for r in repos).encode()
    start = time.perf_counter()
    subprocess.run(["xargs", "-0", "-P2", "-I{}", "git", "-C", "{}", "status", "--porcelain=v2", "--branch"],
                   input=listing, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def bench_scan(size: int, runs: int, workdir: Path) -> dict:
    fleet = workdir / f"fleet-{size}"
    repos = generate(fleet, size)
    scans, loops = [], []
    time_loop(repos)  # warm the page cache for both sides
    for _ in range(runs):
        scans.append(time_scan(fleet, workdir))
        loops.append(time_loop(repos))
    scan_med, loop_med = statistics.median(scans), statistics.median(loops)
    return {"repos": size, "scan_s": round(scan_med, 3), "git_status_loop_s": round(loop_med, 3),
            "ratio": round(scan_med / loop_med, 2), "scan_runs": [round(s, 3) for s in scans],
            "loop_runs": [round(s, 3) for s in loops]}


def synthetic_index(path: Path, size: int, sample: Path) -> None:
    """An index of `size` repos whose records are copies of one real record with varied state."""
    template = read_repo(Found(str(sample), str(sample / ".git"), str(sample / ".git"), False, str(sample.parent)))
    index = open_index(path)
    root = "/synthetic"
    for i in range(size):
        record = dict(template)
        record.update(path=f"{root}/r{i:05d}", untracked=i % 3, ahead=i % 4, behind=i % 5 == 0 and 2 or 0,
                      upstream="origin/main", conflicted=1 if i % 97 == 0 else 0)
        found = Found(record["path"], f"{record['path']}/.git", f"{record['path']}/.git", False, root)
        ingest(index, [(found, record)])
    index.close()


def bench_queries(size: int, runs: int, workdir: Path, sample: Path) -> dict:
    db = workdir / f"query-{size}.db"
    if not db.exists():
        synthetic_index(db, size, sample)
    index = open_index(db)
    queries = {
        # what the dashboard, `fleet.repos` and `fleet.radar` ask: a page and a count, the top of the queue
        "repos_page_ms": lambda: (index.rows(limit=100, offset=size // 2), index.count()),
        "radar_top50_ms": lambda: radar(index, limit=50, extra_sources=SOURCES),
        "repo_one_ms": lambda: index.repo(f"r{size // 2:05d}"),
        # whole-fleet dumps (`fleetdeck repos --json`, `radar --all`): every row decoded in Python
        "repos_all_flat_ms": lambda: index.summaries(),
        "repos_all_full_ms": lambda: index.repos(),
        "radar_all_ms": lambda: radar(index, extra_sources=SOURCES),
    }
    timings: dict[str, list[float]] = {k: [] for k in queries}
    for _ in range(runs):
        for key, fn in queries.items():
            start = time.perf_counter()
            fn()
            timings[key].append((time.perf_counter() - start) * 1000)
    index.close()
    return {"repos": size, **{k: round(statistics.median(v), 2) for k, v in timings.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--query-sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=None, help="keep generated fleets here (default: a temp dir)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fleetdeck-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    result = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "scan": [], "query": []}
    for size in (int(s) for s in args.sizes.split(",") if s):
        result["scan"].append(bench_scan(size, args.runs, workdir))
        print(json.dumps(result["scan"][-1]), file=sys.stderr)
    sample = generate(workdir / "fleet-sample", 5)[2]
    for size in (int(s) for s in args.query_sizes.split(",") if s):
        result["query"].append(bench_queries(size, args.runs, workdir, sample))
        print(json.dumps(result["query"][-1]), file=sys.stderr)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
