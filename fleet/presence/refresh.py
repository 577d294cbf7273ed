"""Run every presence detector over the fleet's repos and replace the index's presence rows.

The watcher calls `refresh_presence` periodically, so a refresh must be cheap: detectors stat files and
skip anything older than the recent window, read bounded tails, and reuse parses of unchanged files. A
detector that fails (an unexpected format, a permission error) is logged and skipped; the others still run.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Callable, Mapping

from fleet.presence import (amp, bridge, claude, cline, codex, continuedev, copilot, cursor, editors, gemini,
                            goose, hooks, opencode, procs, qwen, traces)
from fleet.presence.merge import merge
from fleet.presence.model import DEFAULT_THRESHOLDS, Sighting, Thresholds
from fleet.presence.store import read_rows, replace_rows
from fleet.presence.switches import presence_switches
from fleet.presence.waits import WAITS
from fleet.timespec import iso

log = logging.getLogger(__name__)

Detector = Callable[..., list[Sighting]]
DETECTORS: dict[str, Detector] = {
    "procs": procs.detect, "claude": claude.detect, "codex": codex.detect, "gemini": gemini.detect,
    "qwen": qwen.detect, "copilot": copilot.detect, "opencode": opencode.detect, "kilo": opencode.detect_kilo,
    "goose": goose.detect, "cline": cline.detect, "continue": continuedev.detect, "amp": amp.detect,
    "cursor": cursor.detect, "editors": editors.detect, "traces": traces.detect,
}


# The detectors that read no agent's files (only the process table): all that runs when the settings turn
# `presence.read_agent_sessions` off (fleet.presence.switches).
PROCESS_ONLY = ("procs",)


def detect_all(repos: list[str], now: float, home: Path, environ: Mapping[str, str],
               thresholds: Thresholds = DEFAULT_THRESHOLDS, only: tuple[str, ...] | None = None) -> list[Sighting]:
    found: list[Sighting] = []
    for name, detect in DETECTORS.items():
        if only is not None and name not in only:
            continue
        try:
            found += detect(repos, now, home, environ, thresholds=thresholds)
        except Exception:  # one broken store must not hide every other agent
            log.warning("presence: detector %s failed", name, exc_info=True)
    return found


def refresh_presence(index, now: float | None = None, home: Path | str | None = None,
                     environ: Mapping[str, str] | None = None, thresholds: Thresholds | None = None,
                     observe: Callable[[list[Sighting], list[dict], float], None] | None = None) -> list[dict]:
    """Detect agents in every indexed repo, store the merged rows (replacing the old ones) and return them.

    The settings' off switches hold: with `read_agent_sessions` off only the process table is looked at,
    with `record_mcp_clients` off the MCP clients' records are not read. `observe(sightings, rows, now)` is
    told what the rows were made of (the watcher's Pulse watches the live sessions' files with it)."""
    environ = os.environ if environ is None else environ
    switches = presence_switches(environ)
    home = Path(home) if home is not None else Path(environ.get("HOME") or Path.home())
    now = time.time() if now is None else now
    thresholds = thresholds or DEFAULT_THRESHOLDS
    records = {r["path"]: r for r in index.summaries()}
    repos = list(records)
    found = detect_all(repos, now, home, environ, thresholds,
                       None if switches["read_agent_sessions"] else PROCESS_ONLY)
    if switches["record_mcp_clients"]:
        found += bridge.sightings(index, repos, now, thresholds)
    found += hooks.sightings(index, repos, now, thresholds)
    rows = merge(WAITS.apply(found, now), now, thresholds)
    WAITS.settle(rows, now)
    for row in rows:
        record = records[row["repo"]]
        row["repo_id"] = record.get("id")
        row["repo_name"] = record.get("name")
        row["branch"] = row["branch"] or record.get("branch")
        row["refreshed_at"] = iso(now)
    replace_rows(index, rows)
    if observe is not None:
        observe(found, rows, now)
    return rows


def presence(index, repo: str | None = None) -> list[dict]:
    """The stored presence rows (as of the last refresh), optionally of one repo path."""
    return read_rows(index, repo)
