"""Read one repository's whole state: the record the index stores and every surface shows.

File reads (fleet.git.files) give refs, HEAD, upstream config, reflogs, worktrees and in-progress markers;
the git CLI gives what only git computes exactly: working-tree status, ahead/behind, merge prediction.
Nothing here writes to the repository (no optional locks, merge-tree objects go to a throwaway dir).
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path

from dulwich.config import ConfigFile, parse_submodules

from fleet.git import files as gitfiles
from fleet.index.discovery import Found, common_dir, read_gitfile
from fleet.git.files import BrokenRepo, StrPath, short_ref
from fleet.git.run import GitError, run_git
from fleet.git.mergetree import merge_tree
from fleet.git.status import Status, read_status

MAX_ACTIVITY_STATS = 64


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def read_repo(found: Found) -> dict:
    """The repository record, or a record with `error` set when the repository cannot be read."""
    record: dict = {
        "path": found.path, "root": found.root, "bare": found.bare, "gitdir": found.gitdir,
        "error": None, "scanned_at": iso(time.time()),
    }
    try:
        record.update(_read(found))
    except (BrokenRepo, GitError, OSError, ValueError) as exc:
        if not os.path.exists(found.gitdir):
            record["error"] = "the repository vanished while it was being read"
            record["vanished"] = True
        else:
            record["error"] = str(exc) or exc.__class__.__name__
    return record


def _read(found: Found) -> dict:
    gitdir, commondir = found.gitdir, found.commondir  # plain strings: pathlib costs more than the reads
    refs = gitfiles.read_refs(commondir)
    head = gitfiles.read_head(gitdir, refs)
    cfg = gitfiles.read_config(commondir)
    status = None if found.bare else read_status(found.path)
    if status is not None:
        head_sha = status.oid
        branch_name = status.head
    else:
        head_sha = head.sha
        branch_name = short_ref(head.ref) if head.ref and head.ref.startswith("refs/heads/") else None
    op, op_detail = gitfiles.operation(gitdir)
    branches = _branches(found.path, refs, cfg, branch_name, status)
    current = next((b for b in branches if b["name"] == branch_name), None)
    upstream = current["upstream"] if current else None
    upstream_gone = bool(current and current["upstream_gone"])
    ahead = current["ahead"] if current and not upstream_gone else None
    behind = current["behind"] if current and not upstream_gone else None
    prediction = None
    if ahead and behind and current and current["upstream_ref"]:
        prediction = predict_merge(found.path, commondir, "HEAD", current["upstream_ref"])
    stashes = read_stashes(commondir)
    reflogs = reflog_stats(gitdir, commondir)
    lock = os.path.exists(os.path.join(gitdir, "index.lock"))
    record = {
        "branch": branch_name,
        "detached": head_sha is not None and branch_name is None,
        "head": head_sha,
        "head_ref": head.ref,
        "upstream": upstream,
        "upstream_gone": upstream_gone,
        "ahead": ahead,
        "behind": behind,
        "staged": status.staged if status else None,
        "unstaged": status.unstaged if status else None,
        "untracked": status.untracked if status else None,
        "conflicted": status.conflicted if status else None,
        "stashes": len(stashes),
        "stash_list": stashes,
        "operation": op,
        "operation_detail": op_detail or None,
        "predicted_conflicts": prediction,
        "branches": branches,
        "worktrees": [] if found.gitdir != found.commondir else _worktrees(commondir, refs),
        "submodules": [] if found.bare else read_submodules(found.path, commondir),
        "remotes": _remotes(cfg),
        "last_activity": iso(_last_activity(found.path, status, _ref_movement_time(gitdir, commondir, reflogs))),
        "reflog_files": reflogs,
    }
    if lock:
        record["error"] = ("index.lock is present: another git process is writing this repository, "
                           "or one crashed and left the lock behind")
    return record


def _branches(path: str, refs: dict[str, str], cfg: ConfigFile, current: str | None,
              status: Status | None) -> list[dict]:
    """Every local branch with its upstream and ahead/behind (one git call at most for all of them)."""
    rows: list[dict] = []
    need_git = False
    for ref in sorted(r for r in refs if r.startswith("refs/heads/")):
        name = ref[len("refs/heads/"):]
        up_ref = gitfiles.upstream_ref(cfg, name)
        row = {"name": name, "head": refs[ref], "upstream": short_ref(up_ref) if up_ref else None,
               "upstream_ref": up_ref, "upstream_gone": False, "ahead": None, "behind": None,
               "current": name == current}
        if up_ref:
            up_sha = refs.get(up_ref)
            if up_sha is None:
                row["upstream_gone"] = True
            elif up_sha == refs[ref]:
                row["ahead"], row["behind"] = 0, 0
            elif name == current and status is not None and status.ahead is not None:
                row["ahead"], row["behind"] = status.ahead, status.behind
            else:
                need_git = True
        rows.append(row)
    if need_git:
        _fill_ahead_behind(path, rows)
    return rows


def _fill_ahead_behind(path: str, rows: list[dict]) -> None:
    out = run_git(path, ["for-each-ref", "--format=%(refname)%00%(upstream:track,nobracket)", "refs/heads/"]).stdout
    track = {}
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        ref, _, value = line.partition("\0")
        track[ref[len("refs/heads/"):]] = value
    for row in rows:
        if row["upstream_ref"] is None or row["upstream_gone"] or row["ahead"] is not None:
            continue
        value = track.get(row["name"], "")
        if value == "gone":
            row["upstream_gone"] = True
            continue
        ahead = behind = 0
        for part in value.split(", "):
            if part.startswith("ahead "):
                ahead = int(part[6:])
            elif part.startswith("behind "):
                behind = int(part[7:])
        row["ahead"], row["behind"] = ahead, behind


def predict_merge(path: str, commondir: StrPath, ours: str, theirs: str) -> dict | None:
    """What merging `theirs` into `ours` would do (`git merge-tree`, nothing written to the repo)."""
    try:
        result = merge_tree(path, commondir, ["--name-only", "-z", "--no-messages", ours, theirs])
    except GitError:
        return None
    parts = [p.decode("utf-8", "replace") for p in result.stdout.split(b"\0") if p]
    paths = sorted(set(parts[1:])) if result.returncode == 1 else []
    return {"clean": result.returncode == 0, "paths": paths}


def read_stashes(commondir: StrPath) -> list[dict]:
    """Stash entries, newest first (stash@{0}), from the stash reflog."""
    try:
        with open(os.path.join(commondir, "logs", "refs", "stash"), "rb") as fh:
            data = fh.read()
    except OSError:
        return []
    lines = gitfiles.parse_reflog(data)
    return [{"index": i, "sha": line.new_sha, "message": line.message, "at": iso(line.at)}
            for i, line in enumerate(reversed(lines))]


def reflog_stats(gitdir: StrPath, commondir: StrPath) -> list[tuple[str, str, int, int, float]]:
    """(ref, reflog path, inode, size, mtime) of every reflog: the index reads only what grew since last time."""
    stats = []
    for ref, path in gitfiles.reflog_files(gitdir, commondir):
        try:
            st = os.stat(path)
        except OSError:
            continue
        stats.append((ref, path, st.st_ino, st.st_size, st.st_mtime))
    return stats


def _ref_movement_time(gitdir: StrPath, commondir: StrPath, stats: list[tuple]) -> float | None:
    """Newest ref movement: the newest reflog mtime, or the ref files' own in a repo without reflogs."""
    if stats:
        return max(s[4] for s in stats)
    newest = None
    for path in (os.path.join(gitdir, "HEAD"), os.path.join(commondir, "packed-refs"),
                 os.path.join(commondir, "refs", "heads")):
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        newest = mtime if newest is None else max(newest, mtime)
    return newest


