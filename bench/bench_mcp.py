"""Benchmark the MCP bridge: per-call overhead over the git commands a tool runs, stdio connect time (and
connect + first answer: the target is ≤ 1 s), and fleet-wide tool latency at 1,000 repos.

    python bench/bench_mcp.py [--runs 15] [--fleet-size 1000] [--connect-runs 5] [--workdir DIR] [--startup-only]

Per-call overhead: each tool is called in-process through the server's own call path
(`FleetServer.call_tool`: argument validation, repo resolution, fleet/ parsing, output validation, the
JSON envelope); the git subprocesses it started are recorded and then replayed bare (same argv and
environment, through subprocess), and `overhead_ms` = median(tool) - median(replay). Prints one JSON object of medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_scan import synthetic_index  # noqa: E402
from bench.fleetgen import generate  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.index.scan import scan  # noqa: E402
from mcp_bridge.server import build_server  # noqa: E402

CALLS = [
    ("repo.status", {}),
    ("repo.reflog", {"limit": 20}),
    ("repo.history", {"limit": 20}),
    ("commit.details", {"rev": "HEAD"}),
    ("diff.text", {}),
    ("repo.brief", {}),
]


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


class GitRecorder:
    """Collects the git processes started while it is active (argv and environment) to replay them.

    fleet/gitrun.py starts git with `os.posix_spawn`; the recorder wraps it.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict]] = []
        self._original = os.posix_spawn

    def __enter__(self) -> "GitRecorder":
        def recording(path, argv, env, **kw):
            if os.path.basename(str(path)) == "git":
                self.calls.append((list(argv), dict(env)))
            return self._original(path, argv, env, **kw)

        os.posix_spawn = recording
        return self

    def __exit__(self, *exc: object) -> None:
        os.posix_spawn = self._original


def replay(calls: list[tuple[list[str], dict]]) -> None:
    """The same git commands run the plain way (subprocess, output read to the end): git's own cost."""
    for argv, env in calls:
        subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def alternate(server, name: str, args: dict, calls: list, runs: int,
                    clock=time.perf_counter) -> tuple[list[float], list[float]]:
    """`runs` timings of the tool call and of replaying its git commands, alternated so machine noise hits
    both alike. With `time.process_time` as the clock, git's own CPU (in the children) is left out."""
    tool, bare = [], []
    for _ in range(runs):
        start = clock()
        await server.call_tool(name, args)
        tool.append(clock() - start)
        start = clock()
        replay(calls)
        bare.append(clock() - start)
    return tool, bare


async def time_against_git(server, name: str, args: dict, runs: int) -> dict:
    """One tool's median time against the bare git commands it ran, replayed alone (alternated runs)."""
    with GitRecorder() as rec:
        first = await server.call_tool(name, args)
    assert not first.is_error, first.content[0].text
    tool, bare = await alternate(server, name, args, rec.calls, runs)
    return {"tool": name, "git_commands": len(rec.calls), "response_bytes": len(first.content[0].text),
            "tool_ms": median_ms(tool), "bare_git_ms": median_ms(bare),
            "overhead_ms": round(median_ms(tool) - median_ms(bare), 2)}


async def per_call(server, repo: str, runs: int) -> list[dict]:
    return [await time_against_git(server, name, {"repo": repo, **args}, runs) for name, args in CALLS]


async def client_call(server, repo: str, runs: int) -> dict:
    """The same call through the official in-memory client (modern direct dispatcher), for comparison."""
    from mcp import Client

    samples = []
    async with Client(server) as client:
        for _ in range(runs):
            start = time.perf_counter()
            await client.call_tool("repo.status", {"repo": repo})
            samples.append(time.perf_counter() - start)
    return {"tool": "repo.status", "in_memory_client_ms": median_ms(samples)}


