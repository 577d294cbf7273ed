"""Amp: threads `$XDG_DATA_HOME/amp/threads/T-*.json`, workspace folders in `env.initial.trees[].uri`."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from fleet.presence.files import CACHE, recent_files
from fleet.presence.jsonscan import head_and_tail, string_values
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting, path_from_uri
from fleet.xdg import data_home


def _trees(path: Path) -> tuple[str, ...]:
    text = head_and_tail(path)
    found = []
    start = text.find('"trees"')
    while start >= 0:
        end = text.find("]", start)
        for uri in string_values(text[start:end if end > 0 else None], "uri"):
            local = path_from_uri(uri)
            if local and local not in found:
                found.append(local)
        start = text.find('"trees"', start + 7)
    return tuple(found)


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    threads = data_home(environ, home) / "amp" / "threads"
    repo_map = RepoMap.of(repos)
    out = []
    for path, st in recent_files(threads, "T-*.json", now - thresholds.recent):
        for folder in CACHE.get(path, st, _trees):
            repo = repo_map.find(folder)
            if repo is not None:
                out.append(Sighting(agent="amp", repo=repo, source="session", last_activity=min(st.st_mtime, now)))
    return out
