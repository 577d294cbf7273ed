"""worktree and submodule_pointer: a repository's satellites.

`worktree` adds a linked worktree (optionally on a new branch) at a path inside the fleet; its undo removes
it again (git refuses when work was done in it since) and deletes a branch it created.
`submodule_pointer` either records a submodule's checked-out commit as the superproject's new pointer (a
commit, with the person's identity and a Proposed-by trailer) or returns the submodule to the recorded
commit. It is refused unless the submodule is initialized, clean and differs; both shas are pinned from the
preview and re-checked before it runs.
"""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.files import short_ref
from fleet.git.run import run, text
from fleet.ops import catalog
from fleet.ops.anchor import new_folder
from fleet.ops.cleanup import checked_out
from fleet.ops.coreops import head_after
from fleet.ops.gitexec import exec_git
from fleet.ops.model import MAX_MESSAGE, Ctx, Plan, local_branch, string
from fleet.ops.pins import head_state, ref_sha
from fleet.repo.scope import resolve_file_in_repo


# --- worktree ---------------------------------------------------------------------------------------------

def preview_worktree(ctx: Ctx, args: dict) -> Plan:
    catalog.Worktree.known(args)
    target = new_folder(ctx.index.roots(), catalog.Worktree.text(args, "path"))
    new = catalog.Worktree.flag(args, "new_branch")
    ref = local_branch(ctx.repo, catalog.Worktree.text(args, "branch"), "branch")
    _, head = head_state(ctx.repo)
    if new:
        if ref_sha(ctx.repo, ref):
            raise FleetError("BAD_REF", f"branch {short_ref(ref)!r} already exists")
        if head is None:
            raise FleetError("BAD_ARGUMENT", "a new branch needs a commit to start at")
        start = head
    else:
        start = ref_sha(ctx.repo, ref)
        if start is None:
            raise FleetError("BAD_REF", f"no local branch {short_ref(ref)!r} (pass new_branch: true to create it)")
        busy = checked_out(ctx.index, ctx.repo)
        if short_ref(ref) in busy:
            raise FleetError("BAD_ARGUMENT", f"{short_ref(ref)} is already checked out in {busy[short_ref(ref)]}")
    preview = {"summary": f"add a worktree at {target} on {'new ' if new else ''}branch {short_ref(ref)}",
               "path": target, "branch": short_ref(ref), "new_branch": new, "start": start}
    return Plan({"path": target, "branch": short_ref(ref), "new_branch": new, "start": start}, preview,
                refs=[ref], moves=[ref] if new else [], paths=[], policy_refs=[short_ref(ref)])


def run_worktree(ctx: Ctx, args: dict) -> dict:
    # Re-resolved right before git runs: a parent swapped for a symlink since the preview leads elsewhere.
    if new_folder(ctx.index.roots(), args["path"], "STALE") != args["path"]:
        raise FleetError("STALE", f"{args['path']} now resolves elsewhere than the preview showed")
    if args["new_branch"]:
        exec_git(ctx.repo, ["worktree", "add", "-q", "-b", args["branch"], args["path"], args["start"]])
    else:
        exec_git(ctx.repo, ["worktree", "add", "-q", args["path"], args["branch"]])
    return {"path": args["path"], "branch": args["branch"], "undo": {"worktree_remove": args["path"]}}


# --- submodule_pointer ---------------------------------------------------------------------------------------

def _submodule(repo: str, rel: str) -> dict:
    """The submodule at `rel`: recorded sha (index gitlink), checked-out sha and branch, cleanliness."""
    entry = text(run(repo, ["ls-files", "-s", "-z", "--", rel]).stdout).split("\0")[0]
    if not entry.startswith("160000 "):
        raise FleetError("BAD_PATH", f"{rel!r} is not a submodule")
    recorded = entry.split()[1]
    sub = os.path.join(repo, rel)
    if not os.path.exists(os.path.join(sub, ".git")):
        raise FleetError("BAD_ARGUMENT", f"submodule {rel!r} is not initialized")
    sub_ref, checked_out = head_state(sub)
    dirty = text(run(sub, ["status", "--porcelain", "--untracked-files=no"]).stdout).strip()
    return {"path": rel, "dir": sub, "recorded": recorded, "checked_out": checked_out, "branch": sub_ref,
            "clean": not dirty}


def preview_submodule_pointer(ctx: Ctx, args: dict) -> Plan:
    catalog.SubmodulePointer.known(args)
    rel = resolve_file_in_repo(ctx.repo, catalog.SubmodulePointer.text(args, "path"))
    action = catalog.SubmodulePointer.choice(args, "action")
    message = string(args, "message", required=action == "record", max_len=MAX_MESSAGE)
    sub = _submodule(ctx.repo, rel)
    if not sub["clean"]:
        raise FleetError("BAD_ARGUMENT", f"submodule {rel!r} has uncommitted changes")
    if sub["recorded"] == sub["checked_out"]:
        raise FleetError("BAD_ARGUMENT", f"submodule {rel!r} is already at the recorded commit")
    head_ref, _ = head_state(ctx.repo)
    if action == "record":
        summary = f"record {rel} at {sub['checked_out'][:12]} (was {sub['recorded'][:12]}) in a commit"
        moves = [head_ref] if head_ref else ["HEAD"]
    else:
        summary = f"check out the recorded {sub['recorded'][:12]} in {rel} (now at {sub['checked_out'][:12]})"
        moves = []
    preview = {"summary": summary, "path": rel, "action": action, "recorded": sub["recorded"],
               "checked_out": sub["checked_out"], "message": message,
               "submodule_branch": short_ref(sub["branch"]) if sub["branch"] else None}
    return Plan({"path": rel, "action": action, "message": message, "recorded": sub["recorded"],
                 "checked_out": sub["checked_out"]}, preview, refs=moves, moves=moves, paths=[rel],
                pin_index=action == "record", policy_paths=[rel])


def run_submodule_pointer(ctx: Ctx, args: dict) -> dict:
    sub = _submodule(ctx.repo, args["path"])
    if (sub["recorded"], sub["checked_out"]) != (args["recorded"], args["checked_out"]) or not sub["clean"]:
        raise FleetError("STALE", f"submodule {args['path']!r} changed since the preview")
    if args["action"] == "record":
        exec_git(ctx.repo, ["commit", "-q", "-m", args["message"], "--trailer", f"Proposed-by: {ctx.agent}",
                            "--only", "--", args["path"]])
        return head_after(ctx)
    exec_git(sub["dir"], ["switch", "-q", "--detach", args["recorded"]])
    return {"submodule": args["path"], "head": args["recorded"],
            "undo": {"submodule_head": {"path": args["path"], "ref": sub["branch"], "sha": sub["checked_out"],
                                        "now": args["recorded"]}}}


catalog.Worktree.bind(preview_worktree, run_worktree)
catalog.SubmodulePointer.bind(preview_submodule_pointer, run_submodule_pointer)
