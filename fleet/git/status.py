"""Parse `git status --porcelain=v2 --branch --show-stash -z`: one git call for HEAD, upstream, counts, stash."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from fleet.git import files as gitfiles
from fleet.git.run import run_git

# No --untracked-files / --ignore-submodules: git applies the repository's own status.showUntrackedFiles
# and submodule.<name>.ignore (plain settings that run nothing), so the counts are what `git status` shows
# there (a dotfiles repo in $HOME with showUntrackedFiles=no has no untracked files).
STATUS_ARGS = ["status", "--porcelain=v2", "--branch", "--show-stash", "-z"]


@dataclass
class StatusEntry:
    """One porcelain v2 record: kind `1` (changed), `2` (renamed/copied), `u` (unmerged), `?` (untracked)."""

    kind: str
    xy: str
    path: str
    orig_path: str | None = None
    submodule: str = "N..."


@dataclass
class Status:
    oid: str | None = None
    head: str | None = None
    upstream: str | None = None
    ahead: int | None = None
    behind: int | None = None
    stash: int = 0
    entries: list[StatusEntry] = field(default_factory=list)
    source: str = "git"   # or "libgit2": fleet/repo/libstatus.py read it in-process

    @property
    def staged(self) -> int:
        return sum(1 for e in self.entries if e.kind in "12" and e.xy[0] != ".")

    @property
    def unstaged(self) -> int:
        return sum(1 for e in self.entries if e.kind in "12" and e.xy[1] != ".")

    @property
    def untracked(self) -> int:
        return sum(1 for e in self.entries if e.kind == "?")

    @property
    def conflicted(self) -> int:
        return sum(1 for e in self.entries if e.kind == "u")


def parse_status(data: bytes) -> Status:
    status = Status()
    fields = data.split(b"\0")
    i = 0
    while i < len(fields):
        raw = fields[i]
        i += 1
        if not raw:
            continue
        if raw.startswith(b"# "):
            key, _, value = raw[2:].decode("utf-8", "surrogateescape").partition(" ")
            if key == "branch.oid":
                status.oid = None if value == "(initial)" else value
            elif key == "branch.head":
                status.head = None if value == "(detached)" else value
            elif key == "branch.upstream":
                status.upstream = value
            elif key == "branch.ab":
                a, _, b = value.partition(" ")
                status.ahead, status.behind = int(a.lstrip("+")), int(b.lstrip("-"))
            elif key == "stash":
                status.stash = int(value)
            continue
        # An entry's fields as text as before (`_field`), its path(s) decoded straight from git's bytes (`_text`).
        kind = raw[:1]
        if kind == b"1":
            parts = raw.split(b" ", 8)
            status.entries.append(StatusEntry("1", _field(parts[1]), _text(parts[8]), submodule=_field(parts[2])))
        elif kind == b"2":
            parts = raw.split(b" ", 9)
            orig = fields[i] if i < len(fields) else None
            i += 1
            status.entries.append(StatusEntry("2", _field(parts[1]), _text(parts[9]), _text(orig) if orig else None,
                                              submodule=_field(parts[2])))
        elif kind == b"u":
            parts = raw.split(b" ", 10)
            status.entries.append(StatusEntry("u", _field(parts[1]), _text(parts[10]), submodule=_field(parts[2])))
        elif kind == b"?":   # `? ` and the path
            status.entries.append(StatusEntry("?", "??", _text(raw[2:])))
    return status


def _field(value: bytes) -> str:
    """A status field (XY, submodule state) as text, undecodable bytes kept as surrogates."""
    return value.decode("utf-8", "surrogateescape")


def _text(value: bytes) -> str:
    """Paths as text: bytes that are not UTF-8 become replacement characters instead of failing."""
    return value.decode("utf-8", "replace")


def read_status(worktree: str | Path, commondir: gitfiles.StrPath, timeout: float = 30.0) -> Status:
    """`git status` of `worktree` (whose repository's common dir is `commondir`), the one way any reader runs it.
    BrokenRepo unless the stash reflog is a regular file or absent: `--show-stash` makes git open it with a
    blocking open, and a FIFO there held every status call until its 30 s timeout."""
    gitfiles.read_file(os.path.join(commondir, "logs", "refs", "stash"), 0, "the stash log", whole=False)
    return parse_status(run_git(worktree, STATUS_ARGS, timeout=timeout).stdout)
