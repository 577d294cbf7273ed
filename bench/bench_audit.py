"""Benchmark the audit log: appends per second with batched fsync, the cost one entry adds to an MCP read
tool call, and `fleetdeck audit verify` over a million entries (wall time and peak memory).

    python bench/bench_audit.py [--appends 20000] [--calls 2000] [--rounds 7] [--verify-entries 1000000]
                                [--no-signed-verify] [--only-verify] [--workdir DIR]

Appends: `AuditLog.record` in a loop with the default batching (fsync at most 200 ms or 256 appends after an
append), unsigned and Ed25519-signed. Per-call cost: the same read tool (`fleet.repos`, limit 1, over a
two-repo index) called in-process through `FleetServer.call_tool`, alternating rounds with the audit on and
off; cost = median(on) - median(off) of the per-call round means. Verify: a log of N entries is generated (in
batches, through the log's own writer) and `python -m fleet audit verify --json` runs on it as a child
process; its peak RSS is its own VmHWM (and, with workers, the largest worker's ru_maxrss), its CPU time
includes its workers'. The signed log is verified twice: with signature checks in worker
processes (the default, one per CPU) and with `--workers 1` (all in one process). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
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

from fleet.audit.config import AuditConfig  # noqa: E402
from fleet.audit.keys import keygen  # noqa: E402
from fleet.audit.ledger import AuditLog, _fields  # noqa: E402


def make_log(base: Path, key: Path | None = None) -> AuditLog:
    return AuditLog(AuditConfig(enabled=True, dir=base / "audit", data_dir=base, key=key, keys_dir=base / "keys",
                                segment_max_bytes=64 * 1024 * 1024, segments_kept=100_000))


def appends_per_second(base: Path, count: int, key: Path | None) -> float:
    log = make_log(base, key)
    started = time.perf_counter()
    for i in range(count):
        log.record("tool_call", tool="repo.status", agent="claude-code", repo_path="/home/me/src/app",
                   args={"repo": "app", "i": i}, risk="read", result="ok", duration_ms=1.25,
                   summary="repo.status ok")
    elapsed = time.perf_counter() - started
    log.close()
    return count / elapsed


async def call_rounds(db: Path, calls: int, rounds: int) -> dict:
    from mcp_bridge.server import build_server

    os.environ["FLEETDECK_AUDIT"] = "off"
    off = build_server(str(db))
    os.environ["FLEETDECK_AUDIT"] = "on"
    on = build_server(str(db))
    assert on.kit.audit.enabled and not off.kit.audit.enabled
    means: dict[str, list[float]] = {"on": [], "off": []}
    for server in (on, off):                                    # warm both up
        for _ in range(50):
            await server.call_tool("fleet.repos", {"limit": 1})
    for _ in range(rounds):
        for name, server in (("off", off), ("on", on)):
            started = time.perf_counter()
            for _ in range(calls):
                await server.call_tool("fleet.repos", {"limit": 1})
            means[name].append((time.perf_counter() - started) / calls * 1000)
    on_ms, off_ms = statistics.median(means["on"]), statistics.median(means["off"])
    return {"call_ms_audit_off": round(off_ms, 4), "call_ms_audit_on": round(on_ms, 4),
            "added_ms_per_call": round(on_ms - off_ms, 4)}


def small_index(base: Path) -> Path:
    from fleet.index.scan import scan
    from fleet.index.store import open_index

    root = base / "fleet"
    for name in ("alpha", "beta"):
        repo = root / name
        repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q",
                        "--allow-empty", "-m", "one"], check=True)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return db


def generate(base: Path, count: int, key: Path | None) -> Path:
    """A log of `count` entries written by the log's own writer, 1,000 entries per locked write."""
    log = make_log(base, key)
    fields = _fields("tool_call", "repo.status ok", tool="repo.status",
                     agent={"name": "claude-code", "self_declared": True}, risk="read", duration_us=1250,
                     repo=log.fingerprint("repo", "/home/me/src/app"), args=log.fingerprint("args", {"repo": "x"}))
    done = 0
    while done < count:
        batch = min(1000, count - done)
        with log._lock, log._flock():
            log._sync_state()
            log._write([fields] * batch, durable=False)
        done += batch
    log.close()
    return log.dir


