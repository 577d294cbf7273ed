"""Benchmark the per-repo MCP tools on a large repository: per-call overhead over the bare git commands.

    python bench/bench_large.py [--commits 50000] [--files 3000] [--runs 9] [--workdir DIR]

The repository is generated with `git fast-import` (deterministic, a few seconds): `--files` files in a
few hundred folders, `--commits` commits each touching a few of them, one file (`hot.txt`) edited in every
50th commit (a blame with history), one commit touching 500 files, then a dirty working tree (40 modified
files). Each tool is called in-process through the server's call path (as bench_mcp.py does) and the git
commands it started are replayed bare: `overhead_ms` = median(tool) - median(replay). `repo.history`'s first
page is also compared with a plain `git log` of the same page (`history_vs_git_log`); its deep page is the
cursor reached by paging 200 at a time to `deep_page_depth` commits, beside what a page by position costs
there (`git_log_skip_to_depth_ms`: `git log --skip=<depth>`). `python_overhead_cpu_ms` is the same
overhead in this process's CPU time (git's own excluded on both sides): steady on a busy machine;
`tool_cpu_ms` is the tool call's own CPU, whole (the replay's subprocess costs more per git command than
fleetdeck's spawn, so a tool that runs fewer commands can cost less yet show more overhead).
Two floors put those figures in scale, measured in the same run: `mcp_path_cpu_ms`, the CPU of a call through
the very same path (the SDK's argument check, the worker thread, the repo's scope checks, the audit entry) to a
bench-only tool that resolves the repo and answers `{}`, which every per-repo tool pays before its own work;
and per tool `answer_encode_cpu_ms`, the CPU that CPython's C JSON encoder alone takes to write the answer's
text (the least any Python server spends on an answer of that size).
With `--workdir`, the generated repository is kept there and reused by the next run with the same sizes
(`build_s` is then near 0); the index beside it is rebuilt every run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_mcp import GitRecorder, alternate, median_ms, time_against_git  # noqa: E402
from fleet.index.scan import scan  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.repo.jsonbudget import encode  # noqa: E402
from mcp_bridge.envelope import Out  # noqa: E402
from mcp_bridge.server import build_server  # noqa: E402

WIDE = 500       # files the wide commit touches
HOT_EVERY = 50   # hot.txt is edited in every HOT_EVERY-th commit
EPOCH = 1_600_000_000


def _git(repo: Path, *args: str, data: bytes | None = None) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
           "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    proc = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, env=env)
    if proc.returncode:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode()[-2000:]}")
    return proc.stdout.decode()


def _name(n: int) -> str:
    return f"src/d{n % 300:03d}/f{n:05d}.txt"


def _stream(commits: int, files: int):
    """fast-import commands for the whole history, produced lazily (bytes)."""
    def blob(text: str) -> bytes:
        data = text.encode()
        return b"data %d\n%s\n" % (len(data), data)

    hot: list[str] = []
    wide_at = commits // 2
    for c in range(commits):
        when = EPOCH + c * 600
        head = f"commit refs/heads/main\nmark :{c + 1}\n"
        head += f"author Person {c % 17} <p{c % 17}@example.com> {when} +0000\n"
        head += f"committer Bench <bench@example.com> {when} +0000\n"
        subject = f"change {c}: {'touch many files' if c == wide_at else 'edit a few files'}"
        out = [head.encode(), blob(subject)]
        if c:
            out.append(b"from :%d\n" % c)
        if c == 0:
            touched = range(files)
        elif c == wide_at:
            touched = range(0, WIDE * (files // WIDE), files // WIDE)
        else:
            touched = [(c * 7919 + k * 104729) % files for k in range(3)]
        for n in touched:
            out.append(f"M 644 inline {_name(n)}\n".encode())
            out.append(blob("".join(f"file {n} line {i} version {c}\n" for i in range(20))))
        if c % HOT_EVERY == 0:
            hot.append(f"line added by commit {c}")
            if len(hot) > 400:
                hot.pop(0)
            out.append(b"M 644 inline hot.txt\n")
            out.append(blob("\n".join(hot) + "\n"))
        out.append(b"\n")
        yield b"".join(out)


def build(base: Path, commits: int, files: int) -> Path:
    """The generated repository in `base`: made once per size, reused when a complete one is there."""
    repo = base / f"large-{commits}-{files}"
    done = base / f"large-{commits}-{files}.done"
    if done.exists():
        return repo
    if repo.exists():  # an interrupted build: start over
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "-C", str(repo), "fast-import", "--quiet"], stdin=subprocess.PIPE)
    for chunk in _stream(commits, files):
        proc.stdin.write(chunk)
    proc.stdin.close()
    if proc.wait():
        raise SystemExit("fast-import failed")
    _git(repo, "reset", "-q", "--hard", "main")
    for n in range(0, 40 * 37, 37):  # a dirty working tree: 40 modified files
        path = repo / _name(n % files)
        path.write_text(path.read_text() + "a local edit\n")
    done.touch()
    return repo


async def deep_cursor(server, repo: Path, depth: int) -> str:
    """The cursor of repo.history after `depth` commits, reached by paging (200 a page) as an agent would."""
    cursor = None
    for _ in range(depth // 200):
        result = await server.call_tool("repo.history", {"repo": str(repo), "limit": 200,
                                                          **({"cursor": cursor} if cursor else {})})
        cursor = json.loads(result.content[0].text)["next_cursor"]
    return cursor


def _calls(repo: Path, cursor: str) -> list[tuple[str, dict]]:
    wide = _git(repo, "log", "-1", "--format=%H", "--grep=touch many files", "main").strip()
    return [
        ("repo.status", {}),
        ("repo.brief", {}),
        ("repo.history", {"limit": 20}),
        ("repo.history deep", {"limit": 20, "cursor": cursor}),
        ("commit.details", {"rev": wide}),
        ("diff.text", {}),
        ("repo.blame", {"file": "hot.txt"}),
    ]


async def python_overhead(server, name: str, args: dict, runs: int) -> tuple[float, float]:
    """(this process's CPU time for the tool call, that minus the CPU of replaying its git commands), both
    without git's own CPU, which runs in the children: the Python work added to running git, which, unlike
    wall time, a busy machine barely moves. The replay starts git the plain way (subprocess), which costs
    more than fleetdeck's posix_spawn: a tool that runs fewer git commands gets less of that back."""
    with GitRecorder() as rec:
        await server.call_tool(name, args)
    tool, bare = await alternate(server, name, args, rec.calls, runs, clock=time.process_time)
    return median_ms(tool), round(median_ms(tool) - median_ms(bare), 2)


async def per_call(server, repo: Path, calls: list[tuple[str, dict]], runs: int) -> list[dict]:
    results = []
    for label, args in calls:
        name, args = label.split()[0], {"repo": str(repo), **args}
        answer = (await server.call_tool(name, args)).structured_content
        tool_cpu, overhead = await python_overhead(server, name, args, runs)
        results.append({**await time_against_git(server, name, args, runs), "tool": label,
                        "tool_cpu_ms": tool_cpu, "python_overhead_cpu_ms": overhead,
                        "answer_encode_cpu_ms": median_ms(_cpu_samples(lambda: encode(answer), runs * 5))})
    return results


NOOP = "bench.resolve_only"


async def mcp_path(server, repo: Path, runs: int) -> float:
    """CPU of one call through the tools' own path to a tool that only resolves the repo (registered here, for
    the benchmark alone): what every per-repo tool costs before its own work."""
    kit = server.kit

    @kit.tool(NOOP, Out, "Resolve only (benchmark)")
    def resolve_only(repo: str) -> dict:
        kit.bridge.resolve(repo)
        return {}

    args = {"repo": str(repo)}
    await server.call_tool(NOOP, args)
    samples = []
    for _ in range(runs * 5):
        start = time.process_time()
        await server.call_tool(NOOP, args)
        samples.append(time.process_time() - start)
    return median_ms(samples)


def _cpu_samples(fn, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return samples


def git_log_page(repo: Path, runs: int, skip: int = 0) -> float:
    """The plain `git log` of a page, with the options repo.history uses (`skip`: a page by position)."""
    argv = ["git", "-C", str(repo), "log", "-z", "--no-follow", f"--skip={skip}",
            "--format=%H%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%s", "--max-count=21", "HEAD", "--"]
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
        samples.append(time.perf_counter() - start)
    return median_ms(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=50_000)
    parser.add_argument("--files", type=int, default=3_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    base = args.workdir or Path(tempfile.mkdtemp(prefix="fleetdeck-bench-large-"))
    # The server's tool-definition cache kept beside the benchmark: its bench-only tool never reaches yours.
    os.environ["XDG_CACHE_HOME"] = str(base / "cache")
    started = time.perf_counter()
    repo = build(base, args.commits, args.files)
    build_s = round(time.perf_counter() - started, 1)
    db = base / "fleet.db"
    for stale in base.glob("fleet.db*"):
        stale.unlink()
    index = open_index(db)
    scan(index, [str(repo)])
    index.close()
    server = build_server(str(db))
    depth = (args.commits - 200) // 200 * 200
    cursor = asyncio.run(deep_cursor(server, repo, depth))
    calls = asyncio.run(per_call(server, repo, _calls(repo, cursor), args.runs))
    path_ms = asyncio.run(mcp_path(server, repo, args.runs))
    log_ms = git_log_page(repo, args.runs)
    first_page = next(c for c in calls if c["tool"] == "repo.history")
    result = {
        "commits": int(_git(repo, "rev-list", "--count", "HEAD")), "files": int(_git(repo, "ls-files").count("\n")),
        "build_s": build_s, "per_call": calls, "mcp_path_cpu_ms": path_ms, "git_log_page_ms": log_ms,
        "history_vs_git_log": round(first_page["tool_ms"] / log_ms, 2) if log_ms else None,
        "deep_page_depth": depth, "git_log_skip_to_depth_ms": git_log_page(repo, args.runs, depth),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
