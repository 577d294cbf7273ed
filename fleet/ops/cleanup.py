"""branch_delete: one proposal, one approval, for a clean-up of local branches across the fleet.

At most 20 repositories x 20 branches, 100 in all. Never a branch checked out in any worktree, never one
whose tip moved since the preview (each deletion is a compare-and-delete on the previewed sha), and with
`merged_only` (the default) only branches merged into their upstream or the repository's default branch.
Every deleted tip is kept under `refs/fleetdeck/restore/<id>/heads/<branch>` in its repository (with its
upstream settings in the result), so an undo recreates exactly what was deleted.
"""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.git.run import run, text
from fleet.ops import catalog
from fleet.ops.catalog import MAX_TOTAL
from fleet.ops.gitexec import exec_git
from fleet.ops.model import Ctx, Plan, is_ancestor, local_branch
from fleet.git.files import short_ref
from fleet.ops.restorepoints import restore_ref
from fleet.ops.pins import ref_sha
from fleet.repo.parts import worktree_list
from fleet.index.target import resolve_target


def checked_out(index, repo: str) -> dict[str, str]:
    """{branch: worktree path} for every branch checked out in any worktree of the repository."""
    rows = worktree_list(resolve_target(index, repo), limit=100_000)["worktrees"]
    return {r["branch"]: r["path"] for r in rows if r["branch"]}


def _default_branch(repo: str) -> str | None:
    """The branch merged work lands on: origin's HEAD when known, else a local main or master."""
    sym = text(run(repo, ["symbolic-ref", "-q", "refs/remotes/origin/HEAD"], ok_codes=(0, 1)).stdout).strip()
    if sym:
        return sym
    for name in ("refs/heads/main", "refs/heads/master"):
        if ref_sha(repo, name):
            return name
    return None


def _upstream(repo: str, branch: str) -> dict:
    def get(key: str) -> str | None:
        return text(run(repo, ["config", "--get", f"branch.{branch}.{key}"], check=False).stdout).strip() or None

    tracking = text(run(repo, ["rev-parse", "--verify", "--quiet", "--symbolic-full-name", f"{branch}@{{upstream}}"],
                        check=False).stdout).strip() or None
    return {"remote": get("remote"), "merge": get("merge"), "tracking": tracking}


def _judge(repo: str, name: str, merged_only: bool, busy: dict[str, str], default: str | None) -> dict:
    ref = local_branch(repo, name, "branches")
    branch = short_ref(ref)
    tip = ref_sha(repo, ref)
    if tip is None:
        raise FleetError("BAD_REF", f"no local branch {branch!r} in {repo}")
    item = {"branch": branch, "tip": tip, "upstream": _upstream(repo, branch)}
    if branch in busy:
        return {**item, "action": "keep", "why": f"checked out in the worktree {busy[branch]}"}
    if merged_only:
        into = [r for r in (item["upstream"]["tracking"], default) if r and r != ref and ref_sha(repo, r)]
        merged = [r for r in into if is_ancestor(repo, tip, r)]
        if not merged:
            where = " or ".join(short_ref(r) for r in into) or "any upstream or default branch"
            return {**item, "action": "keep", "why": f"not merged into {where}"}
        item["merged_into"] = short_ref(merged[0])
    return {**item, "action": "delete", "why": ("merged into " + item["merged_into"]) if merged_only else "asked"}


