"""Commit history with stable cursor paging, and one commit's full details with its parsed diff."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from fleet.git import diffparse
from fleet.caps import DEFAULT_CAP, Capped, check_int
from fleet.errors import FleetError
from fleet.git.revs import check_rev, head_commit, resolve_commit
from fleet.git.run import GitError, out, run_git, text
from fleet.repo.scope import check_rel_path
from fleet.repo.jsonbudget import DEFAULT_MAX_HUNKS, DEFAULT_MAX_LINES, json_size, shape_changes
from fleet.repo.changes import Change

# Fields are NUL-separated; `-z` ends each record with a NUL too, so every commit is exactly N fields.
_LOG_FIELDS = ("sha", "parents", "author_name", "author_email", "author_time", "committer_name",
               "committer_email", "committer_time", "subject")
_LOG_FORMAT = "%H%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%s"
DIFF_FLAGS = ["-z", "--raw", "--patch", "-M", *diffparse.PATCH_FLAGS]
DEFAULT_DIFF_BYTES = 256 * 1024
# Threads for a git read made beside another one (commit_details: the metadata beside the diff).
_BESIDE = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fleetdeck-git-beside")
COMMIT_FORMAT = "%H%x00%T%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%B"
COMMIT_KEYS = ("sha", "tree", "parents", "author_name", "author_email", "author_time", "committer_name",
               "committer_email", "committer_time", "message")


class Commit(TypedDict):
    sha: str
    parents: list[str]
    author_name: str
    author_email: str
    author_time: str
    committer_name: str
    committer_email: str
    committer_time: str
    subject: str
    is_merge: bool


class History(TypedDict):
    ref: str | None
    head_sha: str | None
    range: NotRequired[str | None]
    commits: list[Commit]
    next_cursor: str | None
    truncated: bool
    has_more: bool
    omitted_count: int | None
    omitted_count_at_least: int
    path_match: NotRequired[str | None]
    note: NotRequired[str | None]


class CommitDetails(Commit, Capped):  # the order of the published fields: Commit's, then the cap's
    tree: str
    message: str
    message_truncated: bool
    diff_against: str
    is_root: bool
    changes: list[Change]
    file_count: int
    hunks_omitted_count: int
    lines_omitted_count: int


def _check_date(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 100 or any(ord(c) < 32 for c in value):
        raise FleetError("BAD_ARGUMENT", f"{field} must be a short date string (ISO 8601 or e.g. '2 weeks ago')")
    return value


def _commit_record(fields: list[bytes]) -> dict[str, Any]:
    rec = {name: text(value) for name, value in zip(_LOG_FIELDS, fields)}
    rec["parents"] = rec["parents"].split() if rec["parents"] else []
    for key in ("author_time", "committer_time"):
        rec[key] = int(rec[key])
    rec["is_merge"] = len(rec["parents"]) > 1
    return rec


def _fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


_REV = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})(?:\.\.\.?(?:[0-9a-f]{40}|[0-9a-f]{64}))?")


FRONTIER_MAX = 64   # pending commits a cursor may carry (else it keeps only the position)
TIES_MAX = 64       # commits shown at the oldest commit time so far that it may carry
CURSOR_MAX = 8192   # characters; the MCP argument's cap


@dataclass
class Cursor:
    """Where a walk stands after a page: the pinned start (`tip`), how many commits were shown (`skip`),
    the filters' fingerprint, and, for a walk without filters, the walk's own state: `frontier`, the commits
    git has queued but not shown, in the order git queued them; `oldest`, the smallest commit time shown so
    far; `ties`, the commits shown at that time. The next page is then `git log <frontier>` (its cost does
    not grow with depth) instead of `git log --skip=<skip> <tip>`; see `_frontier_page`."""

    tip: str
    skip: int
    fp: str
    frontier: list[str] | None = None
    oldest: int | None = None
    ties: list[str] = field(default_factory=list)

    def encode(self) -> str:
        data = {"tip": self.tip, "skip": self.skip, "fp": self.fp}
        if self.frontier is not None:
            data.update(q="".join(self.frontier), m=self.oldest, e="".join(self.ties))
        raw = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> "Cursor":
        try:
            if len(cursor) > CURSOR_MAX:
                raise ValueError("cursor too long")
            unpack = zlib.decompressobj()
            raw = unpack.decompress(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)), 65536)
            if unpack.unconsumed_tail or not unpack.eof:
                raise ValueError("cursor too large")
            data = json.loads(raw)
            tip, skip, fp = data["tip"], data["skip"], data["fp"]
            if not (isinstance(tip, str) and _REV.fullmatch(tip) and isinstance(skip, int) and skip >= 0
                    and isinstance(fp, str)):
                raise ValueError("bad cursor fields")
            result = cls(tip, skip, fp)
            if "q" in data:
                oldest = data["m"]
                if not (isinstance(oldest, int) or oldest is None):
                    raise ValueError("bad cursor time")
                width = len(re.split(r"\.\.\.?", tip)[0])
                result.frontier, result.oldest = _shas(data["q"], width), oldest
                result.ties = _shas(data["e"], width)
        except (ValueError, KeyError, TypeError, zlib.error) as exc:
            raise FleetError("BAD_ARGUMENT", "cursor is not one this tool returned") from exc
        return result


def _shas(joined: object, width: int) -> list[str]:
    """Full shas packed end to end (`width` hex digits each: the repository's hash, as in the tip)."""
    if not isinstance(joined, str) or not re.fullmatch(r"[0-9a-f]*", joined) or len(joined) % width:
        raise ValueError("bad sha list")
    return [joined[i:i + width] for i in range(0, len(joined), width)]


def _resolve_walk(path: str, ref: str) -> str:
    """`ref`, or each side of an `a..b` / `a...b` range, pinned to full shas (what the cursor keeps)."""
    check_rev(ref, "ref")
    op = "..." if "..." in ref else ".." if ".." in ref else None
    if op is None:
        return resolve_commit(path, ref, "ref")
    left, right = ref.split(op, 1)
    return (resolve_commit(path, left or "HEAD", "ref") + op + resolve_commit(path, right or "HEAD", "ref"))


def _check_author(value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 200 or any(ord(c) < 32 for c in value):
        raise FleetError("BAD_ARGUMENT", "author must be a short string (part of a name or an email)")
    return value


def repo_history(path: str, ref: str | None = None, limit: int = 20, path_filter: str | None = None,
                 since: str | None = None, until: str | None = None, include_merges: bool = True,
                 cursor: str | None = None, author: str | None = None, path_glob: bool = False,
                 count_omitted: bool = False) -> History:
    """Commits reachable from `ref` (default HEAD; `a..b` and `a...b` ranges too), newest first, `limit` per
    page, at about the cost of `git log` for that page.

    The cursor pins the walk to the shas the first page started from, so commits landing meanwhile do not
    shift later pages; it also pins the filters (a cursor reused with other filters is refused). Without
    filters it carries the walk's own state (`Cursor`), so a page deep in history costs what the first
    does; with filters or a range it carries the position (`git log --skip`, whose cost grows with depth). How many
    commits a page left out is not counted by default (a full walk: seconds on a big history): `has_more`
    and `omitted_count_at_least` say there is more, `omitted_count` is null; `count_omitted` counts them.
    `author` matches part of the author's name or email (case-insensitive, literal). `path_filter` is a
    literal path (a file or a folder) unless `path_glob`: then `*`, `?`, `[...]` match within a folder and
    `**` across folders (git's glob pathspec). A filter that matched no commit says so in `note`.
    """
    check_int(limit, "limit", 1, 200)
    spec = check_rel_path(path_filter, "path_filter") if path_filter is not None else None
    since, until = _check_date(since, "since"), _check_date(until, "until")
    author = _check_author(author)
    fp = _fingerprint(spec, since, until, bool(include_merges), author, bool(path_glob))
    filtered = bool(spec or since or until or author or not include_merges)
    if cursor is not None:
        state = Cursor.decode(cursor)
        if state.fp != fp:
            raise FleetError("BAD_ARGUMENT", "cursor was made with other filters; start again without it")
    else:
        tip = head_commit(path) if ref is None else _resolve_walk(path, ref)
        if tip is None:
            return {"ref": None, "head_sha": None, "commits": [], "next_cursor": None, "truncated": False,
                    "has_more": False, "omitted_count": 0, "omitted_count_at_least": 0,
                    "note": "repository has no commits yet"}
        state = Cursor(tip, 0, fp, frontier=None if filtered or "." in tip else [tip])
    tip, skip = state.tip, state.skip
    walk = ["--no-follow"]
    if since:
        walk.append(f"--since={since}")
    if until:
        walk.append(f"--until={until}")
    if not include_merges:
        walk.append("--no-merges")
    if author:
        walk += ["--fixed-strings", "--regexp-ignore-case", f"--author={author}"]
    walk += [tip, "--"] + ([spec] if spec else [])
    commits = _frontier_page(path, state, limit) if state.frontier is not None else None
    if commits is None:   # by position: filters and ranges, or a walk whose state a cursor could not keep
        if cursor is not None:
            for side in re.split(r"\.\.\.?", tip):
                resolve_commit(path, side, "cursor")
        commits = _log(path, [f"--skip={skip}", f"--max-count={limit + 1}", *walk], path_glob)
        state.frontier = None
    more = len(commits) > limit
    commits = commits[:limit]
    following = Cursor(tip, skip + limit, fp)
    if more and state.frontier is not None:
        _advance(state, commits, following)
    omitted: int | None = 0
    if more:
        omitted = (int(_git(path, ["rev-list", "--count", *walk], path_glob).strip()) - skip - limit
                   if count_omitted else None)
    ranged = "." in tip
    result = {"ref": ref or "HEAD", "head_sha": tip.rpartition(".")[2] if ranged else tip,
              "range": tip if ranged else None,
              "commits": commits, "next_cursor": following.encode() if more else None,
              "truncated": more, "has_more": more, "omitted_count": omitted,
              "omitted_count_at_least": (omitted if omitted is not None else 1) if more else 0,
              "path_match": "glob" if path_glob else "literal"}
    if not commits and skip == 0 and (spec or author):
        what = " and ".join(x for x in (f"path_filter {spec!r} ({result['path_match']})" if spec else "",
                                         f"author {author!r}" if author else "") if x)
        hint = (" (it is a literal path: set path_glob for a pattern)" if spec and not path_glob
                and any(c in spec for c in "*?[") else "")
        result["note"] = f"{what} matched no commit reachable from {ref or 'HEAD'}{hint}"
    return result


def _log(path: str, args: list[str], glob: bool) -> list[dict[str, Any]]:
    """The commit records `git log <args>` prints."""
    fields = _git(path, ["log", "-z", f"--format={_LOG_FORMAT}", *args], glob).split(b"\0")
    width = len(_LOG_FIELDS)
    return [_commit_record(fields[i:i + width]) for i in range(0, len(fields) - width + 1, width)]


def _frontier_page(path: str, state: Cursor, limit: int) -> list[dict[str, Any]] | None:
    """The next `limit` + 1 commits of an unfiltered walk, from the commits it had queued: what git would
    print after the commits already shown, at the cost of the page alone. None when that cannot be vouched
    for (the caller then pages by position, `--skip`, which is exact).

    git walks newest commit time first from a queue (ties in the order queued); a fresh `git log` started
    on the queued commits, given in that order, makes the same choices as the walk that queued them, except
    that it does not know which commits were shown already, so it would show again one such commit that it
    reaches. A commit shown before has a time at or after the oldest time shown so far (`oldest`), and if
    at it, is among `ties`: a page with no such commit is exactly the walk's next page."""
    if not state.frontier:   # (git log with no commit named would walk HEAD)
        return []
    try:
        commits = _log(path, [f"--max-count={limit + 1}", "--no-follow", *state.frontier, "--"], False)
    except FleetError:   # GitError too (e.g. a queued commit pruned since): let the exact path say what is wrong
        return None
    if state.oldest is not None:
        ties = set(state.ties)
        if any(c["committer_time"] > state.oldest or (c["committer_time"] == state.oldest and c["sha"] in ties)
               for c in commits):
            return None
    return commits


def _advance(state: Cursor, shown: list[dict[str, Any]], following: Cursor) -> None:
    """Give `following` the walk's state after `shown` (git's queue replayed: each shown commit leaves it,
    its parents not queued before join it at the end), unless it outgrows the cursor."""
    queue = list(state.frontier or [])
    queued = set(queue)
    for commit in shown:
        if commit["sha"] not in queue:
            return
        queue.remove(commit["sha"])
        for parent in commit["parents"]:
            if parent not in queued:
                queued.add(parent)
                queue.append(parent)
    low = min(c["committer_time"] for c in shown)
    if state.oldest is None or low < state.oldest:
        oldest, ties = low, [c["sha"] for c in shown if c["committer_time"] == low]
    else:
        oldest, ties = state.oldest, state.ties + [c["sha"] for c in shown if c["committer_time"] == state.oldest]
    if len(queue) <= FRONTIER_MAX and len(ties) <= TIES_MAX:
        following.frontier, following.oldest, following.ties = queue, oldest, ties
        if len(following.encode()) > CURSOR_MAX:   # (SHA-256 shas compress less than the caps assume)
            following.frontier, following.oldest, following.ties = None, None, []


def _git(path: str, args: list[str], glob: bool) -> bytes:
    """git's output, pathspecs literal (fleet.git.run.out) or, for `path_glob`, as glob patterns."""
    if not glob:
        return out(path, args)
    try:
        return run_git(path, ["--glob-pathspecs", *args]).stdout
    except GitError as exc:
        raise FleetError.from_git(exc) from exc


def commit_details(path: str, rev: str, unified: int = 3, max_bytes: int = DEFAULT_DIFF_BYTES,
                   max_files: int = DEFAULT_CAP, max_hunks: int = DEFAULT_MAX_HUNKS,
                   max_hunk_lines: int = DEFAULT_MAX_LINES) -> CommitDetails:
    """Metadata, parents and the parsed diff of one commit, its JSON within `max_bytes` + ENVELOPE.

    A root commit is diffed against the empty tree; a merge commit against its first parent
    (`diff_against` says which), which shows what the merge brought into the branch. A message longer than
    a quarter of `max_bytes` is cut (`message_truncated`).
    """
    check_int(unified, "unified", 0, 20)
    check_int(max_bytes, "max_bytes", 1024, 16 * 1024 * 1024)
    check_int(max_files, "max_files", 1, 5000)
    check_int(max_hunks, "max_hunks", 1, 100000)
    check_int(max_hunk_lines, "max_hunk_lines", 1, 100000)
    sha = resolve_commit(path, rev, "rev")
    flags = [*DIFF_FLAGS, f"--unified={unified}"]
    # The metadata is read beside the diff (two git processes at once; the diff is most of the wait), which
    # is taken against the first parent before the metadata says there is one: a root commit's fails, and it
    # is then diffed against the empty tree.
    meta = _BESIDE.submit(out, path, ["show", "-s", f"--format={COMMIT_FORMAT}", sha])
    try:
        raw: bytes | None = out(path, ["diff", *flags, f"{sha}^1", sha, "--"])
        failed: FleetError | None = None
    except FleetError as exc:
        raw, failed = None, exc
    info: dict[str, Any] = {k: text(v) for k, v in zip(COMMIT_KEYS, meta.result().split(b"\0", 9))}
    info["parents"] = info["parents"].split() if info["parents"] else []
    info["author_time"], info["committer_time"] = int(info["author_time"]), int(info["committer_time"])
    info["message"] = info["message"].rstrip("\n")
    info["subject"] = info["message"].split("\n", 1)[0]
    parents = info["parents"]
    if parents:
        if failed is not None:
            raise failed
        info["diff_against"] = "first_parent" if len(parents) > 1 else "parent"
    else:
        raw = out(path, ["diff-tree", "-r", "--root", "--no-commit-id", *flags, sha, "--"])
        info["diff_against"] = "empty_tree"
    info["is_root"] = not parents
    info["is_merge"] = len(parents) > 1
    if info["is_merge"]:
        info["note"] = ("merge commit: the diff is against the first parent, i.e. everything the merge "
                        "brought into the branch")
    info["message_truncated"] = json_size(info["message"]) > max_bytes // 4
    if info["message_truncated"]:
        info["message"] = info["message"].encode()[:max_bytes // 8].decode("utf-8", "ignore")
    info.update(shape_changes(diffparse.index_diff(raw), max_files, max_bytes, max_hunks=max_hunks,
                              max_lines=max_hunk_lines, reserve=json_size(info)))
    info["truncated"] = info["truncated"] or info["message_truncated"]
    return info
