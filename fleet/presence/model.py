"""What a presence detector reports, and how a path is mapped to the fleet repo that owns it.

Every detector returns `Sighting`s: one observation of one agent in one repo from one source. The merge step
(`fleet.presence.merge`) turns them into per-(agent, repo) rows with a state. A sighting carries only what
may leave a detector: agent id, repo, source, times, branch, tool name, repo-relative paths and a pid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping
from urllib.parse import unquote, urlparse

from fleet.presence.files import CACHE

MAX_FILES = 8
PENDING_S = 5.0     # a tool call a session file shows unanswered this long waits on the person (FLAP_S's span)


@dataclass(frozen=True)
class Thresholds:
    """Seconds that separate the states (FluxGit's constants): working, recent, and a 'fresh' child process."""

    working: float = 120.0
    recent: float = 900.0
    fresh_child: float = 600.0


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Sighting:
    agent: str
    repo: str
    source: str                      # process | session | repo-trace | ide | mcp
    last_activity: float | None = None
    branch: str | None = None
    tool: str | None = None
    files: tuple[str, ...] = ()
    pid: int | None = None
    alive: bool = False              # a live agent process is known to be in the repo
    busy: bool = False               # positive evidence of work right now (busy status, fresh child, running tool)
    idle: bool = False               # the agent's turn is known to be finished
    session: str = ""                # the agent's own session id (hook, session file) or `mcp:<id>`
    waiting_kind: str | None = None  # the agent is blocked on the person: permission | question | idle
    waiting_since: float | None = None  # (from a hook, or from a session file: see Activity.sighting)
    ended: bool = False              # the agent's hook said the session ended
    file: str | None = None          # the session file it was read from (watched between refreshes; never stored)
    matures_at: float | None = None  # when the unanswered tool call it holds becomes a wait (PENDING_S after it)


@dataclass
class Activity:
    """What one session file or record says, before it is mapped to a repo (cacheable: no `now` inside)."""

    cwd: str | None = None
    branch: str | None = None
    tool: str | None = None
    files: list[str] = field(default_factory=list)   # absolute, or relative to `cwd`; newest first
    idle: bool = False
    busy: bool = False
    at: float | None = None          # when the record that says how the turn stands was written
    pending: str | None = None       # that record is a tool call still unanswered: permission | question
    session: str = ""                # the agent's session id, where the file says it

    def sighting(self, agent: str, repo: str, mtime: float, now: float, session: str = "",
                 path: str | None = None) -> "Sighting":
        """This session file's evidence about `repo` (times in the future are clamped to `now`). What the file
        says of waiting: a tool call of the kind that asks the person, unanswered for PENDING_S (until then,
        `matures_at` says when it will be), or a finished turn; the merge believes it only while the agent's
        process lives (fleet/presence/merge.py)."""
        at = min(self.at if self.at is not None else mtime, now)
        kind = self.pending if self.pending and now - at >= PENDING_S else "idle" if self.idle else None
        return Sighting(agent=agent, repo=repo, source="session", last_activity=min(mtime, now), branch=self.branch,
                        tool=self.tool, files=relative_files(repo, self.cwd, self.files), idle=self.idle,
                        session=self.session or session, waiting_kind=kind, waiting_since=at if kind else None,
                        file=path, matures_at=at + PENDING_S if self.pending and now - at < PENDING_S else None)

    def note_tool(self, name: str, args: object, keys: Iterable[str]) -> None:
        """Remember the newest tool name and the file paths its arguments name under `keys`."""
        if self.tool is None:
            self.tool = name
        if not isinstance(args, dict):
            return
        for key in keys:
            value = args.get(key)
            if isinstance(value, str) and value not in self.files and len(self.files) < MAX_FILES:
                self.files.append(value)


class RepoMap:
    """Longest-prefix mapping of paths to fleet repos, so a nested worktree or submodule wins over its parent.

    Lookup walks up the path's parents with dict hits (O(depth)), so 500 repos cost nothing extra. Paths
    that do not match as written are retried through `realpath` (symlinked homes), cached per map.
    """

    def __init__(self, repos: Iterable[str]) -> None:
        self._by_path: dict[str, str] = {}
        for repo in repos:
            if repo and os.path.isabs(repo):
                self._by_path[os.path.normpath(repo)] = repo
        self._real: dict[str, str] = {}

    _last: tuple[tuple[str, ...], "RepoMap"] | None = None

    @classmethod
    def of(cls, repos: Iterable[str]) -> "RepoMap":
        """The map for `repos`, reused while the repo list is unchanged (every detector of a refresh asks)."""
        key = tuple(repos)
        last = cls._last
        if last is not None and last[0] == key:
            return last[1]
        made = cls(key)
        cls._last = (key, made)
        return made

    def __len__(self) -> int:
        return len(self._by_path)

    @property
    def repos(self) -> list[str]:
        return list(self._by_path.values())

    def _walk(self, path: str) -> str | None:
        while True:
            hit = self._by_path.get(path)
            if hit is not None:
                return hit
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent

    def find(self, path: str | None) -> str | None:
        """The repo containing `path` (absolute), or None."""
        if not path or not isinstance(path, str) or not os.path.isabs(path) or "\x00" in path:
            return None
        norm = os.path.normpath(path)
        hit = self._walk(norm)
        if hit is not None:
            return hit
        real = self._real.get(norm)
        if real is None:
            try:
                real = os.path.realpath(norm)
            except (OSError, ValueError):
                real = norm
            self._real[norm] = real
        return self._walk(real) if real != norm else None


def session_sightings(agent: str, files: Iterable[tuple[Path, os.stat_result]],
                      parse: Callable[[Path], Activity], repo_map: RepoMap, now: float,
                      named: bool = False) -> list[Sighting]:
    """One sighting per session file whose working directory is inside a fleet repo (parses are cached by
    path, mtime and size, so an unchanged file is never read twice). `named`: the file's stem is the agent's
    session id (Claude Code's transcripts are `<session_id>.jsonl`, the id its hooks carry)."""
    out = []
    for path, st in files:
        act = CACHE.get(path, st, parse)
        repo = repo_map.find(act.cwd)
        if repo is not None:
            out.append(act.sighting(agent, repo, st.st_mtime, now, path.stem if named else "", str(path)))
    return out


def relative_files(repo: str, cwd: str | None, files: Iterable[str], limit: int = MAX_FILES) -> tuple[str, ...]:
    """Repo-relative forms of `files` that lie inside `repo`; anything outside (e.g. /etc/hosts) is dropped."""
    root = os.path.normpath(repo)
    out: list[str] = []
    for name in files:
        if not isinstance(name, str) or not name or "\x00" in name:
            continue
        if name.startswith("file://"):
            name = path_from_uri(name) or ""
        if not os.path.isabs(name):
            if not cwd:
                continue
            name = os.path.join(cwd, name)
        rel = os.path.relpath(os.path.normpath(name), root)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            continue
        if rel not in out:
            out.append(rel)
        if len(out) >= limit:
            break
    return tuple(out)


def path_from_uri(value: str) -> str | None:
    """A local path from a `file://` URI or a plain absolute path; remote URIs (vscode-remote://…) give None."""
    if not isinstance(value, str) or not value:
        return None
    if value.startswith("/"):
        return value
    parsed = urlparse(value)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    path = unquote(parsed.path)
    return path if path.startswith("/") else None