def preview_branch_delete(ctx: Ctx, args: dict) -> Plan:
    catalog.BranchDelete.known(args)
    merged_only = catalog.BranchDelete.flag(args, "merged_only")
    repos, total, seen = [], 0, set()
    for given in catalog.BranchDelete.items(args, "targets"):
        target = catalog.BranchDelete.record("targets", given, "branch_delete target")
        branches = target["branches"]
        total += len(branches)
        if total > MAX_TOTAL:  # across targets: no schema says it
            raise FleetError("LIMIT", f"at most {MAX_TOTAL} branches in one clean-up")
        path = resolve_target(ctx.index, target.get("repo")).path
        if path in seen:
            raise FleetError("BAD_ARGUMENT", f"{path} is named twice in targets")
        seen.add(path)
        busy, default = checked_out(ctx.index, path), _default_branch(path)
        repos.append({"repo": path, "branches": [_judge(path, b, merged_only, busy, default) for b in branches]})
    doomed = [b for r in repos for b in r["branches"] if b["action"] == "delete"]
    if not doomed:
        raise FleetError("BAD_ARGUMENT", "nothing to delete: " + "; ".join(
            f"{b['branch']}: {b['why']}" for r in repos for b in r["branches"])[:500])
    preview = {"summary": f"delete {len(doomed)} local branch(es) in {len(repos)} repositor"
                          f"{'y' if len(repos) == 1 else 'ies'}" + (" (merged ones only)" if merged_only else ""),
               "merged_only": merged_only, "targets": repos, "delete_count": len(doomed),
               "keep_count": sum(len(r["branches"]) for r in repos) - len(doomed),
               "note": "local branches only; every deleted tip is kept in the restore point"}
    subjects = [{"op": "branch_delete", "repo": r["repo"],
                 "refs": [b["branch"] for b in r["branches"] if b["action"] == "delete"]} for r in repos]
    return Plan({"targets": repos}, preview, paths=[], pin_head=False,
                policy_refs=[b["branch"] for b in doomed], subjects=subjects)


def run_branch_delete(ctx: Ctx, args: dict) -> dict:
    """Delete each previewed branch whose tip has not moved and that no worktree has checked out."""
    results = []
    for target in args["targets"]:
        repo = target["repo"]
        try:
            busy = checked_out(ctx.index, repo)
        except FleetError as exc:
            results += [{"repo": repo, "branch": b["branch"], "status": "failed", "why": exc.message}
                        for b in target["branches"] if b["action"] == "delete"]
            continue
        for item in target["branches"]:
            row = {"repo": repo, "branch": item["branch"], "tip": item["tip"], "upstream": item["upstream"]}
            if item["action"] != "delete":
                results.append({**row, "status": "kept", "why": item["why"]})
                continue
            ref = "refs/heads/" + item["branch"]
            if ref_sha(repo, ref) != item["tip"]:
                results.append({**row, "status": "failed", "why": "its tip moved since the preview"})
                continue
            if item["branch"] in busy:
                results.append({**row, "status": "failed", "why": f"now checked out in {busy[item['branch']]}"})
                continue
            try:
                exec_git(repo, ["update-ref", restore_ref(ctx.proposal_id, ref), item["tip"]])
                exec_git(repo, ["update-ref", "-d", ref, item["tip"]])
                exec_git(repo, ["config", "--remove-section", f"branch.{item['branch']}"], check=False)
                results.append({**row, "status": "deleted"})
            except FleetError as exc:
                results.append({**row, "status": "failed", "why": exc.message})
    counts = {s: sum(1 for r in results if r["status"] == s) for s in ("deleted", "kept", "failed")}
    return {"branches": results, **counts}


def undo_branch_delete(result: dict) -> dict:
    """Recreate every branch the clean-up deleted, at its tip and with its upstream settings; refuse
    (STALE, before changing anything) when one of those names exists again."""
    deleted = [r for r in result.get("branches", []) if r["status"] == "deleted"]
    taken = [f"{r['repo']}: {r['branch']}" for r in deleted if ref_sha(r["repo"], "refs/heads/" + r["branch"])]
    if taken:
        raise FleetError("STALE", "cannot undo: these branches exist again: " + ", ".join(taken[:10]))
    for r in deleted:
        exec_git(r["repo"], ["update-ref", "-m", "branch: recreated by fleetdeck (undo of a clean-up)",
                             "refs/heads/" + r["branch"], r["tip"], "0" * 40])
        for key in ("remote", "merge"):
            if r["upstream"].get(key):
                exec_git(r["repo"], ["config", f"branch.{r['branch']}.{key}", r["upstream"][key]])
    return {"recreated": len(deleted)}


catalog.BranchDelete.bind(preview_branch_delete, run_branch_delete)
