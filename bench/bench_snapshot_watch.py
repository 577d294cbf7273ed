#!/usr/bin/env python3
"""The safety net's cost in the watcher: the same fleet, the same edits, `fleetdeck watch` with snapshots off
and then on; prints JSON.

    /work/venv/bin/python bench/bench_snapshot_watch.py [--repos 1000] [--present 20] [--seconds 60]

`--present` repos get a Claude Code transcript (written as Claude Code writes it, refreshed every second, so
the real presence detector sees the agent working) and one file edited every second in each. Measured per
run over the editing window: the watcher's CPU (utime + stime from /proc, as a share of one core), its RSS
at the end and its peak (VmHWM), its inotify watches, and (snapshots on) the snapshots taken.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
sys.path.insert(0, str(PROJECT))

from bench.bench_watcher import git_env, make_fleet  # noqa: E402
from bench.common import wait, watcher_meta  # noqa: E402
from fleet.index.scan import scan  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.watch.notifier import inotify_watch_count  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def transcript(home: Path, repo: Path, at: float) -> None:
    """A Claude Code session mid-turn in `repo` (its last record a tool call: the agent is working)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at))
    base = {"sessionId": f"bench-{repo.name}", "version": "2.1.50", "cwd": str(repo), "gitBranch": "main",
            "timestamp": stamp}
    records = [{**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "work"}},
               {**base, "type": "assistant", "uuid": "a1", "message": {
                   "role": "assistant", "stop_reason": "tool_use",
                   "content": [{"type": "tool_use", "id": "t1", "name": "Edit",
                                "input": {"file_path": str(repo / "work.txt")}}]}}]
    path = home / ".claude" / "projects" / str(repo).replace("/", "-") / f"bench-{repo.name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")


def run(base: Path, db: Path, env: dict, repos: list[Path], present: list[Path], seconds: float,
        snapshots_on: bool) -> dict:
    settings = base / f"settings-{snapshots_on}.toml"
    settings.write_text(f"[snapshots]\nenabled = {'true' if snapshots_on else 'false'}\n")
    child_env = dict(env, PYTHONPATH=str(PROJECT), FLEETDECK_SETTINGS=str(settings))
    watcher = subprocess.Popen([sys.executable, "-m", "fleet", "--db", str(db), "watch", str(base / "fleet")],
                               env=child_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait(lambda: watcher_meta(db).get("pid") == watcher.pid, 120, "the watcher to start")
        wait(lambda: watcher_meta(db).get("backlog") == 0 and watcher_meta(db).get("live_at"), 600,
             "the watcher's catch-up")
        for repo in present:
            transcript(base / "home", repo, time.time())
        time.sleep(75 if snapshots_on else 10)        # presence seen, the first sweep's baselines taken
        start_cpu, start = cpu_s(watcher.pid), time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            tick = time.monotonic()
            for repo in present:
                (repo / "work.txt").write_text(f"edit {n}\n")
                transcript(base / "home", repo, time.time())
            n += 1
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        used = cpu_s(watcher.pid) - start_cpu
        elapsed = time.monotonic() - start
        result = {"snapshots": snapshots_on, "cpu_share_of_one_core": round(used / elapsed, 3),
                  "rss_mb": round(status_kb(watcher.pid, "VmRSS") / 1024, 1),
                  "peak_rss_mb": round(status_kb(watcher.pid, "VmHWM") / 1024, 1),
                  "inotify_watches": inotify_watch_count(watcher.pid), "edit_rounds": n}
    finally:
        watcher.send_signal(signal.SIGTERM)
        try:
            watcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watcher.kill()
    if snapshots_on:
        logs = list((db.parent / "snapshots").glob("*/log.jsonl"))
        lines = [json.loads(line) for p in logs for line in p.read_text().splitlines() if line.strip()]
        result["snapshots_taken"] = {t: sum(1 for m in lines if m["trigger"] == t) for t in ("watch", "sweep")}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--present", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    opts = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="fleetdeck-bench-netwatch-"))
    home = base / "home"
    home.mkdir()
    env = git_env(home)
    try:
        repos = make_fleet(base, opts.repos, env)
        present = repos[:: max(1, opts.repos // opts.present)][:opts.present]
        db = base / "fleet.db"
        with open_index(db) as index:
            scan(index, [str(base / "fleet")])
        off = run(base, db, env, repos, present, opts.seconds, False)
        on = run(base, db, env, repos, present, opts.seconds, True)
        result = {"repos": opts.repos, "present": len(present), "seconds": opts.seconds,
                  "load": os.getloadavg()[0], "off": off, "on": on,
                  "cpu_added_share_of_one_core": round(on["cpu_share_of_one_core"] - off["cpu_share_of_one_core"], 3),
                  "watches_added": on["inotify_watches"] - off["inotify_watches"],
                  "targets": {"cpu_added_share_of_one_core": 0.10, "rss_mb": 300}}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
