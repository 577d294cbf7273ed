#!/usr/bin/env python3
"""Benchmark the watcher over a generated fleet and the digest over 100,000 events; prints JSON.

    /work/venv/bin/python bench/bench_watcher.py [--repos 1000] [--commits 50] [--rounds 3]

- fleet: one template repo (`git init` + one commit) copied N times (a few seconds for 1,000 repos),
  indexed with `fleet.index.scan.scan`, then `fleetdeck watch` runs as a subprocess over it.
- latency: commits spread over random repos, one at a time; time from `git commit` exiting until the
  repo's `head` in the index is the new commit (the db polled every 2 ms). p50/p95 per round, medians of rounds.
- watcher RSS (VmRSS) and inotify watches (`inotify wd:` lines in /proc/PID/fdinfo/*).
- digest: `fleet.digest.digest()` over a db holding 100,000 synthetic events (inserted straight into
  the events table), median of several runs, for a window holding all of them and for the last 24 hours.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.common import wait, watcher_meta  # noqa: E402
from fleet.views.digest import digest  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.index.scan import scan  # noqa: E402
from fleet.watch.notifier import inotify_watch_count  # noqa: E402


def git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="Bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="Bench", GIT_COMMITTER_EMAIL="bench@example.com", LC_ALL="C")
    return env


def git(cwd: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, env=env, capture_output=True)


def make_fleet(base: Path, count: int, env: dict[str, str]) -> list[Path]:
    template = base / "template"
    template.mkdir(parents=True)
    git(template, env, "init", "-q", "-b", "main")
    (template / "README.md").write_text("bench\n")
    git(template, env, "add", "README.md")
    git(template, env, "commit", "-q", "-m", "initial")
    shutil.rmtree(template / ".git" / "hooks")  # sample hooks: 14 files a repo nobody needs here
    root = base / "fleet"
    repos = [root / f"group{i // 100:02d}" / f"repo{i:04d}" for i in range(count)]
    for repo in repos:
        shutil.copytree(template, repo, symlinks=True)
    return repos






def latency_round(db: Path, repos: list[Path], commits: int, env: dict[str, str], rng: random.Random) -> dict:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    samples = []
    for n, repo in enumerate(rng.sample(repos, commits)):
        (repo / "README.md").write_text(f"change {n} {time.time()}\n")
        git(repo, env, "add", "README.md")
        time.sleep(0.15)  # let the watcher settle the `git add` first: measure the commit alone
        git(repo, env, "commit", "-q", "-m", f"bench {n}")
        done = time.perf_counter()
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                             env=env).stdout.strip()
        while True:
            row = conn.execute("select head from repos where path = ?", (str(repo),)).fetchone()
            if row and row[0] == sha:
                samples.append((time.perf_counter() - done) * 1000)
                break
            if time.perf_counter() - done > 10:
                samples.append(float("inf"))
                break
            time.sleep(0.002)
        time.sleep(0.1)
    conn.close()
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(ordered[max(0, int(round(0.95 * len(ordered))) - 1)], 1),
            "max_ms": round(ordered[-1], 1)}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def max_user_watches() -> int | None:
    """The kernel's per-user inotify watch limit (`fs.inotify.max_user_watches`), the budget the watcher shares."""
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    except (OSError, ValueError):
        return None


def digest_bench(base: Path, events: int, repos: int, runs: int) -> dict:
    db = base / "digest.db"
    now = int(time.time())
    kinds = ["commit"] * 6 + ["checkout", "merge", "amend", "reset", "rebase", "fetch"]
    rng = random.Random(7)
    with open_index(db) as index:
        with index.write() as conn:
            conn.executemany("insert into repos (id, path, root, name, gone) values (?, ?, ?, ?, 0)",
                             [(i + 1, f"/bench/r{i:04d}", "/bench", f"r{i:04d}") for i in range(repos)])
            rows = []
            for i in range(events):
                kind = rng.choice(kinds)
                rows.append((rng.randint(1, repos), "refs/heads/main", kind, f"{i:040x}", f"{i + 1:040x}",
                             now - rng.randint(0, 30 * 86400), "Bench <bench@example.com>", f"{kind}: change {i}",
                             int(kind in ("amend", "reset", "rebase"))))
            conn.executemany("insert into events (repo_id, ref, kind, old_sha, new_sha, at, identity, message,"
                             " rewrote) values (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        results = {}
        for label, kwargs in (("all_events_in_window_30d", {"since": "30d"}), ("last_24h", {"since": "24h"}),
                              ("30d_one_repo_two_kinds", {"since": "30d", "repos": ["r0042"],
                                                          "kinds": ["amend", "reset"]})):
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                out = digest(index, **kwargs)
                times.append((time.perf_counter() - start) * 1000)
            results[label] = {"median_ms": round(statistics.median(times), 2), "event_count": out["event_count"],
                              "returned": len(out["events"])}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--digest-runs", type=int, default=9)
    opts = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="fleetdeck-bench-"))
    home = base / "home"
    home.mkdir()
    env = git_env(home)
    result: dict = {"repos": opts.repos, "cpus": os.cpu_count()}
    watcher = None
    try:
        start = time.perf_counter()
        repos = make_fleet(base, opts.repos, env)
        result["generate_s"] = round(time.perf_counter() - start, 2)
        db = base / "fleet.db"
        start = time.perf_counter()
        with open_index(db) as index:
            scan(index, [str(base / "fleet")])
        result["scan_s"] = round(time.perf_counter() - start, 2)

        child_env = dict(env, PYTHONPATH=str(PROJECT))
        start = time.perf_counter()
        watcher = subprocess.Popen([sys.executable, "-m", "fleet", "--db", str(db), "watch", str(base / "fleet")],
                                   env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait(lambda: watcher_meta(db).get("pid") == watcher.pid, 120, "the watcher to start")
        result["watcher_watching_s"] = round(time.perf_counter() - start, 2)
        wait(lambda: watcher_meta(db).get("backlog") == 0, 600, "the watcher's catch-up sweep")
        result["watcher_caught_up_s"] = round(time.perf_counter() - start, 2)

        rng = random.Random(42)
        rounds = [latency_round(db, repos, opts.commits, env, rng) for _ in range(opts.rounds)]
        watches = inotify_watch_count(watcher.pid)
        result["latency"] = {"commits_per_round": opts.commits, "rounds": rounds,
                             "p50_ms_median": statistics.median(r["p50_ms"] for r in rounds),
                             "p95_ms_median": statistics.median(r["p95_ms"] for r in rounds)}
        result["watcher_rss_mb"] = rss_mb(watcher.pid)
        result["inotify_watches"] = watches
        result["watches_per_repo"] = round(watches / opts.repos, 2)
        result["watcher_mode"] = watcher_meta(db).get("mode")
        result["max_user_watches"] = max_user_watches()
        result["watches_share_of_max"] = round(watches / result["max_user_watches"], 3) \
            if result["max_user_watches"] else None
        watcher.send_signal(signal.SIGTERM)
        result["watcher_exit"] = watcher.wait(timeout=30)
        result["digest"] = digest_bench(base, opts.events, opts.repos, opts.digest_runs)
        result["targets"] = {"p95_ms": 300, "rss_mb": 150, "watches_per_repo": 10, "digest_ms": 30}
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
