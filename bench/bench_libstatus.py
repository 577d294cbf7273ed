"""The in-process status (fleet/repo/libstatus.py) against `git status` on one repository, by its size: where
libgit2 stops being the cheaper one (`MAX_ENTRIES`), and on the benchmark's large repo (bench/bench_large.py).

    python bench/bench_libstatus.py [--sizes 100,500,1000,2000,3000,5000,10000] [--runs 21] [--workdir DIR]
                                    [--fleet 1000]

Per size: a repository of that many tracked files (20 of them modified, 5 untracked), the status read
alternately through libgit2 (the eligibility check included) and through fleetdeck's `git status` runner,
CPU (libgit2: this process; git: the child, from its rusage) and wall, medians. With --fleet N, every working
tree of the realistic N-repo fleet (bench/realfleet.py) too: how many are read in-process, the reasons the
others go to git, and how many in-process statuses differ from git's in any field (must be 0), with the CPU
per repo of each reader. Prints one JSON object.
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

from bench.bench_large import build as build_large  # noqa: E402
from bench.realfleet import generate_realistic  # noqa: E402
from fleet.git.layout import found_at  # noqa: E402
from fleet.git.status import read_status  # noqa: E402
from fleet.repo import libstatus  # noqa: E402


def make_repo(base: Path, files: int) -> Path:
    repo = base / f"status-{files}"
    if (base / f"status-{files}.done").exists():
        return repo
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for n in range(files):
        folder = repo / f"d{n % 50:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{n:05d}.txt").write_text(f"file {n}\n" * 20)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "files"], check=True, env=env)
    for n in range(0, files, max(1, files // 20)):
        (repo / f"d{n % 50:02d}" / f"f{n:05d}.txt").write_text("changed\n")
    for n in range(5):
        (repo / f"new{n}.txt").write_text("new\n")
    (base / f"status-{files}.done").write_text("ok\n")
    return repo


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(repo: Path, runs: int) -> dict:
    path = str(repo)
    gitdir = os.path.join(path, ".git")
    entries = len(libstatus.inprocess_status(path, gitdir, gitdir).entries)  # eligible, else this raises
    lib_cpu, lib_wall, git_cpu, git_wall = [], [], [], []
    for _ in range(runs):
        cpu, start = time.process_time(), time.perf_counter()
        libstatus.inprocess_status(path, gitdir, gitdir)
        lib_wall.append(time.perf_counter() - start)
        lib_cpu.append(time.process_time() - cpu)
        cpu, own, start = _children_cpu(), time.process_time(), time.perf_counter()
        read_status(path, gitdir)
        git_wall.append(time.perf_counter() - start)
        git_cpu.append(_children_cpu() - cpu + time.process_time() - own)
    ms = lambda values: round(statistics.median(values) * 1000, 2)  # noqa: E731
    return {"libgit2_cpu_ms": ms(lib_cpu), "libgit2_wall_ms": ms(lib_wall), "git_cpu_ms": ms(git_cpu),
            "git_wall_ms": ms(git_wall), "cpu_ratio": round(statistics.median(lib_cpu) / statistics.median(git_cpu), 2),
            "entries": entries}


def _fields(status) -> tuple:
    return (status.oid, status.head, status.upstream, status.ahead, status.behind, status.stash,
            [(e.kind, e.xy, e.path, e.orig_path, e.submodule) for e in status.entries])


def compare_fleet(workdir: Path, size: int) -> dict:
    """Every working tree of the realistic fleet (its linked worktrees with the git dir and common dir discovery
    finds): in-process where eligible, compared with git field by field."""
    root = workdir / f"real-{size}"
    fleet = generate_realistic(root, size)
    trees = [found_at(os.path.realpath(p), str(root)) for p in [*fleet["repos"], *fleet["worktrees"]]]
    reasons: dict[str, int] = {}
    eligible, differences = [], 0
    for found in trees:
        dirs = (found.path, found.gitdir, found.commondir)
        try:
            ours = libstatus.inprocess_status(*dirs)
        except libstatus.Ineligible as exc:
            reasons[exc.reason] = reasons.get(exc.reason, 0) + 1
            continue
        eligible.append(dirs)
        differences += _fields(ours) != _fields(read_status(found.path, found.commondir))
    cpu = time.process_time()
    for dirs in eligible:
        libstatus.inprocess_status(*dirs)
    lib_ms = (time.process_time() - cpu) * 1000 / max(1, len(eligible))
    cpu, own = _children_cpu(), time.process_time()
    for path, _, commondir in eligible:
        read_status(path, commondir)
    git_ms = (_children_cpu() - cpu + time.process_time() - own) * 1000 / max(1, len(eligible))
    return {"working_trees": len(trees), "in_process": len(eligible), "to_git": reasons,
            "differences": differences, "libgit2_cpu_ms_per_repo": round(lib_ms, 2),
            "git_cpu_ms_per_repo": round(git_ms, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,500,1000,2000,3000,5000,10000")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--workdir", default=str(ROOT / "bench" / "out"))
    parser.add_argument("--fleet", type=int, default=0, help="also check the realistic fleet of this many repos")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    limit, libstatus.MAX_ENTRIES = libstatus.MAX_ENTRIES, 1 << 30   # measure past the cut-off too
    result: dict = {"max_entries": limit, "load_avg": [round(os.getloadavg()[0], 2)], "sizes": []}
    for size in (int(s) for s in args.sizes.split(",") if s):
        result["sizes"].append({"files": size, **measure(make_repo(workdir, size), args.runs)})
        print(json.dumps(result["sizes"][-1]), file=sys.stderr)
    if args.fleet:
        result["realistic_fleet"] = compare_fleet(workdir, args.fleet)
        print(json.dumps(result["realistic_fleet"]), file=sys.stderr)
    large = build_large(workdir, 50000, 3000)
    result["large_repo"] = {"commits": 50000, "files": 3000, **measure(large, args.runs)}
    result["load_avg"].append(round(os.getloadavg()[0], 2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
