""""Audit degraded", seen by every process: one small state file per degraded process, next to the index.

A process whose appends fail writes `<data dir>/audit-degraded/<pid>-<start time>.json` (0600 in a 0700
folder; best-effort, rewritten with each entry it loses) saying since when, how many entries it
lost and why. It deletes the file right after its `gap` entry is in the chain. So a dashboard served by
another process shows the degradation (`others()`), and when a degraded process ends before it could write
its gap, the next process that appends writes the gap for it (`orphans()`), then deletes the file.

The files live next to the index, not in the audit folder: that folder is what fails (read-only, full, gone,
or write-once storage where a file cannot be deleted). A data folder that cannot be written either leaves
the degradation visible in the failing process only (its log, its `audit.tail`, its answers' `_meta`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from fleet.procinfo import process_identity, worker_alive

FOLDER = "audit-degraded"
log = logging.getLogger("fleetdeck.audit")


def identity() -> str:
    """This process as `pid:start-time` (a recycled pid is not mistaken for it)."""
    return process_identity() or f"{os.getpid()}:0"


def role() -> str:
    """What this process is, in a word a person recognizes (`mcp`, `serve`, or the program's name)."""
    args = sys.argv[1:]
    for word in ("mcp", "serve"):
        if word in args:
            return word
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c", "-m") else "python"
    return program[:40]


def alive(process: str) -> bool:
    return worker_alive(process)


class DegradedState:
    """This process's state file in `folder` (the data folder's `audit-degraded/`)."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = data_dir / FOLDER
        self.process = identity()
        self.path = self.folder / (self.process.replace(":", "-") + ".json")
        self._failed = False

    def publish(self, degraded: dict[str, Any], audit_dir: Path) -> None:
        """Write (replace) this process's state; never raises."""
        state = {**degraded, "process": self.process, "pid": os.getpid(), "role": role(), "dir": str(audit_dir)}
        tmp = self.folder / f".{self.path.name}.tmp"
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                data = json.dumps(state, sort_keys=True).encode()
                if os.write(fd, data) != len(data):
                    raise OSError("short write")
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            self._failed = False
        except OSError as exc:
            if not self._failed:
                log.error("audit degraded, and other processes cannot be told (%s: %s)", self.folder, exc)
            self._failed = True

    def clear(self, path: Path | None = None) -> None:
        """Delete this process's state file (or another's, once its gap is written); never raises."""
        try:
            (path or self.path).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.error("audit: cannot delete %s: %s", path or self.path, exc)

    def stamp(self) -> int | None:
        """The folder's mtime (changes whenever a state file comes or goes); None when there is no folder."""
        try:
            return os.stat(self.folder).st_mtime_ns
        except OSError:
            return None

    def others(self) -> list[dict[str, Any]]:
        """Every other process's state, oldest first, each with `alive` (False: it ended before its gap)."""
        found = []
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return []
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            state = _read(self.folder / name)
            if state is not None and state.get("process") != self.process:
                found.append({**state, "alive": alive(str(state["process"])), "file": name})
        return sorted(found, key=lambda s: str(s.get("since")))

    def orphans(self) -> list[tuple[Path, dict[str, Any]]]:
        """(file, state) of processes that ended while degraded: their gaps are still to be written."""
        return [(self.folder / s["file"], s) for s in self.others() if not s["alive"]]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as fh:
            state = json.loads(fh.read(65536))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("process"), str):
        return None
    return state