def _last_activity(path: str, status: Status | None, reflog_time: float | None) -> float | None:
    newest = reflog_time
    if status is not None:
        for entry in status.entries[:MAX_ACTIVITY_STATS]:
            try:
                mtime = os.lstat(os.path.join(path, entry.path)).st_mtime
            except OSError:
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return newest


def _worktrees(commondir: StrPath, refs: dict[str, str]) -> list[dict]:
    rows = []
    for wt in gitfiles.linked_worktrees(commondir):
        try:
            head = gitfiles.read_head(wt.gitdir, refs)
        except BrokenRepo:
            head = gitfiles.Head(None, None)
        row = {
            "path": str(wt.path), "id": wt.id,
            "branch": short_ref(head.ref) if head.ref else None,
            "head": head.sha, "detached": head.detached,
            "locked": wt.locked, "lock_reason": wt.lock_reason,
            "prunable": wt.prunable, "prunable_reason": wt.prunable_reason if wt.prunable else None,
            "staged": None, "unstaged": None, "untracked": None, "conflicted": None,
            "operation": gitfiles.operation(wt.gitdir)[0], "error": None,
        }
        if wt.path.is_dir() and not wt.prunable:
            try:
                st = read_status(wt.path)
                row.update(staged=st.staged, unstaged=st.unstaged, untracked=st.untracked,
                           conflicted=st.conflicted, head=st.oid)
            except GitError as exc:
                row["error"] = exc.message
        rows.append(row)
    return rows


