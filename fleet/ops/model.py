"""What every operation module provides: a preview that validates and plans, and a run that executes.

`Plan` is the preview's output: the normalised arguments that will run, what people and agents are shown,
and what the executor must pin (refs, working-tree paths) and save in the restore point (refs it moves,
untracked files it may delete, every path it may write). Each op's declaration, with its preview and run, is
its class in fleet/ops/catalog.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fleet.errors import FleetError
from fleet.git.revs import check_rev, resolve_commit
from fleet.git.run import run, text
from fleet.repo.scope import resolve_file_in_repo

MAX_PATHS = 1000
DIFF_CAP = 64 * 1024
MAX_MESSAGE = 64 * 1024
# What one proposal, and one identity's pending proposals, may hold (docs/proposals.md, "Size limits"): a
# proposal's patch (UTF-8 bytes; the patch op and its preview check it), its arguments as stored (JSON), and
# everything an identity has pending (arguments + previews, as stored). Over any of them: LIMIT.
MAX_PATCH_BYTES = 1024 * 1024
MAX_ARGS_BYTES = 2 * 1024 * 1024
MAX_PENDING_BYTES = 16 * 1024 * 1024


@dataclass
class Plan:
    args: dict                                      # the arguments that will run, normalised
    preview: dict                                   # what a person (and the agent) is shown
    refs: list[str] = field(default_factory=list)   # full ref names pinned (read or moved)
    moves: list[str] = field(default_factory=list)  # full ref names it moves (saved in the restore point)
    paths: list[str] | None = None                  # working-tree pin: None = whole tree, [] = none
    pin_index: bool = False                         # pin the whole index too (what a commit records)
    pin_head: bool = True                           # pin HEAD (not for a fleet-wide branch clean-up)
    policy_refs: list[str] = field(default_factory=list)   # short ref names, for the policy's `ref` globs
    policy_paths: list[str] = field(default_factory=list)  # repo-relative paths, for its `path` prefixes
    untracked_content: list[str] = field(default_factory=list)  # untracked files it may delete
    writes: list[str] = field(default_factory=list)  # working-tree paths it may create, change, delete or
    #                   overwrite beyond git status' changed files, whatever their status (fleet.ops.writeset)
    undo: dict = field(default_factory=dict)        # extra undo steps (stash entries) known up front
    paths_listed: bool = True                       # False: it changes paths policy_paths cannot list
    subjects: list[dict] = field(default_factory=list)  # more for the policy to judge: plan steps, other repos
    deferred: str | None = None                     # why some argument is known only at run time (no auto)


@dataclass(frozen=True)
class Ctx:
    """Who asks, where: the repository's canonical path, the agent's id, the index, the proposal's id."""
    repo: str
    agent: str
    index: object
    proposal_id: str | None = None


# --- argument checks shared by the ops ------------------------------------------------------------------

def known_args(op: str, args: dict, allowed: set[str]) -> None:
    extra = set(args) - allowed
    if extra:
        raise FleetError("BAD_ARGUMENT", f"{op} takes no argument {sorted(extra)[0]!r}; it takes "
                                         f"{', '.join(sorted(allowed))}")


def flag(args: dict, key: str, default: bool = False) -> bool:
    value = args.get(key, default)
    if not isinstance(value, bool):
        raise FleetError("BAD_ARGUMENT", f"{key} must be true or false")
    return value


def string(args: dict, key: str, *, required: bool = True, max_len: int = 4096, default: str | None = None) -> str | None:
    value = args.get(key, default)
    if value is None:
        if required:
            raise FleetError("BAD_ARGUMENT", f"{key} is required")
        return None
    if not isinstance(value, str) or not value:
        raise FleetError("BAD_ARGUMENT", f"{key} must be a non-empty string")
    if len(value) > max_len:
        raise FleetError("BAD_ARGUMENT", f"{key} is longer than {max_len} characters")
    if "\0" in value:
        raise FleetError("BAD_ARGUMENT", f"{key} contains a NUL character")
    return value


def commit_of(repo: str, rev: str, field: str) -> str:
    check_rev(rev, field)
    if ".." in rev:
        raise FleetError("BAD_REF", f"{field} must name one commit, not a range")
    return resolve_commit(repo, rev, field)


def local_branch(repo: str, name: str, field: str) -> str:
    """`refs/heads/<name>` for a branch name that git accepts (check-ref-format --branch)."""
    check_rev(name, field)
    short = name[len("refs/heads/"):] if name.startswith("refs/heads/") else name
    result = run(repo, ["check-ref-format", "--branch", short], check=False)
    if result.returncode != 0 or short.startswith("-") or short == "HEAD" or short.startswith("@"):
        raise FleetError("BAD_REF", f"{field} {name!r} is not a valid branch name")
    return "refs/heads/" + short


