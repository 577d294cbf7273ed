"""One repository in one small answer: what an agent (or a dashboard card) needs before touching it.

The brief is read live (the index may lag behind the working tree by a sweep) and kept under
BUDGET characters of JSON however long the branch names and subjects are, so it is always cheap to ask for.
Hints reuse the attention reasons (fleet.attention), each pointing at the read tool that explains it further.
"""

from __future__ import annotations

from typing import TypedDict

from fleet.git.layout import Found
from fleet.attention import attention
from fleet.repo.conventions import MAX_LOG_BYTES, SAMPLE, Conventions, head_log, house_rules, non_merge_messages
from fleet.repo.identity import repo_identity
from fleet.repo.record import read_repo
from fleet.timespec import iso
from fleet.repo.jsonbudget import encode
from fleet.repo.stack import default_branch

BUDGET = 2400
MAX_COMMITS = 10
MAX_TEXT = 72
MAX_SUBMODULES = 5
MAX_WORKTREES = 3
MAX_SUBJECTS_BYTES = 1 << 20   # the recent commits' subjects alone

# Which tool tells an agent more about each radar reason.
_FOLLOW_UP = {
    "conflict": "conflict.read",
    "predicted_conflict": "repo.conflict_preflight",
    "diverged": "repo.conflict_preflight",
    "operation": "repo.status",
    "local_changes": "repo.changes",
    "behind": "repo.history",
    "ahead": "repo.history",
    "stale_stash": "stash.list",
    "worktree": "worktree.list",
    "submodule": "submodule.status",
    "broken": "repo.status",
    "no_upstream": "repo.refs",
}


class BriefHead(TypedDict):
    branch: str | None
    detached: bool
    sha: str | None
    unborn: bool
    upstream: str | None
    upstream_gone: bool
    ahead: int | None
    behind: int | None


class WorkingTree(TypedDict):
    clean: bool
    staged: int
    unstaged: int
    untracked: int
    conflicted: int


class BriefSubmodules(TypedDict):
    total: int
    clean: int
    drifted: int
    uninitialized: int
    conflict: int
    attention: list[dict]
    attention_truncated: bool


class BriefCommit(TypedDict):
    sha: str
    at: str | None
    subject: str | None


class Brief(TypedDict):
    path: str | None
    default_branch: str | None
    conventions: Conventions | None
    head: BriefHead
    operation: dict | None
    working_tree: WorkingTree | None
    stashes: int
    submodules: BriefSubmodules
    worktrees: int
    worktree_attention: list[dict]
    recent_commits: list[BriefCommit]
    hints: list[str]
    error: str | None


def _clip(text: str | None, size: int = MAX_TEXT) -> str | None:
    if text is None or len(text) <= size:
        return text
    return text[: size - 1] + "…"


def recent_commits(path: str, count: int) -> tuple[list[dict], list[tuple[str, str]] | None]:
    """The newest `count` (≤ SAMPLE) commits reachable from HEAD (none in a repo without commits), and the
    (subject, body) of the newest SAMPLE non-merge ones for the house rules, both from one `git log` of SAMPLE
    commits. The messages are None when merges among those leave the sample short while history goes on, or
    when the SAMPLE commits' messages are over the log's bound: `non_merge_messages` reads them then."""
    rows = _log(path, SAMPLE, messages=True)
    if rows is None:   # huge messages: the recent commits alone, their subjects only
        return (_commits(_log(path, count, messages=False) or [], count) if count else []), None
    messages = [(subject.decode("utf-8", "replace"), body.decode("utf-8", "replace"))
                for _, _, parents, subject, body in rows if b" " not in parents]   # one parent or none
    return _commits(rows, count), messages if len(messages) == len(rows) or len(rows) < SAMPLE else None


def _log(path: str, count: int, messages: bool) -> list[list[bytes]] | None:
    """[sha, committer time, parents, subject, body] of the newest `count` commits on HEAD (without
    `messages`, parents and body are left empty and the bound is a list of subjects'): `head_log`'s rows."""
    if messages:
        return head_log(path, count, "%H%x00%ct%x00%P%x00%s%x00%b", MAX_LOG_BYTES)
    return head_log(path, count, "%H%x00%ct%x00%x00%s%x00", MAX_SUBJECTS_BYTES)


def _commits(rows: list[list[bytes]], count: int) -> list[dict]:
    return [{"sha": sha[:12].decode("ascii", "replace"), "at": iso(int(seconds or 0)),
             "subject": _clip(subject.decode("utf-8", "replace"))} for sha, seconds, _, subject, _ in rows[:count]]


