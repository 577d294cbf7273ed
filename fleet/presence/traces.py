"""Traces agents leave inside the repo itself: Aider's `.aider.chat.history.md` and Crush's `.crush/crush.db`.

Only mtimes are used, plus Aider's `> Applied edit to <path>` lines for touched files (its `#### ` prompt
lines are never kept). One or two `stat`s per repo.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from fleet.presence.files import CACHE, read_tail
from fleet.presence.model import DEFAULT_THRESHOLDS, MAX_FILES, Sighting, relative_files
from fleet.presence.sqlite_ro import store_mtime

AIDER_HISTORY = ".aider.chat.history.md"
_APPLIED = b"> Applied edit to "


def applied_edits(path: Path) -> tuple[str, ...]:
    """Files from the newest `> Applied edit to X` lines of an Aider chat history, newest first."""
    found: list[str] = []
    for line in reversed(read_tail(path, 64 * 1024).split(b"\n")):
        if line.startswith(_APPLIED):
            name = line[len(_APPLIED):].decode("utf-8", "replace").strip()
            if name and name not in found:
                found.append(name)
            if len(found) >= MAX_FILES:
                break
    return tuple(found)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    del home, environ  # traces live in the repos
    cutoff = now - thresholds.recent
    out = []
    for repo in repos:
        st = _stat(os.path.join(repo, AIDER_HISTORY))
        if st is not None and st.st_mtime >= cutoff:
            history = Path(repo, AIDER_HISTORY)
            files = relative_files(repo, repo, CACHE.get(history, st, applied_edits))
            out.append(Sighting(agent="aider", repo=repo, source="repo-trace",
                                last_activity=min(st.st_mtime, now), files=files))
        if _stat(os.path.join(repo, ".crush")) is None:
            continue
        crush = store_mtime(Path(repo, ".crush", "crush.db"))
        if crush is not None and crush >= cutoff:
            out.append(Sighting(agent="crush", repo=repo, source="repo-trace", last_activity=min(crush, now)))
    return out
