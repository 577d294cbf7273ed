"""Cheap metadata straight from a git dir's files: HEAD, refs, upstream config, reflogs, worktrees, markers.

These reads cost microseconds where a git subprocess costs milliseconds, and they never touch the index
or take a lock. Everything that must match git byte for byte (status, ahead/behind) goes to the git CLI.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

from dulwich.config import ConfigFile

ZERO_OID = "0" * 40
StrPath = str | os.PathLike[str]
_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def is_sha(text: str) -> bool:
    return bool(_SHA_RE.match(text))


def read_text(path: str | os.PathLike[str]) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


@dataclass(frozen=True)
class Head:
    """What HEAD says: a symbolic ref (`refs/heads/x`, maybe unborn) or a detached commit."""

    ref: str | None
    sha: str | None

    @property
    def detached(self) -> bool:
        return self.ref is None and self.sha is not None


class BrokenRepo(Exception):
    """The repository's own files are unreadable or malformed (a corrupt HEAD, for instance)."""


def read_head(gitdir: StrPath, refs: dict[str, str]) -> Head:
    head = os.path.join(gitdir, "HEAD")
    text = read_text(head)
    if text is None:
        raise BrokenRepo(f"{head} is missing")
    text = text.strip()
    if text.startswith("ref:"):
        ref = text[4:].strip()
        if not ref.startswith("refs/"):
            raise BrokenRepo(f"HEAD points to an invalid ref {ref!r}")
        return Head(ref, refs.get(ref))
    if is_sha(text):
        return Head(None, text)
    raise BrokenRepo(f"HEAD is not a ref or a commit id: {text[:60]!r}")


def read_refs(commondir: StrPath) -> dict[str, str]:
    """All refs under refs/ (loose files override packed-refs), as {full name: sha}."""
    refs: dict[str, str] = {}
    packed = read_text(os.path.join(commondir, "packed-refs"))
    if packed:
        for line in packed.splitlines():
            if not line or line[0] in "#^":
                continue
            sha, _, name = line.partition(" ")
            if is_sha(sha) and name:
                refs[name] = sha
    for name, path in _files_under(os.path.join(commondir, "refs"), "refs/"):
        text = read_text(path)
        if text is not None and is_sha(text.strip()):
            refs[name] = text.strip()  # symbolic refs (refs/remotes/origin/HEAD) are not tips of their own
    return refs


def read_config(commondir: StrPath) -> ConfigFile:
    """The repository's own config file (where branch upstreams and remotes live).

    Most of a scan's Python time went to parsing configs that hold neither: those are skipped unparsed.
    """
    try:
        with open(os.path.join(commondir, "config"), "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return ConfigFile()
    except OSError as exc:
        raise BrokenRepo(f"config is unreadable: {exc}") from exc
    lowered = data.lower()
    if b"[branch" not in lowered and b"[remote" not in lowered and b"[include" not in lowered:
        return ConfigFile()
    try:
        return ConfigFile.from_file(io.BytesIO(data))
    except Exception as exc:  # dulwich raises ValueError and friends on malformed files
        raise BrokenRepo(f"config is unreadable: {exc}") from exc


def _cfg(cfg: ConfigFile, section: tuple[bytes, ...], key: bytes) -> str | None:
    try:
        value = cfg.get(section, key)
    except KeyError:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _map_refspec(src: str, refspec: str) -> str | None:
    """Apply one fetch refspec (`+refs/heads/*:refs/remotes/o/*`) to a remote ref name."""
    spec = refspec.lstrip("+")
    if ":" not in spec:
        return None
    left, right = spec.split(":", 1)
    if "*" in left:
        prefix, _, suffix = left.partition("*")
        if src.startswith(prefix) and src.endswith(suffix):
            middle = src[len(prefix):len(src) - len(suffix) if suffix else None]
            return right.replace("*", middle, 1)
        return None
    return right if left == src else None


def upstream_ref(cfg: ConfigFile, branch: str) -> str | None:
    """The full ref name a local branch tracks (`refs/remotes/origin/main`), as git computes it."""
    remote = _cfg(cfg, (b"branch", branch.encode()), b"remote")
    merge = _cfg(cfg, (b"branch", branch.encode()), b"merge")
    if not remote or not merge:
        return None
    if remote == ".":
        return merge
    try:
        specs = [v.decode("utf-8", "replace") for v in cfg.get_multivar((b"remote", remote.encode()), b"fetch")]
    except KeyError:
        specs = []
    for spec in specs:
        mapped = _map_refspec(merge, spec)
        if mapped:
            return mapped
    return None


_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)([^/@]*):[^/@]*@", re.IGNORECASE)


