"""Read one repository's whole state: the record the index stores and every surface shows.

File reads (fleet.git.files) give refs, HEAD, upstream config, reflogs, worktrees and in-progress markers;
the git CLI gives what only git computes exactly: working-tree status (read in-process through libgit2 where
that is exactly git's: fleet/repo/libstatus.py), ahead/behind, merge prediction.
Nothing here writes to the repository (no optional locks, merge-tree objects go to a throwaway dir).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable
from pathlib import Path

from dulwich.config import ConfigFile, parse_submodules

from fleet.git import files as gitfiles
from fleet.git.config import Config, read_config
from fleet.git.files import BrokenRepo, StrPath, short_ref
from fleet.git.layout import Found, common_dir, dotgit_dir, read_gitfile
from fleet.git.run import GitError, run_git
from fleet.git.mergetree import merge_tree
from fleet.git.status import Status, read_status
from fleet.repo import libmerge
from fleet.repo.libstatus import Known, repo_status
from fleet.errors import FleetError
from fleet.repo.scope import OutOfScope, check_rel_path, dirs_escape, inside, work_tree_escape
from fleet.timespec import iso
from fleet.git.mark import Walked, walked, watch_mark

log = logging.getLogger(__name__)

MAX_ACTIVITY_STATS = 64


def read_repo(found: Found, known_prediction: dict | None = None, mark: bytes | None = None, *,
              stored: bool = True, predict: bool = True, seen_by: Walked | None = None) -> dict:
    """The repository record, or a record with `error` set when the repository cannot be read.

    `known_prediction`: the merge prediction the index holds for it (a re-check passes it). It is kept when
    it was made for the same two commits: merge-tree's answer depends on them alone (and on the person's own
    git and its global settings; a `fleetdeck scan` predicts afresh). The record's `watch_mark` is taken
    first (`mark`, when the caller took it just before, with what its walk saw in `seen_by`), so it never
    claims a state newer than the read; the loose refs and the reflogs are listed and stat'ed from that walk. A
    reader that stores nothing (`repo.brief`, `stored=False`) gets neither it (a stat per ref) nor what only
    the index keeps: the reflogs' stats and the last activity (a stat per reflog and per changed file).
    Without `predict` (a cold start's state pass) a diverged branch's merge prediction between two shas is
    not made: the record holds `pending_prediction(ours, theirs)` instead, and `make_prediction` makes it
    later exactly as this read would have."""
    record: dict = {
        "path": found.path, "root": found.root, "bare": found.bare, "gitdir": found.gitdir,
        "error": None, "scanned_at": iso(time.time()),
    }
    if stored and mark is None:
        seen_by = walked()
        mark = watch_mark(found.gitdir, found.commondir, seen_by)
    if stored:
        record["watch_mark"] = mark
    try:
        record.update(_read(found, known_prediction, stored, predict, seen_by))
    except OutOfScope as exc:
        record["error"] = str(exc)
        if stored:
            record["reflog_files"] = []  # nor is its history read: those reflogs lie outside the roots
    except (BrokenRepo, GitError, OSError) as exc:
        if not os.path.exists(found.gitdir):
            record["error"] = "the repository vanished while it was being read"
            record["vanished"] = True
        else:
            record["error"] = str(exc) or exc.__class__.__name__
    except Exception as exc:  # a bad repository is that repository's error, never the end of a scan
        log.exception("reading %s failed", found.path)
        record["error"] = f"fleetdeck could not read this repository ({exc.__class__.__name__})"
    return record


def _read(found: Found, known_prediction: dict | None = None, stored: bool = True, predict: bool = True,
          seen_by: Walked | None = None) -> dict:
    gitdir, commondir = found.gitdir, found.commondir  # plain strings: pathlib costs more than the reads
    _check_dirs(found)  # before any file in those dirs is read
    refs = gitfiles.read_refs(commondir, seen_by)
    head = gitfiles.read_head(gitdir, refs)
    cfg = read_config(commondir)
    _check_work_tree(found, cfg)
    stashes = read_stashes(commondir, seen_by)  # before git status, which reads the stash log too
    status = None if found.bare else repo_status(found.path, gitdir, commondir, _known(head, refs, cfg, stashes))
    if status is not None:
        head_sha = status.oid
        branch_name = status.head
    else:
        head_sha = head.sha
        branch_name = short_ref(head.ref) if head.ref and head.ref.startswith("refs/heads/") else None
    op, op_detail = gitfiles.operation(gitdir, seen_by)
    branches = _branches(found.path, refs, cfg, branch_name, status)
    current = next((b for b in branches if b["name"] == branch_name), None)
    upstream = current["upstream"] if current else None
    upstream_gone = bool(current and current["upstream_gone"])
    ahead = current["ahead"] if current and not upstream_gone else None
    behind = current["behind"] if current and not upstream_gone else None
    prediction = None
    if ahead and behind and current and current["upstream_ref"]:
        # by sha (both already known): merge-tree then needs no `rev-parse` first
        ours = head_sha if head_sha and gitfiles.is_sha(head_sha) else "HEAD"
        theirs = refs.get(current["upstream_ref"]) or current["upstream_ref"]
        prediction = (predict_merge(found.path, commondir, ours, theirs, known_prediction)
                      if predict or not (gitfiles.is_sha(ours) and gitfiles.is_sha(theirs))
                      else pending_prediction(ours, theirs))
    reflogs = reflog_stats(gitdir, commondir, seen_by) if stored else None
    lock = os.path.exists(os.path.join(gitdir, "index.lock"))  # always looked for: the mark skips .lock names
    record = {
        "branch": branch_name,
        "detached": head_sha is not None and branch_name is None,
        "head": head_sha,
        "head_ref": head.ref,
        "upstream": upstream,
        "upstream_gone": upstream_gone,
        "ahead": ahead,
        "behind": behind,
        **_counts(status),
        "stashes": len(stashes),
        "stash_list": stashes,
        "operation": op,
        "operation_detail": op_detail or None,
        "predicted_conflicts": prediction,
        "branches": branches,
        "worktrees": ([] if found.gitdir != found.commondir
                      else linked_worktrees(commondir, refs, with_status=True, seen_by=seen_by,
                                            known=lambda wt_head: _known(wt_head, refs, cfg, stashes))),
        "submodules": [] if found.bare else read_submodules(found.path, commondir),
        "remotes": gitfiles.remotes(cfg),
    }
    if reflogs is not None:
        record.update(last_activity=_activity(found, status, reflogs), reflog_files=reflogs)
    if lock:
        record["error"] = ("index.lock is present: another git process is writing this repository, "
                           "or one crashed and left the lock behind")
    return record


def _known(head: gitfiles.Head, refs: dict[str, str], cfg: ConfigFile, stashes: list[dict]) -> Known:
    """What this read gives the in-process status (`fleet.repo.libstatus.Known`): the record's HEAD, the
    upstream `_branches` will give the checked-out branch, and the config's entries when it read them plain."""
    branch = head.ref[len("refs/heads/"):] if head.ref and head.ref.startswith("refs/heads/") else None
    upstream = gitfiles.upstream_ref(cfg, branch) if branch else None
    return Known(head, upstream, refs.get(upstream) if upstream else None, len(stashes),
                 cfg.plain if isinstance(cfg, Config) else None)


def _check_dirs(found: Found) -> None:
    """OutOfScope when git would read this repository's git dir or common dir outside its root."""
    escape = dirs_escape(found, [found.root])
    if escape:
        raise OutOfScope(escape)


def _check_work_tree(found: Found, cfg: ConfigFile) -> None:
    """OutOfScope when its config gives it a work tree outside its root (`core.worktree`)."""
    escape = work_tree_escape(found, cfg, [found.root])
    if escape:
        raise OutOfScope(escape)


def _counts(status: Status | None) -> dict:
    """The working-tree counts of a record (None for a bare repo)."""
    return {"staged": status.staged if status else None, "unstaged": status.unstaged if status else None,
            "untracked": status.untracked if status else None,
            "conflicted": status.conflicted if status else None}


def _activity(found: Found, status: Status | None, reflogs: list[tuple]) -> str | None:
    return iso(_last_activity(found.path, status, _ref_movement_time(found.gitdir, found.commondir, reflogs)))


def read_work_trees(found: Found, stored: dict, seen_by: Walked | None = None) -> dict | None:
    """The fields of `stored` (a record the index holds, read when its git dirs were as they are now: its
    watch mark has not moved) that only its working trees can have changed since, read again with the full
    read's own parts: `git status` (counts, and HEAD as git names it), the last activity, and, when it has
    them, its linked worktrees (a `git status` each) and submodules. None when the git dirs alone cannot
    vouch for the rest: the config includes other files, or an index.lock is present (the full read says
    what it means)."""
    gitdir, commondir = found.gitdir, found.commondir
    try:
        _check_dirs(found)
        config = gitfiles.read_file(os.path.join(commondir, "config"), gitfiles.MAX_CONFIG_BYTES, "config") or b""
        if b"include" in config.lower() or os.path.lexists(os.path.join(gitdir, "index.lock")):
            return None
        if b"worktree" in config.lower():
            _check_work_tree(found, read_config(commondir))
        status = None if found.bare else repo_status(found.path, gitdir, commondir)
        fields = {**_counts(status),
                  "last_activity": _activity(found, status, reflog_stats(gitdir, commondir, seen_by))}
        if status is not None:
            fields.update(head=status.oid, branch=status.head)
        if gitdir == commondir and (stored["worktrees"] or os.path.isdir(os.path.join(commondir, "worktrees"))):
            fields["worktrees"] = linked_worktrees(commondir, gitfiles.read_refs(commondir, seen_by), with_status=True)
        if not found.bare and (stored["submodules"] or os.path.lexists(os.path.join(found.path, ".gitmodules"))):
            fields["submodules"] = read_submodules(found.path, commondir)
    except (OutOfScope, BrokenRepo, GitError, OSError):
        return None
    return fields


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


def parse_track(value: str) -> tuple[int, int, bool]:
    """(ahead, behind, gone) from git's `%(upstream:track,nobracket)`: '', 'gone', 'ahead 1, behind 2'."""
    if value == "gone":
        return 0, 0, True
    counts = dict(part.split(" ", 1) for part in value.split(", ") if " " in part)
    return int(counts.get("ahead", 0)), int(counts.get("behind", 0)), False


def _fill_ahead_behind(path: str, rows: list[dict]) -> None:
    out = run_git(path, ["for-each-ref", "--format=%(refname)%00%(upstream:track,nobracket)", "refs/heads/"]).stdout
    track = {}
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        ref, _, value = line.partition("\0")
        track[ref[len("refs/heads/"):]] = value
    for row in rows:
        if row["upstream_ref"] is None or row["upstream_gone"] or row["ahead"] is not None:
            continue
        ahead, behind, gone = parse_track(track.get(row["name"], ""))
        if gone:
            row["upstream_gone"] = True
            continue
        row["ahead"], row["behind"] = ahead, behind


def predict_merge(path: str, commondir: StrPath, ours: str, theirs: str, known: dict | None = None) -> dict | None:
    """What merging `theirs` into `ours` would do (`git merge-tree`, nothing written to the repo). Between two
    commits named by sha it records them (`ours`, `theirs`), and `known`, a prediction made for the same two,
    is returned as it is instead of asking git again; a merge libgit2 shows to be certainly clean is not
    asked of git at all."""
    pair = {"ours": ours, "theirs": theirs} if gitfiles.is_sha(ours) and gitfiles.is_sha(theirs) else {}
    if pair and known and not known.get("pending") and known.get("ours") == ours and known.get("theirs") == theirs:
        return known
    if pair and libmerge.unsure(os.fspath(commondir), ours, theirs) is None:
        return {"clean": True, "paths": [], **pair}   # what git would say, without it (fleet/repo/libmerge.py)
    try:
        result = merge_tree(path, commondir, ["--name-only", "-z", "--no-messages", ours, theirs])
    except GitError:
        return None
    parts = [p.decode("utf-8", "replace") for p in result.stdout.split(b"\0") if p]
    paths = sorted(set(parts[1:])) if result.returncode == 1 else []
    return {"clean": result.returncode == 0, "paths": paths, **pair}


def pending_prediction(ours: str, theirs: str) -> dict:
    """A merge prediction not made yet, between two shas (`read_repo(predict=False)`): `attention` says it is
    still to come (never that the merge is clean), and `make_prediction` replaces it with the real one."""
    return {"pending": True, "ours": ours, "theirs": theirs}


def make_prediction(found: Found, pending: dict) -> dict | None:
    """The prediction `pending` (a `pending_prediction`) stands for, made as `read_repo` would have made it
    (the same `git merge-tree` between the same two commits: its answer depends on them alone). The repo's
    git dirs are checked to lie inside its root first (they may have moved since its read): OutOfScope."""
    _check_dirs(found)
    return predict_merge(found.path, found.commondir, pending["ours"], pending["theirs"])


def read_stashes(commondir: StrPath, seen_by: Walked | None = None) -> list[dict]:
    """Stash entries, newest first (`stash@{0}`), from the stash reflog: the one reader behind the index
    record, `repo.refs` and `stash.list`. `at` is ISO 8601 UTC. A stash log the watch mark's walk just
    before (`seen_by`) did not see is not looked for."""
    path = os.path.join(commondir, "logs", "refs", "stash")
    if gitfiles.absent(path, seen_by):
        return []
    data, _, _ = gitfiles.read_reflog(path)
    lines = gitfiles.parse_reflog(data)
    return [{"index": i, "selector": f"stash@{{{i}}}", "sha": line.new_sha, "message": line.message,
             "at": iso(line.at)} for i, line in enumerate(reversed(lines))]


def reflog_stats(gitdir: StrPath, commondir: StrPath,
                 seen_by: Walked | None = None) -> list[tuple[str, str, int, int, float]]:
    """(ref, reflog path, inode, size, mtime) of every reflog: the index reads only what grew since last time.
    Listed and stat'ed from `seen_by` (the watch mark's walk just before) where it saw them."""
    stats = []
    seen = seen_by.files if seen_by is not None else {}
    for ref, path in gitfiles.reflog_files(gitdir, commondir, seen_by):
        st = seen.get(path)  # a regular file's stat: what os.stat gives
        if st is None:
            try:
                st = os.stat(path)
            except OSError:
                continue
        stats.append((ref, path, st.st_ino, st.st_size, st.st_mtime))
    return stats


REFLOG_TAILS = 3       # the reflogs (newest written first) whose last entry dates the repo's last movement
REFLOG_TAIL_BYTES = 4096


def _ref_movement_time(gitdir: StrPath, commondir: StrPath, stats: list[tuple]) -> float | None:
    """Newest ref movement: the time git wrote in the last entry of the most recently written reflogs (a file's
    mtime says when something last wrote it, which a clone, a copy or a restore sets to now), else the mtime;
    the ref files' own mtimes in a repo without reflogs."""
    if stats:
        newest = sorted(stats, key=lambda s: -s[4])[:REFLOG_TAILS]
        times = [t for t in (_last_entry_time(s[1], s[3]) for s in newest) if t is not None]
        return min(max(times), newest[0][4]) if times else newest[0][4]
    newest = None
    for path in (os.path.join(gitdir, "HEAD"), os.path.join(commondir, "packed-refs"),
                 os.path.join(commondir, "refs", "heads")):
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        newest = mtime if newest is None else max(newest, mtime)
    return newest


def _last_entry_time(path: str, size: int) -> float | None:
    """The time of a reflog's last entry, from the file's last few KiB (None when it cannot be read)."""
    try:  # one pread on the raw fd: a buffered file asks isatty, tells and seeks first (5 system calls more)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            tail = os.pread(fd, REFLOG_TAIL_BYTES, max(0, size - REFLOG_TAIL_BYTES))
        finally:
            os.close(fd)
    except OSError:
        return None
    if size > REFLOG_TAIL_BYTES:
        tail = tail.split(b"\n", 1)[-1]  # the first line may be cut
    # The last line that parses, found from the end (the whole tail's ~30 lines parsed for one was a tenth
    # of a cold read's own CPU); a line parses alone as it does within its text (fleet.git.files), and alone
    # it is matched by the regex: `reflog_fields`' cut into fields pays off only over a whole log.
    for line in reversed(tail.split(b"\n")):
        fields = gitfiles.matched_fields(line.decode("utf-8", "replace")) if line else None
        if fields:
            return float(fields[-1][3])
    return None


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


def _branch_of(ref: str | None) -> str | None:
    """The branch `git worktree list` names: `refs/heads/` dropped, any other ref kept whole."""
    if ref is None:
        return None
    return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref


def _points_back(wt: gitfiles.LinkedWorktree) -> bool:
    """True when the worktree folder's `.git` file names this worktree's git dir: only then does git run in
    that folder read this repository (a pointer file can name any folder on the machine)."""
    target = read_gitfile(wt.path / ".git")
    return target is not None and os.path.realpath(target) == os.path.realpath(wt.gitdir)


def linked_worktrees(commondir: StrPath, refs: dict[str, str], *, with_status: bool,
                     seen_by: Walked | None = None, known: Callable[[gitfiles.Head], Known] | None = None
                     ) -> list[dict]:
    """The linked worktrees of a repository, one row shape for the index record and `worktree.list`.

    `with_status` adds working-tree counts (a status each, only in a folder that belongs to this repo: in
    process where that is exactly git's, `fleet.repo.libstatus`); `known` gives the in-process status what
    the caller read of the repository for a worktree's HEAD (the record's `_known`). `seen_by`, the watch
    mark's walk just before, gives the listing of `worktrees/` and of each worktree's git dir (what it did
    not list there is not looked for).
    """
    rows = []
    for wt in gitfiles.linked_worktrees(commondir, seen_by):
        try:
            head = gitfiles.read_head(wt.gitdir, refs)
        except BrokenRepo:
            head = gitfiles.Head(None, None)
        row = {
            "path": str(wt.path), "id": wt.id, "branch": _branch_of(head.ref), "head": head.sha,
            "detached": head.detached, "bare": False, "is_main": False,
            "locked": wt.locked, "lock_reason": wt.lock_reason,
            "prunable": wt.prunable, "prunable_reason": wt.prunable_reason if wt.prunable else None,
            "staged": None, "unstaged": None, "untracked": None, "conflicted": None,
            "operation": gitfiles.operation(wt.gitdir, seen_by)[0], "error": None,
        }
        if with_status and os.path.isdir(wt.path) and not wt.prunable:
            if not _points_back(wt):
                row["error"] = "its .git file does not point back to this repository"
            else:
                try:
                    st = repo_status(str(wt.path), str(wt.gitdir), os.fspath(commondir),
                                     known(head) if known is not None else None)
                    row.update(staged=st.staged, unstaged=st.unstaged, untracked=st.untracked,
                               conflicted=st.conflicted, head=st.oid)
                except BrokenRepo as exc:
                    row["error"] = str(exc)
                except GitError as exc:
                    row["error"] = exc.message
        rows.append(row)
    return rows


def main_worktree(found: Found, refs: dict[str, str], cfg: ConfigFile) -> dict:
    """The main worktree's row, as `git worktree list` computes it from any worktree of the repository:
    the common dir without its `/.git`, bare when `core.bare` says so or, unset, when there is no work tree.
    `cfg` must be the whole config (read_config(..., complete=True)): `core.bare` decides."""
    path = os.path.realpath(found.commondir).removesuffix("/.git")
    try:
        core_bare = cfg.get_boolean((b"core",), b"bare")
    except ValueError:
        core_bare = None
    bare = core_bare is True or (found.bare and core_bare is not False)
    head = gitfiles.Head(None, None) if bare else gitfiles.read_head(found.commondir, refs)
    return {"path": path, "id": None, "branch": _branch_of(head.ref), "head": head.sha, "detached": head.detached,
            "bare": bare, "is_main": True, "locked": False, "lock_reason": None, "prunable": False,
            "prunable_reason": None, "staged": None, "unstaged": None, "untracked": None, "conflicted": None,
            "operation": None if bare else gitfiles.operation(found.commondir)[0], "error": None}


def worktree_counts(row: dict, commondir: StrPath) -> None:
    """Fill a worktree row's staged/unstaged/untracked/conflicted from `git status` in that folder."""
    if row["bare"] or row["prunable"] or row["error"] or not os.path.isdir(row["path"]):
        return
    try:
        st = read_status(row["path"], commondir)
    except BrokenRepo as exc:
        row["error"] = str(exc)
        return
    except GitError as exc:
        row["error"] = exc.message
        return
    row.update(staged=st.staged, unstaged=st.unstaged, untracked=st.untracked, conflicted=st.conflicted)


def read_submodules(path: str, commondir: StrPath) -> list[dict]:
    gitmodules = os.path.join(path, ".gitmodules")
    if not os.path.lexists(gitmodules):
        return []
    try:  # git never follows include.path in .gitmodules: neither does this
        data = gitfiles.read_file(gitmodules, gitfiles.MAX_CONFIG_BYTES, ".gitmodules")
        modules = gitfiles.parse_config(data or b"", what=".gitmodules", includes=False)
        entries = list(parse_submodules(modules))
    except (BrokenRepo, KeyError) as exc:  # a bad .gitmodules must not fail the whole repo
        why = str(exc) if isinstance(exc, BrokenRepo) else ".gitmodules names a submodule without path or url"
        return [{"path": ".gitmodules", "name": None, "url": None, "recorded": None, "checked_out": None,
                 "state": "error", "error": why}]
    subs, bad = [], []
    for raw_path, url, name in entries:
        row = (raw_path.decode("utf-8", "replace"), gitfiles.redact_url(url.decode("utf-8", "replace")),
               name.decode("utf-8", "replace"))
        (subs if _valid_path(row[0]) else bad).append(row)
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
    ignores = _submodule_ignores(modules, commondir, [name for _, _, name in subs]) if subs else {}
    for sub_path, url, name in subs:
        checked_out, error = _submodule_head(Path(path) / sub_path, (path, os.fspath(commondir)))
        if sub_path in conflicted:
            state = "conflict"
        elif checked_out is None:
            state = "uninitialized"
        elif checked_out != recorded.get(sub_path):
            state = "drifted"
        else:
            state = "clean"
        rows.append({"path": sub_path, "name": name, "url": url, "recorded": recorded.get(sub_path),
                     "checked_out": checked_out, "state": state, "error": error, "ignore": ignores.get(name)})
    rows += [{"path": sub_path, "name": name, "url": url, "recorded": None, "checked_out": None, "state": "error",
              "error": ".gitmodules gives this submodule a path git cannot have"} for sub_path, url, name in bad]
    return rows


def _submodule_ignores(modules: ConfigFile, commondir: StrPath, names: list[str]) -> dict[str, str]:
    """`submodule.<name>.ignore` per submodule as `git status` applies it: the repository's config over
    .gitmodules (`none`, `untracked`, `dirty` or `all`; absent when neither sets it)."""
    try:
        cfg = read_config(commondir, complete=True)
    except BrokenRepo:
        cfg = ConfigFile()
    found: dict[str, str] = {}
    for name in names:
        for source in (cfg, modules):
            try:
                value = source.get((b"submodule", name.encode()), b"ignore").decode("utf-8", "replace").lower()
            except KeyError:
                continue
            found[name] = value
            break
    return found


def _valid_path(rel: str) -> bool:
    try:
        check_rel_path(rel)
    except FleetError:
        return False
    return True


def _submodule_head(folder: Path, homes: tuple[str, str]) -> tuple[str | None, str | None]:
    """(checked-out commit, error) of a submodule folder. Its git dir must lie in the superproject (its work
    tree or `.git/modules/`, where git puts it): a `.git` link elsewhere is not followed."""
    gitdir = dotgit_dir(folder)
    if gitdir is None:
        return None, None
    if not any(inside(os.path.realpath(gitdir), os.path.realpath(home)) for home in homes):
        return None, "its git dir lies outside the superproject: not read"
    try:
        return gitfiles.read_head(gitdir, gitfiles.read_refs(common_dir(gitdir))).sha, None
    except BrokenRepo:
        return None, None
