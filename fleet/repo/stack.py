"""How a branch stands: against the default branch (or any base), against its upstream, and among the
branches stacked with it — "how far am I from main" in one answer.

Counts come from `git rev-list --left-right --count` and ancestry from `for-each-ref --contains/--merged`,
so every figure is git's own. The default branch is the one the remote says (`origin/HEAD`), else the
person's `init.defaultBranch`, else the first of main, master, trunk, develop that exists.
"""

from __future__ import annotations

import os
import re
from typing import Any, TypedDict

from fleet.caps import Capped, cap, check_int
from fleet.errors import FleetError
from fleet.git.files import MAX_POINTER_BYTES, BrokenRepo, read_file, short_ref
from fleet.git.layout import Found
from fleet.git.revs import git_dirs, resolve_commit
from fleet.git.run import out, text

_USUAL_DEFAULTS = ("main", "master", "trunk", "develop")
STACK_CAP = 50


class StackBranch(TypedDict):
    name: str
    sha: str
    ahead: int


class Upstream(TypedDict):
    name: str
    gone: bool
    sha: str | None
    ahead: int | None
    behind: int | None
    merge_base: str | None


class BranchStack(Capped):
    branch: str
    sha: str
    base: str
    base_sha: str
    default_branch: str | None
    default_branch_source: str | None
    merge_base: str | None
    ahead: int
    behind: int
    upstream: Upstream | None
    stacked_above: list[StackBranch]
    stacked_below: list[StackBranch]


def local_branches(path: str) -> dict[str, str]:
    """{short name: sha} of every local branch."""
    data = text(out(path, ["for-each-ref", "--format=%(refname:short)%00%(objectname)", "refs/heads"]))
    return dict(line.split("\0", 1) for line in data.splitlines() if "\0" in line)


def default_branch(path: str, branches: dict[str, str] | None = None, commondir: str | None = None, *,
                   complete: bool = True) -> dict[str, Any] | None:
    """`{name, source}`: the branch work lands on, and how that was decided (`origin_head`,
    `init_default_branch`, `usual_name`); None when no candidate exists. `branches` ({name: sha}, default:
    git's own list) may be a list read from the ref files (`complete=False`): a name missing from it is looked
    for in git's list before it counts as missing (a symbolic branch, an alias of another, is in git's list
    only). `commondir`, when the caller knows it, spares finding it again."""
    listed = local_branches(path) if branches is None else branches
    everything: dict[str, str] | None = listed if complete or branches is None else None

    def has(name: str) -> bool:
        nonlocal everything
        if name in listed:
            return True
        if everything is None:
            everything = local_branches(path)
        return name in everything

    origin = origin_head(path, commondir)
    if origin:
        short = short_ref(origin).removeprefix("refs/")   # as git shortens it when unambiguous
        local = short.split("/", 1)[1] if "/" in short else short
        return {"name": local if has(local) else short, "source": "origin_head"}
    configured = text(out(path, ["config", "--get", "init.defaultBranch"], ok_codes=(0, 1))).strip()
    if configured and has(configured):
        return {"name": configured, "source": "init_default_branch"}
    for name in _USUAL_DEFAULTS:
        if has(name):
            return {"name": name, "source": "usual_name"}
    return None


def origin_head(path: str, commondir: str | None = None) -> str | None:
    """The ref `refs/remotes/origin/HEAD` points to (`refs/remotes/origin/main`), None when it is no symbolic
    ref. Read from its file as git reads a loose ref (`ref:`, blanks, the name, trailing blanks), a symbolic
    ref being never packed: no git process (the brief runs three). A file that is no ref git wrote is none: a
    FIFO (git would wait on it), a name git refuses, or a link (git follows the legacy symlink refs; a link in
    a stranger's repository may point anywhere, so fleetdeck does not). git is asked only in a reftable
    repository, which has no such file."""
    common = commondir or git_dirs(path)[1]
    if os.path.isdir(os.path.join(common, "reftable")):
        asked = text(out(path, ["symbolic-ref", "-q", "refs/remotes/origin/HEAD"], ok_codes=(0, 1))).strip()
        return asked or None
    try:
        data = read_file(os.path.join(common, "refs", "remotes", "origin", "HEAD"), MAX_POINTER_BYTES,
                         "origin's HEAD")
    except BrokenRepo:
        return None
    data = (data or b"").rstrip(_BLANKS)
    if not data.startswith(b"ref:"):
        return None
    target = data[4:].lstrip(_BLANKS).decode("utf-8", "replace")
    return target if target.startswith("refs/") and not _ODD_REF.search(target) else None


