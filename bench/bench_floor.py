"""How low can a Python cold scan go? The least program that does a scan's unavoidable part, timed against
the `xargs -P2 git status` loop and the real `fleetdeck scan`, the three alternating in one run.

    python bench/bench_floor.py [--repos 1000] [--runs 5] [--workdir DIR]

The floor (`--floor ROOT DB [--raw]`, run as its own process like the scan) is what any scan that keeps the
reflog history must do at least, with nothing fleetdeck adds: walk the root for repos (into working trees
too, as discovery does, for nested repos), run git's `status` with the scan's own arguments in every working
tree (bare mirrors have none), read HEAD, packed-refs, config and every loose ref, read every reflog file and
store it in SQLite — one row per line, parsed by one regex (`lines`), or, lower still, each file's bytes as
one row, unparsed (`raw`) — in two forked workers taking turns at one write lock, one transaction per chunk of
24 repos, no index but the rowid, the WAL checkpointed at the end. A linked worktree counts as a repo of its
own whose git dir holds only its HEAD and HEAD log (the shared refs are read with its main repo, as the scan
reads them). It parses no status, no config, decides no event, checks nothing. Its ratio to the loop bounds
what the design can reach on this machine: a scan that stores the history line by line cannot be cheaper
than its floor.

Prints one JSON object: medians of --runs rounds (wall and CPU seconds, CPU counting every process each
started) and the ratios to the loop.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_scan import _med, make_fleet, scan_cmd, time_loop, timed_rss  # noqa: E402
from fleet.git.status import STATUS_ARGS  # noqa: E402

CHUNK = 24
LINE = re.compile(rb"^([0-9a-f]{40}) ([0-9a-f]{40}) (.*?) (\d+) ([+-]\d{4})\t?(.*)$", re.M)


def discover(root: str) -> list[tuple[str, str, bool]]:
    """(folder, git dir or .git file, bare) of every repo under `root`: working trees are walked too (for
    nested repos), their `.git` not; a `.git` file inside another working tree (a submodule) is its owner's."""
    found: list[tuple[str, str, bool]] = []
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:
        folder, inside = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        names = {e.name for e in entries}
        if ".git" in names:
            dotgit = os.path.join(folder, ".git")
            if os.path.isdir(dotgit) or not inside:
                found.append((folder, dotgit, False))
            inside = True
        elif {"HEAD", "objects", "refs"} <= names:
            found.append((folder, folder, True))
            continue
        stack += [(e.path, inside) for e in entries if e.name != ".git" and e.is_dir(follow_symlinks=False)]
    return found


def files_under(folder: str) -> list[str]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    return [p for e in entries for p in (files_under(e.path) if e.is_dir(follow_symlinks=False) else [e.path])]


def read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def read_repo(folder: str, gitdir: str, bare: bool, raw: bool) -> tuple[tuple, list[tuple]]:
    """One repo's row (its files' sizes: read, not parsed) and its reflog rows."""
    if os.path.isfile(gitdir):  # a linked worktree: `.git` names its git dir
        named = read(gitdir).split(b":", 1)[1].strip().decode()
        gitdir = os.path.join(folder, named)
    status = b"" if bare else subprocess.run(["git", "-C", folder, *STATUS_ARGS], capture_output=True).stdout
    head, packed, config = (read(os.path.join(gitdir, name)) for name in ("HEAD", "packed-refs", "config"))
    refs = [read(p) for p in files_under(os.path.join(gitdir, "refs"))]
    rows: list[tuple] = []
    logs = os.path.join(gitdir, "logs")
    for path in files_under(logs):
        ref, data = path[len(logs) + 1:], read(path)
        if raw:
            rows.append((folder, ref, None, None, None, None, None, data))
            continue
        rows += [(folder, ref, m[1].decode(), m[2].decode(), int(m[4]), m[5].decode(),
                  m[3].decode("utf-8", "replace"), m[6].decode("utf-8", "replace")) for m in LINE.finditer(data)]
    return (folder, head, len(status), len(packed), len(config), len(refs)), rows


_conn: sqlite3.Connection | None = None
_lock = None
_raw = False


def _init(db: str, lock, raw: bool) -> None:
    global _conn, _lock, _raw
    _conn, _lock, _raw = sqlite3.connect(db, timeout=60), lock, raw
    _conn.execute("pragma synchronous=normal")


def _chunk(chunk: list[tuple[str, str, bool]]) -> int:
    read_ = [read_repo(*item, _raw) for item in chunk]
    with _lock, _conn:
        _conn.executemany("insert into repos values (?, ?, ?, ?, ?, ?)", [repo for repo, _ in read_])
        _conn.executemany("insert into reflog (repo, ref, old, new, at, tz, who, message) values "
                          "(?, ?, ?, ?, ?, ?, ?, ?)", [row for _, rows in read_ for row in rows])
    return len(chunk)


def floor(root: str, db: str, raw: bool) -> None:
    """The floor program itself (runs in its own process)."""
    conn = sqlite3.connect(db)
    conn.execute("pragma journal_mode=wal")
    conn.execute("create table repos (path, head, status_bytes, packed_bytes, config_bytes, loose_refs)")
    conn.execute("create table reflog (id integer primary key, repo, ref, old, new, at, tz, who, message)")
    conn.commit()
    conn.close()
    items = discover(root)
    context = multiprocessing.get_context("fork")
    with context.Pool(2, _init, (db, context.Lock(), raw)) as pool:
        done = sum(pool.imap_unordered(_chunk, [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]))
    assert done == len(items)
    conn = sqlite3.connect(db)   # the last connection to close checkpoints the WAL, as the scan's does
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=str(ROOT / "bench" / "out"), help="generated fleets are kept here")
    parser.add_argument("--floor", nargs=2, metavar=("ROOT", "DB"), help=argparse.SUPPRESS)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor(*args.floor, args.raw)
        return
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    root, trees, shape = make_fleet("realistic", args.repos, workdir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load_before = os.getloadavg()[0]
    runs: dict[str, list[tuple[float, float]]] = {"loop": [], "floor_lines": [], "floor_raw": [], "scan": []}
    time_loop(trees)  # warm the page cache for every side
    for _ in range(args.runs):
        runs["loop"].append(time_loop(trees))
        for name, cmd in (("floor_lines", []), ("floor_raw", ["--raw"]), ("scan", None)):
            db = workdir / f"floor-{os.getpid()}.db"
            command = (scan_cmd(root, db) if cmd is None
                       else [sys.executable, __file__, "--floor", str(root), str(db), *cmd])
            runs[name].append(timed_rss(command, env)[:2])
            for suffix in ("", "-wal", "-shm", ".migrate.lock"):
                Path(str(db) + suffix).unlink(missing_ok=True)
    medians = {name: (_med([r[0] for r in rs]), _med([r[1] for r in rs])) for name, rs in runs.items()}
    loop_wall, loop_cpu = medians["loop"]
    result = {"profile": "realistic", **shape, "runs": args.runs}
    for name, (wall, cpu) in medians.items():
        result[f"{name}_s"], result[f"{name}_cpu_s"] = wall, cpu
        if name != "loop":
            result[f"{name}_ratio"] = round(wall / loop_wall, 2)
            result[f"{name}_ratio_cpu"] = round(cpu / loop_cpu, 2)
    result["load_avg"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