def redact_url(url: str) -> str:
    """Hide a password or token embedded in a remote URL (`https://user:secret@host` -> `user:***`)."""
    return _USERINFO.sub(r"\1\2:***@", url)


def short_ref(ref: str) -> str:
    for prefix in ("refs/heads/", "refs/remotes/", "refs/tags/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


@dataclass(frozen=True)
class ReflogLine:
    old_sha: str | None
    new_sha: str | None
    identity: str
    at: int
    tz: str
    message: str


# `<old> <new> <identity> <unix time> <tz>[\t<message>]`, one line each; the message and its tab may be absent.
_REFLOG_LINE = re.compile(rb"^([0-9a-f]{40}(?:[0-9a-f]{24})?) ([0-9a-f]{40}(?:[0-9a-f]{24})?) "
                          rb"([^\n\t]*) (-?\d+) ([+-]\d{4})(?:\t([^\n]*))?$", re.M)


def _oid(raw: bytes) -> str | None:
    """A sha as text, or None for git's all-zero "no object" id."""
    return None if raw.strip(b"0") == b"" else raw.decode("ascii")


def parse_reflog(data: bytes) -> list[ReflogLine]:
    """Parse reflog text tolerantly: message-less lines, zero oids and junk lines never raise."""
    return [ReflogLine(_oid(old), _oid(new), who.decode("utf-8", "replace"), int(ts), tz.decode("ascii"),
                       (msg or b"").decode("utf-8", "replace"))
            for old, new, who, ts, tz, msg in _REFLOG_LINE.findall(data)]


def _files_under(base: str, prefix: str) -> list[tuple[str, str]]:
    """(prefix + relative name, path) for every file below `base` (scandir: far cheaper than os.walk+Path)."""
    out: list[tuple[str, str]] = []
    stack = [(base, prefix)]
    while stack:
        folder, name = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, f"{name}{entry.name}/"))
                elif entry.is_file(follow_symlinks=False):
                    out.append((name + entry.name, entry.path))
    return out


def reflog_files(gitdir: StrPath, commondir: StrPath) -> list[tuple[str, str]]:
    """(ref name, reflog file) for HEAD of the main and every linked worktree, branches and remotes."""
    files: list[tuple[str, str]] = []
    head = os.path.join(gitdir, "logs", "HEAD")
    if os.path.isfile(head):
        files.append(("HEAD", head))
    logs = os.path.join(commondir, "logs", "refs")
    files.extend(sorted(_files_under(os.path.join(logs, "heads"), "refs/heads/")))
    # refs/remotes/<remote>/HEAD only names the remote's default branch: its log repeats the clone line
    files.extend(sorted((ref, path) for ref, path in _files_under(os.path.join(logs, "remotes"), "refs/remotes/")
                        if not ref.endswith("/HEAD")))
    if gitdir == commondir:
        wt_base = os.path.join(commondir, "worktrees")
        try:
            names = sorted(e.name for e in os.scandir(wt_base) if e.is_dir(follow_symlinks=False))
        except OSError:
            names = []
        for name in names:
            path = os.path.join(wt_base, name, "logs", "HEAD")
            if os.path.isfile(path):
                files.append((f"worktrees/{name}/HEAD", path))
    return files


