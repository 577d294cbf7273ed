"""Benchmark: one presence refresh over 500 indexed repos with 200 recent agent session files.

Run `python bench/bench_presence.py [--repos 500] [--sessions 200] [--runs 7]`. Prints one JSON line: the
median refresh time with warm parse caches (the watcher's steady state: files unchanged since the last
refresh are only stat'ed), the first (cold) refresh, and a median with every file changed between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.index.store import open_index  # noqa: E402
from fleet.presence import refresh_presence  # noqa: E402
from fleet.presence.files import CACHE  # noqa: E402
from fleet.index.scan import scan  # noqa: E402

FILLER = json.dumps({"type": "progress", "data": "x" * 2000})


def build_repos(root: Path, count: int) -> list[Path]:
    template = root / "_template"
    template.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(template)], check=True)
    repos = []
    for i in range(count):
        repo = root / "code" / f"group{i % 20:02d}" / f"repo{i:03d}"
        shutil.copytree(template, repo, symlinks=True)
        repos.append(repo)
    return repos


def write_sessions(home: Path, repos: list[Path], count: int, now: float) -> list[Path]:
    """Claude transcripts, Codex rollouts and Gemini chats (~100 KB each) spread over the repos."""
    files = []
    for i in range(count):
        repo = str(repos[(i * 7) % len(repos)])
        at = now - (i % 30) * 20
        kind = i % 3
        if kind == 0:
            path = home / ".claude" / "projects" / f"-p{i}" / f"s{i}.jsonl"
            tail = [{"type": "assistant", "cwd": repo, "gitBranch": "main", "message": {"content": [
                {"type": "tool_use", "name": "Edit", "input": {"file_path": f"{repo}/src/f{i}.py"}}]}}]
        elif kind == 1:
            path = home / ".codex" / "sessions" / "2026" / "05" / "01" / f"rollout-2026-05-01T10-00-00-{i}.jsonl"
            tail = [{"type": "session_meta", "payload": {"cwd": repo, "git": {"branch": "main"}}}] + [
                {"type": "response_item", "payload": {"type": "function_call", "name": "shell",
                                                      "arguments": json.dumps({"command": ["ls"]})}}]
        else:
            folder = home / ".gemini" / "tmp" / f"g{i}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".project_root").write_text(repo)
            path = folder / "chats" / f"session-{i}.jsonl"
            tail = [{"type": "gemini", "toolCalls": [{"name": "write_file", "args": {"file_path": f"{repo}/a.py"}}]}]
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(tail[0])] + [FILLER] * 48 + [json.dumps(t) for t in tail[1:]] if kind == 1 \
            else [FILLER] * 48 + [json.dumps(t) for t in tail]
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (at, at))
        files.append(path)
    return files


def timed(index, home: Path, now: float) -> tuple[float, int]:
    started = time.perf_counter()
    rows = refresh_presence(index, now=now, home=home, environ={})
    return (time.perf_counter() - started) * 1000, len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleetdeck-bench-presence-") as tmp:
        base = Path(tmp)
        repos = build_repos(base, args.repos)
        index = open_index(base / "fleet.db")
        scan(index, [str(base / "code")])
        repos = [Path(r["path"]) for r in index.summaries()]
        home = base / "home"
        now = time.time()
        files = write_sessions(home, repos, args.sessions, now)
        CACHE.clear()
        cold_ms, rows = timed(index, home, now)
        warm = [timed(index, home, now)[0] for _ in range(args.runs)]
        changed = []
        for run in range(args.runs):
            for path in files:                       # every file appended to since the last refresh
                with open(path, "a") as fh:
                    fh.write(json.dumps({"type": "progress", "n": run}) + "\n")
            changed.append(timed(index, home, now)[0])
        index.close()
    print(json.dumps({
        "bench": "presence_refresh", "repos": len(repos), "session_files": args.sessions, "rows": rows,
        "runs": args.runs, "median_ms": round(statistics.median(warm), 1), "cold_ms": round(cold_ms, 1),
        "all_changed_median_ms": round(statistics.median(changed), 1), "target_ms": 100,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
