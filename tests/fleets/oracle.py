"""What the git CLI itself says about a repository: the oracle every fleetdeck field is checked against.

Deliberately uses other git commands than fleetdeck does (porcelain v1, rev-parse, for-each-ref,
worktree list, submodule status, long status text) so a shared misunderstanding cannot pass unnoticed.
"""

from __future__ import annotations

from pathlib import Path

from tests.fleets.gitbuild import git

UNMERGED = {"DD", "AU", "UD", "UA", "DU", "AA", "UU"}


def head_state(repo: Path) -> dict:
    head = git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False).strip() or None
    branch = git(repo, "symbolic-ref", "--short", "-q", "HEAD", check=False).strip() or None
    if head is None:
        # unborn: git still names the branch HEAD points to
        return {"head": None, "branch": branch, "detached": False}
    return {"head": head, "branch": branch, "detached": branch is None}


def upstream_state(repo: Path, branch: str | None) -> dict:
    if branch is None:
        return {"upstream": None, "ahead": None, "behind": None, "upstream_gone": False}
    line = git(repo, "for-each-ref", "--format=%(upstream:short)|%(upstream:track,nobracket)",
               f"refs/heads/{branch}").strip()
    upstream, _, track = line.partition("|")
    if not upstream:
        return {"upstream": None, "ahead": None, "behind": None, "upstream_gone": False}
    if track == "gone":
        return {"upstream": upstream, "ahead": None, "behind": None, "upstream_gone": True}
    counts = git(repo, "rev-list", "--left-right", "--count", f"{branch}...{upstream}").split()
    return {"upstream": upstream, "ahead": int(counts[0]), "behind": int(counts[1]), "upstream_gone": False}


def counts(repo: Path) -> dict:
    out = git(repo, "status", "--porcelain=v1", "-z")
    staged = unstaged = untracked = conflicted = 0
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        rec = fields[i]
        i += 1
        if not rec:
            continue
        xy = rec[:2]
        if xy[0] in "RC":
            i += 1  # the rename source follows as its own field
        if xy == "??":
            untracked += 1
        elif xy in UNMERGED:
            conflicted += 1
        else:
            staged += xy[0] != " "
            unstaged += xy[1] != " "
    return {"staged": staged, "unstaged": unstaged, "untracked": untracked, "conflicted": conflicted}


def stash_count(repo: Path) -> int:
    return len([ln for ln in git(repo, "stash", "list").splitlines() if ln])


def operation(repo: Path) -> str | None:
    text = git(repo, "status")
    if "rebase in progress" in text or "You are currently rebasing" in text:
        return "rebase"
    if "You have unmerged paths" in text or "All conflicts fixed but you are still merging" in text:
        return "merge"
    if "You are currently cherry-picking" in text:
        return "cherry-pick"
    if "You are currently reverting" in text:
        return "revert"
    if "You are currently bisecting" in text:
        return "bisect"
    return None


def worktrees(repo: Path) -> list[dict]:
    """Linked worktrees from `git worktree list --porcelain` (the main worktree excluded)."""
    rows: list[dict] = []
    for block in git(repo, "worktree", "list", "--porcelain").strip().split("\n\n")[1:]:
        row = {"path": None, "head": None, "branch": None, "locked": False, "prunable": False, "detached": False}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            if key == "worktree":
                row["path"] = value
            elif key == "HEAD":
                row["head"] = value
            elif key == "branch":
                row["branch"] = value.removeprefix("refs/heads/")
            elif key == "detached":
                row["detached"] = True
            elif key == "locked":
                row["locked"] = True
                row["lock_reason"] = value or None
            elif key == "prunable":
                row["prunable"] = True
        rows.append(row)
    return rows


def submodules(repo: Path) -> list[dict]:
    states = {" ": "clean", "+": "drifted", "-": "uninitialized", "U": "conflict"}
    rows = []
    for line in git(repo, "submodule", "status").splitlines():
        if not line:
            continue
        prefix, sha, path = line[0], line[1:41], line[42:].split(" (")[0]
        rows.append({"path": path, "state": states[prefix], "sha": sha})
    return rows


def branches(repo: Path) -> list[dict]:
    rows = []
    out = git(repo, "for-each-ref", "--format=%(refname:short)|%(objectname)|%(upstream:short)|"
                                    "%(upstream:track,nobracket)", "refs/heads")
    for line in out.splitlines():
        name, sha, upstream, track = line.split("|")
        ahead = behind = None
        if upstream and track != "gone":
            ahead = behind = 0
            for part in track.split(", "):
                if part.startswith("ahead "):
                    ahead = int(part[6:])
                elif part.startswith("behind "):
                    behind = int(part[7:])
        rows.append({"name": name, "head": sha, "upstream": upstream or None, "ahead": ahead, "behind": behind,
                     "upstream_gone": track == "gone"})
    return rows


def reflog_count(repo: Path, ref: str) -> int:
    return len([ln for ln in git(repo, "reflog", "show", "--format=%H", ref, "--").splitlines() if ln])


def paged_shas(repo: Path, limit: int = 2, **kwargs) -> list[str]:
    """Every commit `repo.history` lists, page after page through its cursors (to compare with `git log`)."""
    from fleet.repo.history import repo_history

    shas: list[str] = []
    cursor = None
    while True:
        page = repo_history(str(repo), limit=limit, cursor=cursor, **kwargs)
        shas += [c["sha"] for c in page["commits"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return shas