# Reflog message prefixes (as git writes them) and the digest kind each means; first match wins.
_KIND_PREFIXES = (
    ("commit (amend)", "amend"), ("commit (merge)", "merge"), ("merge ", "merge"), ("commit", "commit"),
    ("checkout:", "checkout"), ("pull", "pull"), ("reset:", "reset"), ("rebase", "rebase"),
    ("cherry-pick", "cherry_pick"), ("revert", "revert"), ("branch:", "branch"), ("Branch: renamed", "branch"),
    ("fetch", "fetch"),
)
# One alternation, tried in the table's order: a scan classifies every reflog line of the fleet.
_KIND_RE = re.compile("|".join(f"(?P<k{i}>{re.escape(prefix)})" for i, (prefix, _) in enumerate(_KIND_PREFIXES)))


def reflog_kind(message: str) -> str:
    """Classify a reflog message into the digest's event kinds."""
    match = _KIND_RE.match(message)
    return _KIND_PREFIXES[int(match.lastgroup[1:])][1] if match else "other"


def operation(gitdir: StrPath) -> tuple[str | None, dict]:
    """The operation in progress in this worktree's git dir, with the details a person needs to finish it."""
    def exists(name: str) -> bool:
        return os.path.exists(os.path.join(gitdir, name))

    def first_line(name: str) -> str | None:
        text = read_text(os.path.join(gitdir, name))
        return text.strip().splitlines()[0] if text and text.strip() else None

    if exists("rebase-merge") or (exists("rebase-apply") and not exists("rebase-apply/applying")):
        base = "rebase-merge" if exists("rebase-merge") else "rebase-apply"
        head_name = first_line(f"{base}/head-name")
        step = first_line(f"{base}/msgnum") or first_line(f"{base}/next")
        total = first_line(f"{base}/end") or first_line(f"{base}/last")
        return "rebase", {
            "branch": short_ref(head_name) if head_name and head_name != "detached HEAD" else None,
            "onto": first_line(f"{base}/onto"),
            "step": int(step) if step and step.isdigit() else None,
            "total": int(total) if total and total.isdigit() else None,
            "stopped_at": first_line("REBASE_HEAD"),
        }
    if exists("rebase-apply"):
        return "am", {}
    if exists("MERGE_HEAD"):
        msg = first_line("MERGE_MSG")
        return "merge", {"merge_head": first_line("MERGE_HEAD"), "message": msg}
    if exists("CHERRY_PICK_HEAD"):
        return "cherry-pick", {"commit": first_line("CHERRY_PICK_HEAD")}
    if exists("REVERT_HEAD"):
        return "revert", {"commit": first_line("REVERT_HEAD")}
    if exists("BISECT_LOG"):
        return "bisect", {"start": first_line("BISECT_START")}
    return None, {}


@dataclass(frozen=True)
class LinkedWorktree:
    """A linked worktree as `.git/worktrees/<id>/` describes it."""

    id: str
    gitdir: Path
    path: Path
    locked: bool
    lock_reason: str | None
    prunable: bool
    prunable_reason: str | None


def linked_worktrees(commondir: StrPath) -> list[LinkedWorktree]:
    base = os.path.join(commondir, "worktrees")
    if not os.path.isdir(base):
        return []
    result: list[LinkedWorktree] = []
    for entry in sorted(os.scandir(base), key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            continue
        wt_gitdir = Path(entry.path)
        pointer = read_text(wt_gitdir / "gitdir")
        dotgit = Path(pointer.strip()) if pointer and pointer.strip() else None
        if dotgit is not None and not dotgit.is_absolute():
            dotgit = Path(os.path.normpath(wt_gitdir / dotgit))
        lock_text = read_text(wt_gitdir / "locked")
        locked = lock_text is not None
        prunable_reason = None
        if dotgit is None:
            prunable_reason = "gitdir file points to non-existent location"
        elif not locked and not dotgit.exists():
            prunable_reason = "gitdir file points to non-existent location"
        result.append(LinkedWorktree(
            id=entry.name, gitdir=wt_gitdir, path=dotgit.parent if dotgit else wt_gitdir,
            locked=locked, lock_reason=(lock_text.strip() or None) if lock_text is not None else None,
            prunable=prunable_reason is not None and not locked, prunable_reason=prunable_reason,
        ))
    return result
