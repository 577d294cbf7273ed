"""Processes as Linux `/proc` shows them: parent, start time, command line, and a pid that cannot be recycled.

One parser of `/proc/<pid>/stat` for the presence detectors (agent processes and their children), the
write side (which process runs a proposal) and the audit log (which process degraded): `pid:start-time`
names a process so that a recycled pid is not mistaken for it. Elsewhere than Linux every read finds nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Proc:
    pid: int
    ppid: int
    start_ticks: int
    argv: list[str]


def parse_stat(text: str) -> tuple[int, int] | None:
    """(ppid, starttime) from `/proc/<pid>/stat`; the comm field may hold spaces and parentheses."""
    close = text.rfind(")")
    if close < 0:
        return None
    fields = text[close + 2:].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def read_proc(pid: int, proc_root: Path = Path("/proc")) -> Proc | None:
    base = proc_root / str(pid)
    try:
        stat = parse_stat((base / "stat").read_text("utf-8", "replace"))
        raw = (base / "cmdline").read_bytes()
    except OSError:
        return None
    if stat is None or not raw:
        return None
    argv = raw.rstrip(b"\x00").decode("utf-8", "replace").split("\x00")
    return Proc(pid, stat[0], stat[1], argv)


def ancestors(pid: int, depth: int = 8, proc_root: Path = Path("/proc")) -> list[int]:
    """`pid`'s parent, grandparent, ... (at most `depth`, stopping before init): on stdio, the MCP client
    that launched fleetdeck is one of them, possibly behind a shell or launcher."""
    chain: list[int] = []
    current = pid
    while len(chain) < depth:
        try:
            stat = parse_stat((proc_root / str(current) / "stat").read_text("utf-8", "replace"))
        except OSError:
            break
        if stat is None or stat[0] <= 1:
            break
        current = stat[0]
        chain.append(current)
    return chain


def process_start(pid: int, proc_root: Path = Path("/proc")) -> int | None:
    """The process's start time in clock ticks since boot (stat field 22), the pid-reuse guard."""
    try:
        stat = parse_stat((proc_root / str(pid) / "stat").read_text("utf-8", "replace"))
    except OSError:
        return None
    return stat[1] if stat else None


def boot_time(proc_root: Path = Path("/proc")) -> float:
    try:
        for line in (proc_root / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0.0


def process_table(proc_root: Path = Path("/proc")) -> dict[int, Proc]:
    table = {}
    try:
        names = os.listdir(proc_root)
    except OSError:
        return {}
    for name in names:
        if name.isdigit():
            proc = read_proc(int(name), proc_root)
            if proc is not None:
                table[proc.pid] = proc
    return table


def process_identity(pid: int | None = None) -> str | None:
    """`pid:start-time` of a process (this one by default), or None when /proc does not show it."""
    pid = os.getpid() if pid is None else pid
    start = process_start(pid)
    return None if start is None else f"{pid}:{start}"


def worker_alive(worker: str | None) -> bool:
    """Whether the process a `pid:start-time` names still runs (not merely a process with its pid)."""
    if not worker:
        return False
    pid = int(worker.split(":", 1)[0])
    return process_identity(pid) == worker


def die_with_parent(parent: int) -> None:
    """In a worker process: be terminated (SIGTERM) when `parent` dies, so a killed `serve` or `scan` never
    leaves its workers reading the fleet on their own (Linux's PR_SET_PDEATHSIG; elsewhere nothing). A parent
    that died before the request is noticed at once."""
    import ctypes
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(0)
