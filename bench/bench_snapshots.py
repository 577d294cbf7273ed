"""The safety net's costs, against the bare git command in the same run (medians, ratios).

    python bench/bench_snapshots.py [--files 20000] [--changed 10] [--runs 15] [--store-snapshots 1000]

- snapshot of a repository with `--files` tracked files of which `--changed` changed, vs `git status` there
  (each run edits the same files again, so every snapshot is a new one);
- the hook command (`python -m fleet.agenthooks claude-code`, process start included) on that repository:
  p50 and p95 over `--runs`;
- the shadow store's size after `--store-snapshots` snapshots of a repository where a few files change each
  time, against the bytes that actually changed (before git's own compression), after the store's gc.
Prints JSON.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fleet.index.scan import scan  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.snapshot.retention import store_bytes  # noqa: E402
from fleet.snapshot.shadow import WorkTree, store_for  # noqa: E402
from fleet.snapshot.take import take  # noqa: E402

ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@b"}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=ENV)


def big_repo(base: Path, files: int) -> Path:
    repo = base / "big"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i in range(files):
        folder = repo / f"pkg{i % 200:03d}" / f"mod{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i}.py").write_text(f"# file {i}\n" + "x = 1\n" * 20)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many files")
    git(repo, "status", "--porcelain")          # a fresh index's stat data, as a person's repo has
    return repo


def edit(repo: Path, changed: int, round_: int) -> None:
    for i in range(changed):
        path = repo / f"pkg{i % 200:03d}" / f"mod{i % 7}" / f"file{i}.py"
        path.write_text(f"# file {i}, round {round_}\n" + "x = 2\n" * 20)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def snapshot_vs_status(repo: Path, db: Path, changed: int, runs: int) -> dict:
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    take(tree, db, "manual")                   # the store exists; each run is a new snapshot of changed files
    snaps, statuses = [], []
    for r in range(runs):
        edit(repo, changed, r)
        statuses.append(timed(lambda: subprocess.run(["git", "-C", str(repo), "status", "--porcelain=v2"],
                                                     capture_output=True, check=True)))
        snaps.append(timed(lambda: take(tree, db, "manual")))
    s, g = statistics.median(snaps), statistics.median(statuses)
    return {"snapshot_ms": round(s * 1000, 1), "git_status_ms": round(g * 1000, 1), "ratio": round(s / g, 2)}


def hook_latency(repo: Path, db: Path, changed: int, runs: int) -> dict:
    payload = json.dumps({"session_id": "bench", "cwd": str(repo), "hook_event_name": "PreToolUse",
                          "tool_name": "Bash", "tool_input": {"command": "npm test"}})
    times = []
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    for r in range(runs):
        edit(repo, changed, 1000 + r)
        times.append(timed(lambda: subprocess.run([sys.executable, "-m", "fleet.agenthooks", "claude-code",
                                                   "--db", str(db)], input=payload, text=True, env=env,
                                                  capture_output=True, check=True)))
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    return {"hook_p50_ms": round(statistics.median(times) * 1000, 1), "hook_p95_ms": round(p95 * 1000, 1),
            "runs": runs}


def store_growth(base: Path, db: Path, snapshots: int) -> dict:
    repo = base / "small"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i in range(50):
        (repo / f"f{i}.txt").write_text(f"file {i}\n" * 40)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    changed_bytes = 0
    for n in range(snapshots):
        for i in (n % 50, (n * 7) % 50, (n * 13) % 50):
            text = f"file {i} edit {n}\n" + "".join(f"line {j} of edit {n}\n" for j in range(30))
            (repo / f"f{i}.txt").write_text(text)
            changed_bytes += len(text)
        take(tree, db, "watch", now=time.time() - (snapshots - n))
    shadow = store_for(tree, db)
    raw = store_bytes(shadow)
    shadow.git(["-c", "gc.packRefs=false", "gc", "--quiet", "--prune=now"])
    packed = store_bytes(shadow)
    return {"snapshots": len(shadow.entries()), "changed_bytes": changed_bytes, "store_bytes_loose": raw,
            "store_bytes_after_gc": packed, "ratio_after_gc": round(packed / changed_bytes, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--store-snapshots", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleetdeck-bench-snap-") as tmp:
        base = Path(tmp)
        os.environ["FLEETDECK_SETTINGS"] = str(base / "settings.toml")
        (base / "settings.toml").write_text("[snapshots]\nkeep_all_hours = 8760\n")    # no thinning mid-bench
        repo = big_repo(base, args.files)
        db = base / "fleet.db"
        with open_index(db) as index:
            scan(index, [str(base)])
        result = {"files": args.files, "changed": args.changed,
                  "load": os.getloadavg()[0],
                  **snapshot_vs_status(repo, db, args.changed, args.runs),
                  **hook_latency(repo, db, args.changed, args.runs),
                  "store": store_growth(base, db, args.store_snapshots)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