def connect_times(db: Path, runs: int) -> dict:
    """`fleetdeck mcp` spawned by the official stdio client: until the handshake is done (connect), and until
    the first tool call is answered (connect + first answer; the client lists the tools first). The tool
    definitions' cache (mcp_bridge/catalog.py) lives in a folder of this run: the first connect finds none
    (`stdio_first_answer_cold_cache_ms`, as after an upgrade), the medians are over warm connects. The 1-minute
    load average is recorded before and after (`load_average_1m`): on this shared 2-core machine the wall
    figures move with it, the CPU ones (`stdio_session_cpu_ms`, `import_ms`) much less. fleetdeck's modules
    are byte-compiled first, as `pip install` leaves them (run from a checkout with PYTHONDONTWRITEBYTECODE, as
    on this machine, every start would compile them from source: `byte_compiled` says it was done)."""
    from mcp import Client, StdioServerParameters

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "fleet"), str(ROOT / "mcp_bridge")],
                   check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    load_before = os.getloadavg()[0]
    cache = db.parent / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLEETDECK_DB": str(db), "XDG_CACHE_HOME": str(cache)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "fleet", "mcp"], env=env)

    async def once(mode: str) -> tuple[float, float]:
        start = time.perf_counter()
        async with Client(params, mode=mode) as client:
            connected = time.perf_counter() - start
            answer = await client.call_tool("fleet.radar", {"limit": 1})
            answered = time.perf_counter() - start
            assert not answer.is_error, answer.content[0].text
        return connected, answered

    result = {"stdio_first_answer_cold_cache_ms": round(asyncio.run(once("legacy"))[1] * 1000, 2)}
    for mode in ("auto", "legacy"):
        connects, answers = [], []
        for _ in range(runs):
            connected, answered = asyncio.run(once(mode))
            connects.append(connected)
            answers.append(answered)
        result[f"stdio_connect_{mode}_ms"] = median_ms(connects)
        result[f"stdio_first_answer_{mode}_ms"] = median_ms(answers)
    result["target_first_answer_ms"] = 1000
    cpu = [session_cpu(env) for _ in range(runs)]
    result["stdio_session_cpu_ms"] = median_ms(cpu)
    imports = []
    for _ in range(runs):
        code = ("import time; t = time.perf_counter(); import fleet.cli, mcp_bridge.sdk; "  # as `fleetdeck mcp` does
                "mcp_bridge.sdk.without_client(); import mcp_bridge.server; print(time.perf_counter() - t)")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**env, "PYTHONPATH": str(ROOT)})
        imports.append(float(proc.stdout))
    result["import_ms"] = median_ms(imports)
    result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # before, after
    result["byte_compiled"] = True
    return result


def session_cpu(env: dict) -> float:
    """CPU time (user + system) of one `fleetdeck mcp` process that answers initialize, tools/list and one
    tool call, then exits: the server's own work for a connect and first answer, which load on a shared
    machine barely moves (wall time doubles when another process holds the other core)."""
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "bench", "version": "0"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "fleet.radar", "arguments": {"limit": 1}}}]
    proc = subprocess.Popen([sys.executable, "-m", "fleet", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    for request in requests:
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        if "id" in request:
            reply = json.loads(proc.stdout.readline())
            assert "error" not in reply and not reply["result"].get("isError"), reply
    proc.stdin.close()
    proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, proc.returncode
    return usage.ru_utime + usage.ru_stime


def add_reflog(db: Path, events_per_repo: int) -> None:
    """Synthetic reflog lines and their digest events (commits and checkouts, hourly) for every repo."""
    index = open_index(db)
    now = int(time.time())
    ids = [r["id"] for r in index.summaries()]
    rows = []
    for rid in ids:
        for n in range(events_per_repo):
            kind = "commit" if n % 3 else "checkout"
            message = f"commit: change {n} in repo {rid}" if kind == "commit" else "checkout: moving from a to b"
            rows.append((rid, "HEAD", f"{n:040x}", f"{n + 1:040x}", now - n * 3600 - rid, "+0000",
                         "Bench <bench@example.com>", message, kind))
    with index.write() as conn:
        conn.executemany("insert or ignore into reflog (repo_id, ref, old_sha, new_sha, at, tz, identity, "
                         "message, kind) values (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("insert into events (repo_id, ref, old_sha, new_sha, at, identity, message, kind, "
                         "rewrote) values (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                         [(r[0], r[1], r[2], r[3], r[4], r[6], r[7], r[8]) for r in rows])
    index.close()


async def fleet_latency(db: Path, runs: int) -> dict:
    server = build_server(str(db))
    calls = [("fleet.radar", {}), ("fleet.radar", {"limit": 50}), ("fleet.repos", {"limit": 200}),
             ("fleet.search", {"query": "change 7"})]
    calls += [("fleet.digest", {"since": "7d"}), ("fleet.digest", {"since": "24h", "max_events": 1000})]
    out = {}
    for name, args in calls:
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            result = await server.call_tool(name, args)
            samples.append(time.perf_counter() - start)
            assert not result.is_error, result.content[0].text
        out[f"{name} {json.dumps(args, separators=(',', ':'))}"] = median_ms(samples)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--connect-runs", type=int, default=5)
    parser.add_argument("--fleet-size", type=int, default=1000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--startup-only", action="store_true", help="only the stdio connect figures")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="fleetdeck-bench-mcp-"))
    work.mkdir(parents=True, exist_ok=True)
    repos = generate(work / "fleet", 4)
    sample = repos[2]
    db = work / "small.db"
    with open_index(db) as index:
        scan(index, [str(work / "fleet")])
    result: dict = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    if args.startup_only:
        print(json.dumps({**result, "startup": connect_times(db, args.connect_runs)}, indent=2))
        return
    server = build_server(str(db))
    result["per_call"] = asyncio.run(per_call(server, str(sample), args.runs))
    result["client_path"] = asyncio.run(client_call(server, str(sample), args.runs))
    result["startup"] = connect_times(db, args.connect_runs)
    big = work / f"fleet-{args.fleet_size}.db"
    synthetic_index(big, args.fleet_size, sample)
    add_reflog(big, 20)
    result[f"fleet_tools_at_{args.fleet_size}_repos_ms"] = asyncio.run(fleet_latency(big, args.runs))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