_BLANKS = b" \t\n\r"   # git's own isspace(), which it skips around a loose ref's contents

# What no ref name git writes holds: control characters, spaces and the characters check-ref-format refuses.
_ODD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|/\.|\.lock(?:/|$)|\.$|/$")


def _counts(path: str, left: str, right: str) -> tuple[int, int]:
    """(commits only in `right`, commits only in `left`): `right`'s ahead/behind against `left`."""
    data = text(out(path, ["rev-list", "--left-right", "--count", f"{left}...{right}", "--"])).split()
    return int(data[1]), int(data[0])


def _merge_base(path: str, a: str, b: str) -> str | None:
    return text(out(path, ["merge-base", a, b], ok_codes=(0, 1))).strip() or None


def _upstream(path: str, branch: str, sha: str) -> dict[str, Any] | None:
    data = text(out(path, ["for-each-ref", "--format=%(upstream)%00%(upstream:short)",
                           f"refs/heads/{branch}"])).strip()
    full, _, short = data.partition("\0")
    if not full:
        return None
    up_sha = text(out(path, ["rev-parse", "--verify", "--quiet", f"{full}^{{commit}}"], ok_codes=(0, 1))).strip()
    if not up_sha:
        return {"name": short, "gone": True, "sha": None, "ahead": None, "behind": None, "merge_base": None}
    ahead, behind = _counts(path, up_sha, sha)
    return {"name": short, "gone": False, "sha": up_sha, "ahead": ahead, "behind": behind,
            "merge_base": _merge_base(path, up_sha, sha)}


def _related(path: str, sha: str, base_sha: str, branches: dict[str, str], skip: set[str]) -> tuple[list, list]:
    """(branches stacked on the tip: they contain it and go further; branches below it: their tips are in
    its history but not yet in the base), each `{name, sha, ahead}` with `ahead` counted from the tip."""
    contains = text(out(path, ["for-each-ref", "--format=%(refname:short)", f"--contains={sha}",
                               "refs/heads"])).split("\n")
    merged = text(out(path, ["for-each-ref", "--format=%(refname:short)", f"--merged={sha}",
                             f"--no-merged={base_sha}", "refs/heads"])).split("\n")
    above = []
    for name in sorted(n for n in contains if n and n not in skip and branches.get(n) != sha):
        above.append({"name": name, "sha": branches[name], "ahead": _counts(path, sha, branches[name])[0]})
    below = []
    for name in sorted(n for n in merged if n and n not in skip and branches.get(n) != sha):
        below.append({"name": name, "sha": branches[name], "ahead": _counts(path, branches[name], sha)[0]})
    return above, below


def branch_stack(found: Found, branch: str | None = None, base: str | None = None,
                 limit: int = STACK_CAP) -> BranchStack:
    """Where `branch` (default: the checked-out one) stands against `base` (default: the default branch)
    and its upstream, with its merge base and the local branches stacked above and below it."""
    check_int(limit, "limit", 1, 500)
    path = found.path
    branches = local_branches(path)
    if branch is None:
        branch = text(out(path, ["symbolic-ref", "-q", "--short", "HEAD"], ok_codes=(0, 1))).strip()
        if not branch:
            raise FleetError("BAD_REF", "HEAD is detached or unborn: name the branch")
    if branch not in branches:
        raise FleetError("BAD_REF", f"{branch!r} is not a local branch of this repo")
    sha = resolve_commit(path, f"refs/heads/{branch}", "branch")
    default = default_branch(path, branches, found.commondir)
    if base is None:
        if default is None:
            raise FleetError("NOT_FOUND", "no default branch found (no origin/HEAD, main or master): pass base")
        base = default["name"]
    base_sha = resolve_commit(path, base, "base")
    ahead, behind = _counts(path, base_sha, sha)
    above, below = _related(path, sha, base_sha, branches, {branch, base})
    above_kept, above_info = cap(above, limit)
    below_kept, below_info = cap(below, limit)
    return {
        "branch": branch, "sha": sha, "base": base, "base_sha": base_sha,
        "default_branch": default["name"] if default else None,
        "default_branch_source": default["source"] if default else None,
        "merge_base": _merge_base(path, base_sha, sha), "ahead": ahead, "behind": behind,
        "upstream": _upstream(path, branch, sha),
        "stacked_above": above_kept, "stacked_below": below_kept,
        "truncated": above_info["truncated"] or below_info["truncated"],
        "omitted_count": above_info["omitted_count"] + below_info["omitted_count"],
    }