# The CLI in a child process; afterwards it prints its own peak RSS (VmHWM: the high-water mark of this
# program's memory only; ru_maxrss would include the forking parent's pages, which Linux carries across exec).
VERIFY_CHILD = """
import sys
from fleet.cli import main
code = main(sys.argv[1:])
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0].split()[1]
import os, resource
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss   # the largest signature worker (an upper bound)
cpu = sum(os.times()[:4])                                          # user + system, this process and its workers
print(f"VmHWM {hwm} {code} {workers} {cpu:.2f}", file=sys.stderr)
"""


def verify_child(folder: Path, pubkey: Path | None, workers: int | None = None) -> dict:
    argv = [sys.executable, "-c", VERIFY_CHILD, "audit", "verify", "--dir", str(folder), "--json"]
    if pubkey:
        argv += ["--pubkey", str(pubkey), "--require-signed"]
    if workers is not None:
        argv += ["--workers", str(workers)]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    report = json.loads(proc.stdout)
    if not report["ok"]:
        raise SystemExit(f"bench: the generated log does not verify: {report}")
    _, hwm_kb, _, worker_kb, cpu = proc.stderr.strip().splitlines()[-1].split()
    out = {"entries": report["entries"], "seconds": round(elapsed, 2), "cpu_seconds": float(cpu),
           "peak_rss_mb": round(int(hwm_kb) / 1024, 1), "entries_per_s": round(report["entries"] / elapsed)}
    if int(worker_kb):
        out["worker_peak_rss_mb"] = round(int(worker_kb) / 1024, 1)
    return out


def appends_and_calls(base: Path, args: argparse.Namespace, key: Path, result: dict) -> None:
    result["appends_per_s_unsigned"] = round(appends_per_second(base / "a-unsigned", args.appends, None))
    result["appends_per_s_signed"] = round(appends_per_second(base / "a-signed", args.appends, key))
    os.environ["FLEETDECK_AUDIT_DIR"] = str(base / "calls-audit")
    result["mcp_read_call"] = asyncio.run(call_rounds(small_index(base / "calls"), args.calls, args.rounds))
    del os.environ["FLEETDECK_AUDIT_DIR"]
    os.environ["FLEETDECK_AUDIT_KEY"] = str(key)
    os.environ["FLEETDECK_AUDIT_DIR"] = str(base / "calls-audit-signed")
    result["mcp_read_call_signed"] = asyncio.run(call_rounds(small_index(base / "calls-signed"), args.calls,
                                                             args.rounds))
    del os.environ["FLEETDECK_AUDIT_KEY"], os.environ["FLEETDECK_AUDIT_DIR"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--verify-entries", type=int, default=1_000_000)
    parser.add_argument("--no-signed-verify", action="store_true", help="verify only an unsigned log")
    parser.add_argument("--only-verify", action="store_true", help="skip the append and per-call benchmarks")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-audit-", dir=args.workdir))
    _, key, public = keygen(base / "keys")
    result: dict = {}
    if not args.only_verify:
        appends_and_calls(base, args, key, result)
    folder = generate(base / "v-unsigned", args.verify_entries, None)
    result["verify_unsigned"] = verify_child(folder, None)
    if not args.no_signed_verify:
        folder = generate(base / "v-signed", args.verify_entries, key)
        result["verify_signed"] = verify_child(folder, public)                     # workers: one per CPU
        result["verify_signed_inline"] = verify_child(folder, public, workers=1)   # every check in one process
    print(json.dumps(result, indent=2))
    subprocess.run(["rm", "-rf", str(base)], check=False)


if __name__ == "__main__":
    main()