def _hints(record: dict) -> list[str]:
    hints = []
    if record.get("detached") and not record.get("operation"):
        hints.append("HEAD is detached: commits made here belong to no branch (see repo.refs)")
    for r in attention(record):
        if r["code"] == "clean":
            continue
        tool = _FOLLOW_UP.get(r["code"])
        hints.append(_clip(f"{r['summary']}: {r['next_step']}", 160) + (f" (see {tool})" if tool else ""))
    return hints[:3]


def _worktree_attention(record: dict) -> list[dict]:
    """Linked worktrees with an operation in progress or uncommitted changes: path, branch, operation and
    counts (the first MAX_WORKTREES)."""
    rows = []
    for wt in record.get("worktrees") or []:
        dirty = sum(wt.get(k) or 0 for k in ("staged", "unstaged", "untracked"))
        if wt.get("operation") or dirty or wt.get("conflicted"):
            rows.append({"path": _clip(wt["path"]), "branch": _clip(wt.get("branch")), "operation": wt.get("operation"),
                         **{k: wt.get(k) or 0 for k in ("staged", "unstaged", "untracked", "conflicted")}})
    return rows[:MAX_WORKTREES]


def brief_of(record: dict, commits: list[dict], extra: dict | None = None) -> dict:
    """The brief for a repository record (as `read_repo` returns it) and its recent commits (`extra` keys
    are added before the budget is applied)."""
    subs = record.get("submodules") or []
    counts = {state: sum(1 for s in subs if s.get("state") == state)
              for state in ("clean", "drifted", "uninitialized", "conflict")}
    attention_subs = [{"path": _clip(s["path"]), "state": s.get("state")}
                      for s in subs if s.get("state") != "clean"]
    detail = record.get("operation_detail") or {}
    working = None
    if not record.get("bare"):
        counts_wt = {k: record.get(k) or 0 for k in ("staged", "unstaged", "untracked", "conflicted")}
        working = {"clean": not any(counts_wt.values()), **counts_wt}
    brief = {
        "path": record.get("path"),
        "head": {
            "branch": _clip(record.get("branch")), "detached": bool(record.get("detached")),
            "sha": (record.get("head") or "")[:12] or None, "unborn": record.get("head") is None,
            "upstream": _clip(record.get("upstream")), "upstream_gone": bool(record.get("upstream_gone")),
            "ahead": record.get("ahead"), "behind": record.get("behind"),
        },
        "operation": ({"name": record["operation"],
                       **{k: _clip(str(v)) if isinstance(v, str) else v for k, v in detail.items()
                          if k != "message"}} if record.get("operation") else None),
        "working_tree": working,
        "stashes": record.get("stashes") or 0,
        "submodules": {"total": len(subs), **counts, "attention": attention_subs[:MAX_SUBMODULES],
                       "attention_truncated": len(attention_subs) > MAX_SUBMODULES},
        "worktrees": len(record.get("worktrees") or []),
        "worktree_attention": _worktree_attention(record),
        "recent_commits": commits,
        "hints": _hints(record),
        "error": _clip(record.get("error"), 200),
        **(extra or {}),
    }
    return _fit(brief)


def _fit(brief: dict) -> dict:
    """Drop the least useful parts (oldest commits first) until the JSON fits the budget."""
    def size() -> int:
        return len(encode(brief))

    if size() <= BUDGET:   # the usual case: measured once
        return brief
    while size() > BUDGET and brief["recent_commits"]:
        brief["recent_commits"].pop()
    while size() > BUDGET and brief["submodules"]["attention"]:
        brief["submodules"]["attention"].pop()
        brief["submodules"]["attention_truncated"] = True
    while size() > BUDGET and brief["worktree_attention"]:
        brief["worktree_attention"].pop()
    while size() > BUDGET and brief["hints"]:
        brief["hints"].pop()
    if size() > BUDGET:
        brief["path"] = _clip(brief["path"], 200)
    return brief


def repo_brief(found: Found, commits: int = 5) -> Brief:
    """Read the repository now and summarise it (see `brief_of`): its record, then one `git log` for the
    recent commits and the house rules (two when merges thin the rules' sample) and, when origin names no
    HEAD, the person's `init.defaultBranch`."""
    record = read_repo(found, stored=False)
    recent, messages = recent_commits(found.path, min(max(commits, 0), MAX_COMMITS))
    if messages is None:
        messages = non_merge_messages(found.path)
    if record.get("error"):
        default = None
    else:
        branches = {row["name"]: row["head"] for row in record.get("branches") or []}
        default = default_branch(found.path, branches, found.commondir, complete=False)
    return brief_of(record, recent if record.get("head") and commits else [],
                    {"repo": repo_identity(found), "default_branch": default["name"] if default else None,
                     "conventions": house_rules(messages)})
