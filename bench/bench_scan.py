"""Benchmark the index core: cold `fleetdeck scan` vs the naive `xargs -P2 git status` loop, same run,
a re-scan of the unchanged fleet, and in-process query time of `repos`/`radar` at 1,000 and 10,000 repos.

    python bench/bench_scan.py [--profiles realistic,simple] [--sizes 1000] [--runs 5]
                               [--query-sizes 1000,10000] [--workdir DIR]
    python bench/bench_scan.py --profiles simple --sizes 10000 --runs 3 --query-sizes ''   # 10,000 repos

Profiles: `realistic` (bench/realfleet.py: long reflogs, branches on two remotes, diverged/behind/stashed/
mid-operation/worktree/submodule repos, bare mirrors under the root; the loop runs `git status` in every
working tree, the scan indexes the whole root) and `simple` (bench/fleetgen.py: four small templates).
Each run also scans cold with the in-process status switched off (`scan_git_status_*`: `git status` for
every repo, as before fleet/repo/libstatus.py). Prints one JSON object: medians of --runs runs, wall and CPU seconds (the scan's CPU includes its worker
processes and every git it ran; the loop's includes every git), scan and loop alternating so noise hits
both alike; also the peak RSS of the scan (the largest process of its tree, over the runs). Generated fleets
are kept under --workdir (default bench/out/); a 10,000-repo simple fleet takes a few minutes to copy out.
fleetdeck is byte-compiled first, as `pip install` leaves it (`bench.common.byte_compile`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import byte_compile  # noqa: E402
from bench.fleetgen import generate  # noqa: E402
from bench.realfleet import generate_realistic  # noqa: E402
from fleet.git.layout import Found  # noqa: E402
from fleet.index.scan import ingest  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.views.queue import REASON_SOURCES  # noqa: E402  (the radar as the surfaces ask for it)
from fleet.views.radar import radar  # noqa: E402
from fleet.repo.libstatus import SWITCH  # noqa: E402
from fleet.repo.record import read_repo  # noqa: E402




def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process and its descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], **kwargs) -> tuple[float, float]:
    """(wall, CPU) seconds of one command run to completion."""
    cpu, start = children_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - start, children_cpu() - cpu


def timed_rss(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall, CPU, peak RSS in MB) of one command: CPU counts it and every process it started; the RSS is the
    largest any one of them reached (the CLI process or one of its forked workers; git's are far smaller)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux: ru_maxrss is in KiB


def scan_cmd(fleet: Path, db: Path) -> list[str]:
    return [sys.executable, "-m", "fleet", "--db", str(db), "scan", str(fleet), "--json"]


def time_scan(fleet: Path, tmp: Path, status: str = "auto", rescan: bool = True) \
        -> tuple[tuple[float, float, float], tuple[float, float, float] | None]:
    """A cold scan into a new index, then (`rescan`) a re-scan of the unchanged fleet into the same index:
    (wall, CPU, peak RSS MB) each. `status`: `git` switches the in-process status off (fleet/repo/libstatus.py)."""
    db = tmp / f"scan-{time.monotonic_ns()}.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), SWITCH: status}
    cold = timed_rss(scan_cmd(fleet, db), env)
    again = timed_rss(scan_cmd(fleet, db), env) if rescan else None
    for suffix in ("", "-wal", "-shm", ".migrate.lock"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    return cold, again


def time_loop(repos: list[Path]) -> tuple[float, float]:
    listing = "\0".join(str(r) for r in repos).encode()
    return timed(["xargs", "-0", "-P2", "-I{}", "git", "-C", "{}", "status", "--porcelain=v2", "--branch"],
                 input=listing)


def make_fleet(profile: str, size: int, workdir: Path) -> tuple[Path, list[Path], dict]:
    """(root to scan, working trees the loop visits, what the fleet holds)."""
    if profile == "simple":
        root = workdir / f"fleet-{size}"
        repos = generate(root, size)
        return root, repos, {"repos": size}
    root = workdir / f"real-{size}"
    fleet = generate_realistic(root, size)
    return root, [*fleet["repos"], *fleet["worktrees"]], {
        "repos": size, "linked_worktrees": len(fleet["worktrees"]), "bare_mirrors": len(fleet["mirrors"]),
        "reflog_lines": sum(len(p.read_bytes().splitlines()) for r in fleet["repos"]
                            for p in (r / ".git" / "logs").rglob("*") if p.is_file())}


def _med(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def bench_scan(profile: str, size: int, runs: int, workdir: Path) -> dict:
    started = time.perf_counter()
    root, trees, shape = make_fleet(profile, size, workdir)
    generated_s = time.perf_counter() - started
    colds, agains, loops, offs = [], [], [], []
    load_before = os.getloadavg()[0]
    time_loop(trees)  # warm the page cache for both sides
    for _ in range(runs):
        cold, again = time_scan(root, workdir)
        colds.append(cold)
        agains.append(again)
        offs.append(time_scan(root, workdir, "git", rescan=False)[0])   # the in-process status off
        loops.append(time_loop(trees))
    scan_wall, scan_cpu = _med([c[0] for c in colds]), _med([c[1] for c in colds])
    loop_wall, loop_cpu = _med([c[0] for c in loops]), _med([c[1] for c in loops])
    again_wall, again_cpu = _med([c[0] for c in agains]), _med([c[1] for c in agains])
    return {"profile": profile, **shape, "generate_s": round(generated_s, 1),
            "scan_s": scan_wall, "scan_cpu_s": scan_cpu,
            "git_status_loop_s": loop_wall, "git_status_loop_cpu_s": loop_cpu,
            "ratio": round(scan_wall / loop_wall, 2), "ratio_cpu": round(scan_cpu / loop_cpu, 2),
            "scan_git_status_s": _med([c[0] for c in offs]), "scan_git_status_cpu_s": _med([c[1] for c in offs]),
            "ratio_git_status": round(_med([c[0] for c in offs]) / loop_wall, 2),
            "ratio_cpu_git_status": round(_med([c[1] for c in offs]) / loop_cpu, 2),
            "scan_cpu_ms_per_repo": round(scan_cpu * 1000 / size, 2),  # flat across sizes = linear
            "rescan_unchanged_s": again_wall, "rescan_unchanged_cpu_s": again_cpu,
            "rescan_vs_cold": round(again_wall / scan_wall, 2),
            "rescan_vs_cold_cpu": round(again_cpu / scan_cpu, 2),
            "scan_peak_rss_mb": round(max(c[2] for c in colds), 1),
            "rescan_peak_rss_mb": round(max(c[2] for c in agains), 1),
            "scan_runs": [round(c[0], 3) for c in colds], "loop_runs": [round(c[0], 3) for c in loops],
            # the 1-minute load average before and after: other work on the machine inflates wall and CPU
            "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def synthetic_index(path: Path, size: int, sample: Path) -> None:
    """An index of `size` repos whose records are copies of one real record with varied state."""
    template = read_repo(Found(str(sample), str(sample / ".git"), str(sample / ".git"), False, str(sample.parent)))
    index = open_index(path)
    root = "/synthetic"
    batch: list[tuple[Found, dict]] = []
    for i in range(size):
        record = dict(template)
        record.update(path=f"{root}/r{i:05d}", untracked=i % 3, ahead=i % 4, behind=i % 5 == 0 and 2 or 0,
                      upstream="origin/main", conflicted=1 if i % 97 == 0 else 0)
        batch.append((Found(record["path"], f"{record['path']}/.git", f"{record['path']}/.git", False, root), record))
        if len(batch) == 500 or i == size - 1:
            ingest(index, batch)  # the scan's own batched path
            batch = []
    index.close()


def bench_queries(size: int, runs: int, workdir: Path, sample: Path) -> dict:
    db = workdir / f"query-{size}.db"
    if not db.exists():
        synthetic_index(db, size, sample)
    index = open_index(db)
    queries = {
        # what the dashboard, `fleet.repos` and `fleet.radar` ask: a page and a count, the top of the queue
        "repos_page_ms": lambda: (index.rows(limit=100, offset=size // 2), index.count()),
        "radar_top50_ms": lambda: radar(index, limit=50, extra_sources=REASON_SOURCES),
        "repo_one_ms": lambda: index.repo(f"r{size // 2:05d}"),
        # whole-fleet dumps (`fleetdeck repos --json`, `radar --all`): every row decoded in Python
        "repos_all_flat_ms": lambda: index.summaries(),
        "repos_all_full_ms": lambda: index.repos(),
        "radar_all_ms": lambda: radar(index, extra_sources=REASON_SOURCES),
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
    parser.add_argument("--profiles", default="realistic,simple", help="fleet profiles, in this order")
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--query-sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=str(ROOT / "bench" / "out"), help="generated fleets are kept here")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    byte_compile()
    result = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "byte_compiled": True,
              "scan": [], "query": []}
    for profile in (p for p in args.profiles.split(",") if p):
        for size in (int(s) for s in args.sizes.split(",") if s):
            result["scan"].append(bench_scan(profile, size, args.runs, workdir))
            print(json.dumps(result["scan"][-1]), file=sys.stderr)
    sample = generate(workdir / "fleet-sample", 5)[2]
    for size in (int(s) for s in args.query_sizes.split(",") if s):
        result["query"].append(bench_queries(size, args.runs, workdir, sample))
        print(json.dumps(result["query"][-1]), file=sys.stderr)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
