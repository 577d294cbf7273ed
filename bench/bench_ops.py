"""Benchmark the write side: proposal creation (preview included) and approve -> executed -> index updated.

    python bench/bench_ops.py [--runs 9] [--large-files 20000] [--workdir DIR]

Two repositories: a small one (20 files) and a large one (`--large-files` files in nested folders, 1,000
commits of history). For `stage`, `commit` and `merge`, each run makes a proposal through
`fleet.ops.service.propose` (validation, preview, pins, policy, the stored row) and times it; then approves
it (`service.approve`: claim, re-validation, restore point, git, result, index refresh) and times that up to
the moment the index row (what the dashboard shows) carries the outcome. The repository is reset between
runs. Prints one JSON object of medians in milliseconds.
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

from fleet.index.scan import scan  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.ops import service  # noqa: E402

ENV = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
       "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=ENV,
                          input=stdin).stdout.decode()


def make_repo(path: Path, files: int, commits: int) -> Path:
    """A repo with `files` files (fast-import, so 20,000 files take a second) and `commits` commits."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    stream = []
    mark = 0
    for n in range(commits):
        mark += 1
        stream.append(f"commit refs/heads/main\nmark :{mark}\ncommitter Bench <bench@example.com> {1_700_000_000 + n} +0000\n"
                      f"data {len(f'c{n}')}\nc{n}\n")
        if n:
            stream.append(f"from :{mark - 1}\n")
        chosen = range(files) if n == 0 else [(n * 7919) % files]
        for i in chosen:
            body = f"file {i} v{n}\n" * 20
            stream.append(f"M 100644 inline d{i % 50}/f{i}.txt\ndata {len(body)}\n{body}\n")
    git(path, "fast-import", "--quiet", stdin="".join(stream).encode())
    git(path, "checkout", "-q", "-f", "main")
    git(path, "branch", "topic")
    return path


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


def bench_repo(index, repo: Path, runs: int) -> dict:
    out: dict[str, dict] = {}
    base = git(repo, "rev-parse", "HEAD").strip()
    for op in ("stage", "commit", "merge"):
        propose_t, execute_t = [], []
        for n in range(runs):
            git(repo, "reset", "-q", "--hard", base)
            git(repo, "branch", "-f", "topic", base)
            (repo / "d1" / "f1.txt").write_text(f"edited {n}\n")
            (repo / "new.txt").write_text(f"new {n}\n")
            if op == "commit":
                git(repo, "add", "-A")
                args = {"message": f"bench {n}"}
            elif op == "merge":
                git(repo, "checkout", "-q", "topic")
                git(repo, "commit", "-q", "-am", "on topic")
                git(repo, "checkout", "-q", "main")
                args = {"source": "topic"}
            else:
                args = {"paths": ["d1/f1.txt", "new.txt"]}
            started = time.perf_counter()
            made = service.propose(index, "bench", op, str(repo), args, "bench")
            propose_t.append(time.perf_counter() - started)
            started = time.perf_counter()
            done = service.approve(index, made["proposal_id"], "cli")
            row = index.conn.execute("select head, staged from repos where path = ?", (str(repo),)).fetchone()
            execute_t.append(time.perf_counter() - started)
            if done["status"] != "completed" or row is None:
                raise SystemExit(f"{op} did not complete: {done['error']}")
        out[op] = {"propose_ms": median_ms(propose_t), "approve_to_index_ms": median_ms(execute_t)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--large-files", type=int, default=20000)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="fleetdeck-bench-ops-"))
    root = work / "fleet"
    small = make_repo(root / "small", 20, 50)
    large = make_repo(root / "large", args.large_files, 1000)
    os.environ["XDG_CONFIG_HOME"] = str(work / "config")  # no personal policy file in the figures
    index = open_index(work / "fleet.db")
    scan(index, [str(root)])
    result = {"runs": args.runs, "large_files": args.large_files,
              "small": bench_repo(index, small, args.runs), "large": bench_repo(index, large, args.runs)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
