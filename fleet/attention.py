"""Why a repository needs a person: the reason ladder (codes, scores, badges) and `attention(record)`.

`attention` is a pure function over one repo record: the index stores its result with the record (so the
queue is one indexed query) and the brief shows it live. Below the index and every surface, so the scan,
the radar, the proposals and the presence detectors share one ladder and one wording.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Callable, NamedTuple

from fleet.words import plural as _plural


class ReasonKind(NamedTuple):
    """What every surface needs to know about a reason code: its rank, and how a person sees it."""

    score: int      # the ladder, highest first; gaps leave room for reasons other modules add
    severity: str   # the colour class on the dashboard (critical, high, op, medium, info, low, ok)
    label: str      # the short badge text


REASONS = {
    "conflict": ReasonKind(100, "critical", "conflict"),
    "pending_proposal": ReasonKind(98, "op", "proposal"),
    "broken": ReasonKind(97, "critical", "broken"),
    "discarded": ReasonKind(96, "critical", "work discarded"),
    "predicted_conflict": ReasonKind(95, "high", "will conflict"),
    "agent_collision": ReasonKind(93, "high", "agent collision"),
    "diverged": ReasonKind(90, "high", "diverged"),
    "operation": ReasonKind(85, "op", "in progress"),
    "local_changes": ReasonKind(80, "medium", "uncommitted"),
    "behind": ReasonKind(70, "info", "behind"),
    "ahead": ReasonKind(60, "info", "unpushed"),
    "stale_stash": ReasonKind(50, "low", "old stash"),
    "stash": ReasonKind(48, "low", "stash"),
    "detached": ReasonKind(46, "low", "detached"),
    "worktree": ReasonKind(45, "low", "worktree"),
    "submodule": ReasonKind(42, "low", "submodule"),
    "no_upstream": ReasonKind(40, "low", "no upstream"),
    "clean": ReasonKind(0, "ok", "clean"),
}
SCORES = {code: kind.score for code, kind in REASONS.items()}
STALE_STASH_AGE = timedelta(days=7)

def reason(code: str, summary: str, next_step: str, **details: object) -> dict:
    item = {"code": code, "score": SCORES[code], "summary": summary, "next_step": next_step}
    if details:
        item["details"] = details
    return item


def attention(record: dict, now: datetime | None = None) -> list[dict]:
    """Every reason this repository needs attention, highest first; `[clean]` when there is none."""
    now = now or datetime.now(timezone.utc)
    out: list[dict] = []
    if record.get("gone"):
        return [reason("broken", "the repository is gone from disk", "remove it from the fleet or restore it")]
    if record.get("error") and not record.get("head") and record.get("branch") is None:
        out.append(reason("broken", f"cannot be read: {record['error']}", "inspect the repository with git status"))
    elif record.get("error"):
        out.append(reason("broken", record["error"], "check for a running git process, then retry"))
    op = record.get("operation")
    detail = record.get("operation_detail") or {}
    conflicted = record.get("conflicted") or 0
    if conflicted:
        what = f" during {op}" if op else ""
        out.append(reason("conflict", f"{_plural(conflicted, 'conflicted file')}{what}",
                          _finish_step(op, conflicted=True)))
    prediction = record.get("predicted_conflicts") or {}
    ahead, behind = record.get("ahead"), record.get("behind")
    pending = bool(prediction.get("pending"))  # not made yet (a cold start's state pass): neither clean nor not
    if prediction and not pending and not prediction.get("clean"):
        paths = prediction.get("paths", [])
        shown = ", ".join(paths[:3]) + (" …" if len(paths) > 3 else "")
        out.append(reason("predicted_conflict",
                          f"merging {record.get('upstream')} would conflict in {_plural(len(paths), 'file')}: {shown}",
                          "rebase or merge now, resolving " + shown, paths=paths))
    if ahead and behind:
        out.append(reason("diverged", f"diverged from {record.get('upstream')}: {ahead} ahead, {behind} behind"
                          + ("; still predicting whether merging it conflicts" if pending else ""),
                          "git pull --rebase (or merge) then push", **({"prediction": "pending"} if pending else {})))
    if op and not conflicted:
        where = f" of {detail['branch']}" if detail.get("branch") else ""
        step = f" (step {detail['step']}/{detail['total']})" if detail.get("step") and detail.get("total") else ""
        out.append(reason("operation", f"{op}{where} in progress{step}", _finish_step(op, conflicted=False)))
    dirty = [(record.get("staged") or 0, "staged"), (record.get("unstaged") or 0, "modified"),
             (record.get("untracked") or 0, "untracked")]
    if any(n for n, _ in dirty):
        parts = ", ".join(f"{n} {label}" for n, label in dirty if n)
        out.append(reason("local_changes", f"uncommitted changes: {parts}", "review and commit, or stash"))
    if behind and not ahead:
        out.append(reason("behind", f"{behind} behind {record.get('upstream')}", "git pull --ff-only"))
    if ahead and not behind:
        out.append(reason("ahead", f"{_plural(ahead, 'unpushed commit')} on {record.get('branch')}", "git push"))
    out += _other_branches(record)
    out += _worktree_reasons(record)
    stale = [s for s in record.get("stash_list", []) if _older_than(s.get("at"), now, STALE_STASH_AGE)]
    if stale:
        out.append(reason("stale_stash", f"{_plural(len(stale), 'stash')} older than a week",
                          "git stash list; apply or drop them"))
    elif record.get("stash_list"):
        out.append(reason("stash", f"{_plural(len(record['stash_list']), 'stash')} put aside "
                          f"({record['stash_list'][0].get('message') or 'no message'})",
                          "git stash pop when you come back to it (git stash list shows them all)"))
    if record.get("detached") and record.get("head") and not op and not record.get("bare"):
        out.append(_detached(record))
    for wt in record.get("worktrees", []):
        if wt.get("prunable"):
            out.append(reason("worktree", f"worktree {wt['path']} is gone from disk", "git worktree prune"))
        elif wt.get("locked"):
            why = f" ({wt['lock_reason']})" if wt.get("lock_reason") else ""
            out.append(reason("worktree", f"worktree {wt['path']} is locked{why}",
                              "git worktree unlock when it is no longer needed"))
    # A submodule the repo tells git status to ignore (submodule.<name>.ignore=all) raises nothing either.
    subs = [s for s in record.get("submodules", []) if s.get("state") not in (None, "clean") and s.get("ignore") != "all"]
    if subs:
        text = ", ".join(f"{s['path']} {s['state']}" for s in subs[:3])
        out.append(reason("submodule", f"submodules: {text}", "git submodule update --init, or commit the pointer"))
    if record.get("upstream_gone"):
        out.append(reason("no_upstream", f"upstream {record.get('upstream')} is gone",
                          "git branch --unset-upstream, or push to recreate it"))
    elif record.get("branch") and not record.get("upstream") and not record.get("bare") and record.get("head"):
        out.append(reason("no_upstream", f"{record['branch']} has no upstream", "git push -u origin " + record["branch"]))
    if not out:
        return [reason("clean", "clean and in sync", "nothing to do")]
    out.sort(key=lambda r: -r["score"])
    return out


def _detached(record: dict) -> dict:
    """HEAD on no branch: commits made here are reachable from no branch once HEAD moves on."""
    head = record["head"]
    at = [b["name"] for b in record.get("branches", []) if b.get("head") == head]
    step = (f"git switch {at[0]} (it points here)" if at else
            f"git switch -c keep-{head[:7]} to keep what is here on a branch, or git switch "
            f"{_home(record)}")
    return reason("detached", f"HEAD is detached at {head[:12]}", step)


def _home(record: dict) -> str:
    names = [b["name"] for b in record.get("branches", [])]
    return next((n for n in ("main", "master", "trunk", "develop") if n in names), names[0] if names else "<branch>")


def _each(branches: list[dict], command: Callable[[dict], str]) -> str:
    """The command for each of the first three branches (`; `-separated), `…` when there are more."""
    return "; ".join(command(b) for b in branches[:3]) + (" …" if len(branches) > 3 else "")


def _remote(b: dict) -> str:
    return (b.get("upstream") or "origin/").split("/", 1)[0] or "origin"


def _names(branches: list[dict], with_counts: bool = False) -> str:
    shown = [f"{b['name']} ({b['ahead']} ahead, {b['behind']} behind)" if with_counts else b["name"]
             for b in branches[:3]]
    return ", ".join(shown) + (" …" if len(branches) > 3 else "")


def _other_branches(record: dict) -> list[dict]:
    """Each branch other than HEAD's in its real state against its upstream, with advice that fits it. The
    branch under a rebase is the operation's, not one to push or delete."""
    rebasing = (record.get("operation_detail") or {}).get("branch") if record.get("operation") == "rebase" else None
    others = [b for b in record.get("branches", []) if not b.get("current") and b["name"] != rebasing]
    diverged = [b for b in others if (b.get("ahead") or 0) > 0 and (b.get("behind") or 0) > 0]
    ahead = [b for b in others if (b.get("ahead") or 0) > 0 and not b.get("behind")]
    behind = [b for b in others if (b.get("behind") or 0) > 0 and not b.get("ahead")]
    gone = [b for b in others if b.get("upstream_gone")]
    out = []
    if diverged:
        out.append(reason("diverged", f"{_plural(len(diverged), 'other branch')} diverged from upstream: "
                          f"{_names(diverged, True)}",
                          "rebase each on its upstream, then push: "
                          + _each(diverged, lambda b: f"git rebase {b['upstream']} {b['name']}"),
                          branches=[b["name"] for b in diverged]))
    if ahead:
        out.append(reason("ahead", f"{_plural(len(ahead), 'other branch')} with unpushed commits: {_names(ahead)}",
                          "push them, or delete them if merged: "
                          + _each(ahead, lambda b: f"git push {_remote(b)} {b['name']}"),
                          branches=[b["name"] for b in ahead]))
    if behind:
        out.append(reason("behind", f"{_plural(len(behind), 'other branch')} behind upstream: {_names(behind)}",
                          "fast-forward when needed (they hold no commits of their own): "
                          + _each(behind, lambda b: f"git branch -f {b['name']} {b['upstream']}"),
                          branches=[b["name"] for b in behind]))
    if gone:
        out.append(reason("no_upstream", f"{_plural(len(gone), 'other branch')} whose upstream is gone: "
                          f"{_names(gone)}", "delete them if merged, or unset the upstream: "
                          + _each(gone, lambda b: f"git branch -d {b['name']}"),
                          branches=[b["name"] for b in gone]))
    return out