def capped_diff(repo: str, command: list[str]) -> dict:
    """A patch from diff plumbing (`diff-files`, `diff-index`, `diff-tree`: porcelain `git diff` would refresh
    and rewrite .git/index), as text cut at DIFF_CAP bytes on a line boundary, saying so, with every file's
    +/- counts from git's numstat (`diff_files`) so that nothing past the cut is hidden."""
    name, *rest = command
    data = run(repo, [name, "-p", "--no-color", "--no-ext-diff", "--no-textconv", *rest]).stdout
    numstat = run(repo, [name, "--numstat", "-z", "--no-ext-diff", "--no-textconv", *rest]).stdout
    starts, at = [0], data.find(b"\ndiff --git ")
    while at >= 0:  # plumbing writes one `diff --git` section per file, in numstat's order
        starts.append(at + 1)
        at = data.find(b"\ndiff --git ", at + 1)
    sizes = [b - a for a, b in zip(starts, starts[1:] + [len(data)])]
    return shown_diff(data, parse_numstat(numstat), sizes)


def shown_diff(data: bytes, files: list[dict], sizes: list[int]) -> dict:
    """What a preview shows of a patch: its text cut at DIFF_CAP bytes on a line boundary (`diff`,
    `diff_truncated`) and every file (`diff_files`, in patch order, `sizes` its bytes) marked `shown` true,
    "partly" or false under that cut."""
    head, newline, _ = data[:DIFF_CAP].rpartition(b"\n")
    shown = data if len(data) <= DIFF_CAP else head + newline
    cut, start, out = len(shown), 0, []
    for row, size in zip(files, sizes):
        out.append(dict(row, shown=True if start + size <= cut else "partly" if start < cut else False))
        start += size
    return {"diff": text(shown), "diff_truncated": len(shown) < len(data), "diff_files": out}


def parse_numstat(raw: bytes) -> list[dict]:
    """`--numstat -z` records as [{path, old_path, added, deleted}] (None counts for a binary file)."""
    fields = raw.split(b"\0")
    out, i = [], 0
    while i < len(fields):
        if not fields[i]:
            i += 1
            continue
        added, deleted, path = (fields[i].split(b"\t", 2) + [b"", b""])[:3]
        old = None
        if not path:  # a rename or copy: the two names follow
            old, path = text(fields[i + 1]), fields[i + 2]
            i += 2
        out.append({"path": text(path), "old_path": old, "added": None if added == b"-" else int(added),
                    "deleted": None if deleted == b"-" else int(deleted)})
        i += 1
    return out


def commits_between(repo: str, exclude: str, include: str, limit: int = 50) -> dict:
    """Commits reachable from `include` but not `exclude`: [{sha, subject}], newest first, capped."""
    raw = text(run(repo, ["log", "--no-color", "--format=%H %s", "-z", f"--max-count={limit + 1}",
                          include, f"^{exclude}", "--"]).stdout)
    items = [{"sha": rec[:40], "subject": rec[41:]} for rec in raw.split("\0") if rec]
    return {"commits": items[:limit], "truncated": len(items) > limit}


MAX_POLICY_PATHS = 10000


def commit_paths(repo: str, revs: list[str], max_count: int | None = None) -> list[str] | None:
    """Every path the commits `revs` select change (each parent of a merge too), for the policy's `path`
    rules; None when there are more than MAX_POLICY_PATHS (the op then counts as touching unlisted paths)."""
    count = [f"--max-count={max_count}"] if max_count else []
    try:
        data = run(repo, ["log", "-m", "--no-renames", "--name-only", "-z", "--format=", *count, *revs, "--"],
                   max_bytes=8 << 20).stdout
    except FleetError as exc:
        if exc.code == "LIMIT":
            return None
        raise
    paths = list(dict.fromkeys(p.lstrip("\n") for p in text(data).split("\0") if p.lstrip("\n")))
    return paths if len(paths) <= MAX_POLICY_PATHS else None


def tree_paths(repo: str, a: str, b: str) -> list[str]:
    """The paths that differ between two trees (or commits), uncapped."""
    return [p for p in text(run(repo, ["diff-tree", "-r", "--no-renames", "--name-only", "-z", a, b, "--"],
                                max_bytes=8 << 20).stdout).split("\0") if p]


def is_ancestor(repo: str, older: str, newer: str) -> bool:
    return run(repo, ["merge-base", "--is-ancestor", older, newer], ok_codes=(0, 1)).returncode == 0


def inside(repo: str, rel: str) -> str:
    full = os.path.join(repo, rel)
    root = os.path.realpath(repo)
    if os.path.commonpath([os.path.realpath(os.path.dirname(full)), root]) != root:
        raise FleetError("BAD_PATH", f"{rel!r} leads outside the repository")
    return full
