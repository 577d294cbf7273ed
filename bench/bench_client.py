"""Benchmark agents' end-to-end latency: per-repo tools called by the official MCP Python client over stdio
against the bare git commands they run, on bench_large.py's large repository, in the same run.

    python bench/bench_client.py [--commits 50000] [--files 3000] [--runs 15] [--workdir DIR]

`fleetdeck mcp` is spawned by the official client (`mcp.Client` over `StdioServerParameters`, as an agent's
client does); the tools are listed first (the client keeps their output schemas and validates every
structured answer against its tool's schema, as it does for any agent). Each tool is first called in-process
once to record the git commands it starts (bench_mcp.GitRecorder); then client calls and bare replays of
those commands alternate, so machine noise hits both alike. Per tool: `client_ms` (call sent → answer
validated, the whole round trip an agent waits), `bare_git_ms`, their ratio and difference, the answer's
size (`structured_bytes`: the structured answer as compact JSON; `frame_bytes`: the whole JSON-RPC result
as sent) and `validate_ms`, the client's own check of the answer against the schema, timed again alone on the
answer it got. `cpu_ms` is the same comparison in CPU time, which a loaded machine moves far less than wall
time: the client's and the server's CPU per call (the server's includes the git it ran, from /proc at clock-tick
resolution, so over many runs) against the bare git commands' own CPU. The load average (os.getloadavg) is
recorded before and after. A second pass declares Claude
Code's client name (`per_call_declared_claude-code`): the answer it gets carries no text mirror of a large
answer (mcp_bridge/envelope.py), so its frame is about half.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_large import _git, build  # noqa: E402
from bench.bench_mcp import GitRecorder, median_ms, replay  # noqa: E402
from fleet.index.scan import scan  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from mcp_bridge.server import build_server  # noqa: E402

# The same client declaring Claude Code's name and version: what a client that reads structuredContent alone
# receives (mcp_bridge/envelope.py: a large answer travels once).
CLAUDE_CODE = ("claude-code", "2.1.280")
TARGETS = {"commit.details": ("ratio", 1.5), "repo.status": ("delta_ms", 5.0), "repo.history": ("delta_ms", 5.0)}


def calls(repo: Path) -> list[tuple[str, dict]]:
    wide = _git(repo, "log", "-1", "--format=%H", "--grep=touch many files", "main").strip()
    return [("commit.details", {"repo": str(repo), "rev": wide}),
            ("repo.status", {"repo": str(repo)}),
            ("repo.history", {"repo": str(repo), "limit": 20})]


async def recorded(db: Path, todo: list[tuple[str, dict]]) -> list[list]:
    """The git commands each call starts, recorded from an in-process call of the same tool."""
    server = build_server(str(db))
    out = []
    for name, args in todo:
        with GitRecorder() as rec:
            result = await server.call_tool(name, args)
        assert not result.is_error, result.content[0].text
        out.append(rec.calls)
    return out


async def through_client(db: Path, cache: Path, todo: list[tuple[str, dict]], gits: list[list],
                         runs: int, declared: tuple[str, str] | None = None) -> list[dict]:
    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLEETDECK_DB": str(db), "XDG_CACHE_HOME": str(cache)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "fleet", "mcp"], env=env)
    rows = []
    me = Implementation(name=declared[0], version=declared[1]) if declared else None
    async with Client(params, client_info=me) as client:
        await client.list_tools()
        server = server_pid()
        for (name, args), git in zip(todo, gits):
            first = await client.call_tool(name, args)
            assert not first.is_error, first.content[0].text
            took, bare, checks = [], [], []
            cpu = {"client": 0.0, "server": 0.0, "git": 0.0}
            for _ in range(runs):
                server_before, client_before = process_cpu(server), time.process_time()
                start = time.perf_counter()
                result = await client.call_tool(name, args)
                took.append(time.perf_counter() - start)
                cpu["client"] += time.process_time() - client_before
                cpu["server"] += process_cpu(server) - server_before
                git_before = children_cpu()
                start = time.perf_counter()
                replay(git)
                bare.append(time.perf_counter() - start)
                cpu["git"] += children_cpu() - git_before
                start = time.perf_counter()
                await client.session.validate_tool_result(name, result)
                checks.append(time.perf_counter() - start)
            client_ms, git_ms = median_ms(took), median_ms(bare)
            whole = (cpu["client"] + cpu["server"]) / runs * 1000
            frame = first.model_dump_json(by_alias=True, exclude_none=True)
            rows.append({"tool": name, "git_commands": len(git), "client_ms": client_ms, "bare_git_ms": git_ms,
                         "ratio": round(client_ms / git_ms, 2), "delta_ms": round(client_ms - git_ms, 2),
                         "validate_ms": median_ms(checks),
                         "cpu_ms": {"client": round(cpu["client"] / runs * 1000, 2),
                                    "server_with_its_git": round(cpu["server"] / runs * 1000, 2),
                                    "bare_git": round(cpu["git"] / runs * 1000, 2),
                                    "ratio": round(whole / (cpu["git"] / runs * 1000), 2) if cpu["git"] else None},
                         "structured_bytes": len(json.dumps(first.structured_content, separators=(",", ":"))),
                         "frame_bytes": len(frame.encode()), "text_bytes": sum(len(c.text) for c in first.content)})
    for row in rows:
        kind, bound = TARGETS[row["tool"]]
        row["target"] = f"{kind} <= {bound}"
        row["met"] = row[kind] <= bound
    return rows


def server_pid() -> int:
    """The `fleetdeck mcp` process the client started (this process's one child running `-m fleet mcp`)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if int(stat[1]) == os.getpid() and b"fleet" in cmd and b"mcp" in cmd:
                return int(entry)
    raise SystemExit("the client's fleetdeck mcp process was not found")


def process_cpu(pid: int) -> float:
    """CPU seconds of a process and of the children it has waited for (the git it ran), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=50_000)
    parser.add_argument("--files", type=int, default=3_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    base = args.workdir or Path(tempfile.mkdtemp(prefix="fleetdeck-bench-client-"))
    repo = build(base, args.commits, args.files)
    db = base / "client.db"
    for stale in base.glob("client.db*"):
        stale.unlink()
    with open_index(db) as index:
        scan(index, [str(repo)])
    todo = calls(repo)
    gits = asyncio.run(recorded(db, todo))
    load_before = os.getloadavg()[0]
    rows = asyncio.run(through_client(db, base / "client-cache", todo, gits, args.runs))
    as_claude = asyncio.run(through_client(db, base / "client-cache", todo, gits, args.runs, CLAUDE_CODE))
    print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
                      "commits": args.commits, "files": args.files, "runs": args.runs,
                      "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                      "per_call": rows, f"per_call_declared_{CLAUDE_CODE[0]}": as_claude}, indent=2))


if __name__ == "__main__":
    main()