def _worktree_reasons(record: dict) -> list[dict]:
    """A conflict, an operation or uncommitted changes in a linked worktree, as urgent as in the main one,
    with that worktree's path in the reason and in its next step."""
    out = []
    for wt in record.get("worktrees", []):
        if wt.get("prunable") or wt.get("error") or wt.get("is_main"):
            continue
        where = f"worktree {wt['path']}" + (f" ({wt['branch']})" if wt.get("branch") else "")
        op, conflicted = wt.get("operation"), wt.get("conflicted") or 0
        step = f"in {wt['path']}: "
        if conflicted:
            during = f" during {op}" if op else ""
            out.append(reason("conflict", f"{_plural(conflicted, 'conflicted file')}{during} in {where}",
                              step + _finish_step(op, conflicted=True), worktree=wt["path"]))
        elif op:
            out.append(reason("operation", f"{op} in progress in {where}", step + _finish_step(op, conflicted=False),
                              worktree=wt["path"]))
        dirty = [(wt.get("staged") or 0, "staged"), (wt.get("unstaged") or 0, "modified"),
                 (wt.get("untracked") or 0, "untracked")]
        if any(n for n, _ in dirty):
            parts = ", ".join(f"{n} {label}" for n, label in dirty if n)
            out.append(reason("local_changes", f"uncommitted changes in {where}: {parts}",
                              step + "review and commit, or stash", worktree=wt["path"]))
    return out


def _finish_step(op: str | None, conflicted: bool) -> str:
    if op in ("rebase", "cherry-pick", "revert", "am"):
        base = "git am" if op == "am" else f"git {op}"
        return (f"resolve the conflicts, git add them, then {base} --continue (or --abort)" if conflicted
                else f"{base} --continue, or --abort to give up")
    if op == "merge":
        return ("resolve the conflicts, git add them, then git commit (or git merge --abort)" if conflicted
                else "git commit to conclude the merge, or git merge --abort")
    if op == "bisect":
        return "git bisect good|bad to continue, or git bisect reset"
    return "resolve the conflicts and git add them"


def _older_than(stamp: str | None, now: datetime, age: timedelta) -> bool:
    if not stamp:
        return False
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    return now - when > age
