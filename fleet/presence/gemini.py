"""Gemini CLI: chats under `<gemini home>/tmp/<project id>/chats/` (`session-*.jsonl`, legacy `*.json`).

Chat lines carry no cwd: the project folder says whose it is, through its `.project_root` marker, the
`projects.json` registry (`{projects: {"/abs/path": "slug"}}`), or for legacy folders the SHA-256 of the
project root. Homes: `$GEMINI_CLI_HOME/.gemini` or `~/.gemini`, and the sandbox's `~/.cache/.gemini`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from fleet.presence.files import CACHE, json_lines_reversed, read_json, read_tail, recent_files
from fleet.presence.model import DEFAULT_THRESHOLDS, Activity, RepoMap, Sighting, relative_files

FILE_KEYS = ("file_path", "absolute_path")
_NEEDLES = (b'"user"', b'"gemini"')                       # only these record types are read below


def gemini_homes(home: Path, environ: Mapping[str, str]) -> list[Path]:
    base = environ.get("GEMINI_CLI_HOME")
    first = Path(base) / ".gemini" if base and os.path.isabs(base) else home / ".gemini"
    return [first, home / ".cache" / ".gemini"]


def _summarise(records: Iterable[dict[str, Any]]) -> Activity:
    act = Activity()
    turn_known = False
    for record in records:
        kind = record.get("type")
        if kind not in ("user", "gemini"):
            continue
        calls = record.get("toolCalls") if isinstance(record.get("toolCalls"), list) else []
        if not turn_known:
            turn_known = True
            act.idle = kind == "gemini" and not calls          # a final answer with no tool call ends the turn
        for call in reversed(calls):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                continue
            act.note_tool(call["name"], call.get("args"), FILE_KEYS)
    return act


def parse_chat(path: Path) -> Activity:
    """Last tool, files and turn state of one chat file (a JSONL tail, or a small legacy JSON document)."""
    if path.suffix == ".json":
        doc = read_json(path)
        messages = doc.get("messages") if isinstance(doc, dict) else None
        return _summarise(reversed([m for m in messages if isinstance(m, dict)]) if isinstance(messages, list)
                          else [])
    return _summarise(json_lines_reversed(read_tail(path), _NEEDLES))


class _Owners:
    """Project folder → project root, resolved lazily from the marker, the registry, or the legacy hash."""

    def __init__(self, root: Path, repos: list[str]) -> None:
        self._root = root
        self._repos = repos
        self._registry: dict[str, str] | None = None
        self._hashes: dict[str, str] | None = None

    def owner(self, folder: Path) -> str | None:
        try:
            marker = (folder / ".project_root").read_text("utf-8", "replace").strip()
        except OSError:
            marker = ""
        if os.path.isabs(marker):
            return marker
        if self._registry is None:
            doc = read_json(self._root / "projects.json")
            projects = doc.get("projects") if isinstance(doc, dict) else None
            self._registry = ({slug: path for path, slug in projects.items() if isinstance(slug, str)}
                              if isinstance(projects, dict) else {})
        if folder.name in self._registry:
            return self._registry[folder.name]
        if self._hashes is None:
            self._hashes = {hashlib.sha256(repo.encode()).hexdigest(): repo for repo in self._repos}
        return self._hashes.get(folder.name)


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    out = []
    for root in gemini_homes(home, environ):
        tmp = root / "tmp"
        owners = _Owners(root, repos)
        found = [(p, st) for p, st in recent_files(tmp, "*/chats/*", cutoff) if p.suffix in (".jsonl", ".json")]
        found += recent_files(tmp, "*/chats/*/*.jsonl", cutoff)                 # subagent chats
        for path, st in found:
            folder = path.parent.parent if path.parent.name == "chats" else path.parent.parent.parent
            project = owners.owner(folder)
            repo = repo_map.find(project)
            if repo is None:
                continue
            act = CACHE.get(path, st, parse_chat)
            out.append(Sighting(agent="gemini", repo=repo, source="session", last_activity=min(st.st_mtime, now),
                                tool=act.tool, files=relative_files(repo, project, act.files), idle=act.idle))
    return out