def read_submodules(path: str, commondir: StrPath) -> list[dict]:
    gitmodules = os.path.join(path, ".gitmodules")
    if not os.path.isfile(gitmodules):
        return []
    try:
        entries = list(parse_submodules(ConfigFile.from_path(gitmodules)))
    except Exception as exc:  # a malformed .gitmodules must not fail the whole repo
        return [{"path": ".gitmodules", "name": None, "url": None, "recorded": None, "checked_out": None,
                 "state": "error", "error": f"unreadable .gitmodules: {exc}"}]
    subs = [(p.decode("utf-8", "replace"), u.decode("utf-8", "replace"), n.decode("utf-8", "replace"))
            for p, u, n in entries]
    recorded: dict[str, str] = {}
    conflicted: set[str] = set()
    if subs:
        out = run_git(path, ["ls-files", "--stage", "-z", "--", *[p for p, _, _ in subs]]).stdout
        for rec in out.split(b"\0"):
            if not rec:
                continue
            meta, _, name = rec.partition(b"\t")
            mode, sha, stage = meta.decode().split(" ")
            rel = name.decode("utf-8", "replace")
            if stage != "0":
                conflicted.add(rel)
            elif mode == "160000":
                recorded[rel] = sha
    rows = []
    for sub_path, url, name in subs:
        checked_out = _submodule_head(Path(path) / sub_path)
        if sub_path in conflicted:
            state = "conflict"
        elif checked_out is None:
            state = "uninitialized"
        elif checked_out != recorded.get(sub_path):
            state = "drifted"
        else:
            state = "clean"
        rows.append({"path": sub_path, "name": name, "url": url, "recorded": recorded.get(sub_path),
                     "checked_out": checked_out, "state": state})
    return rows


def _submodule_head(folder: Path) -> str | None:
    dotgit = folder / ".git"
    if dotgit.is_file():
        gitdir = read_gitfile(dotgit)
    elif dotgit.is_dir():
        gitdir = dotgit
    else:
        return None
    if gitdir is None or not gitdir.is_dir():
        return None
    try:
        return gitfiles.read_head(gitdir, gitfiles.read_refs(common_dir(gitdir))).sha
    except BrokenRepo:
        return None


def _remotes(cfg: ConfigFile) -> list[dict]:
    rows = []
    for section in cfg.sections():
        if len(section) == 2 and section[0] == b"remote":
            try:
                url = gitfiles.redact_url(cfg.get(section, b"url").decode("utf-8", "replace"))
            except KeyError:
                url = None
            rows.append({"name": section[1].decode("utf-8", "replace"), "url": url})
    return rows
