"""The operations agents may propose, with the risk level a person sees before approving each one.

Risk levels (documented in docs/proposals.md and shown on every preview):
- low: nothing is lost and the change is plain to undo (stage, unstage, stage_hunks, a new branch, a stash,
  a new worktree);
- medium: HEAD, a branch or the working tree moves, and the restore point brings it back (commit, checkout,
  stash_pop, a soft, mixed or keep reset, merge, patch, patch_file_write, submodule_pointer, restore, restore_snapshot;
  a plan takes its riskiest step's level) or, for a push, leaves the machine (it cannot be undone, and says so);
- high: history is rewritten or work is thrown away (hard or merge reset, discard, amend, rebase,
  force-with-lease push, branch deletion), or the change's diff is longer than the page shows. A policy rule
  can never make a high-risk proposal run without a person (`auto` is refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.errors import FleetError


@dataclass(frozen=True)
class OpInfo:
    name: str
    risk: str            # the op's usual risk; risk_of() raises it for destructive arguments
    destructive: bool    # may throw work away or rewrite history (the MCP destructiveHint)
    undoable: bool       # a restore point brings the repository back
    summary: str


OPS: dict[str, OpInfo] = {op.name: op for op in (
    OpInfo("stage", "low", False, True, "stage paths (or everything) into the index"),
    OpInfo("unstage", "low", False, True, "take paths out of the index, keeping the working-tree files"),
    OpInfo("commit", "medium", False, True, "commit the staged changes (or only given paths) as the person, "
                                            "with a Proposed-by trailer; amend rewrites the last commit"),
    OpInfo("branch", "low", False, True, "create a branch at a start point, optionally checking it out"),
    OpInfo("checkout", "medium", False, True, "switch to a local branch, or detach HEAD at a commit"),
    OpInfo("stash", "low", False, True, "stash the working-tree changes (optionally untracked files too)"),
    OpInfo("stash_pop", "medium", False, True, "apply a stash and drop it"),
    OpInfo("reset", "medium", True, True, "move the current branch to a commit (soft, mixed, hard, keep "
                                         "or merge)"),
    OpInfo("discard", "high", True, True, "throw away working-tree changes to paths (the restore point keeps "
                                          "every file's exact content)"),
    OpInfo("merge", "medium", False, True, "merge a branch or commit into the checked-out branch (merge, squash "
                                           "or fast-forward only); conflicts abort it"),
    OpInfo("rebase", "high", True, True, "replay the checked-out branch's commits onto another commit (never "
                                         "interactive); conflicts abort it"),
    OpInfo("patch", "medium", True, True, "apply a unified diff to the working tree or the index"),
    OpInfo("patch_file_write", "medium", True, True, "write a patch file (.patch/.diff) into the repository, "
                                                     "where tools such as patch-package apply it"),
    OpInfo("stage_hunks", "low", False, True, "stage chosen hunks of one file (ids from repo.changes)"),
    OpInfo("push", "medium", True, False, "push a branch to a remote (cannot be undone by fleetdeck); a force "
                                          "only as force-with-lease pinned to the sha the preview saw"),
    OpInfo("branch_delete", "high", True, True, "delete local branches across the fleet (merged ones only by "
                                                "default; never a checked-out one); tips kept for undo"),
    OpInfo("worktree", "low", False, True, "add a linked worktree (optionally on a new branch)"),
    OpInfo("submodule_pointer", "medium", False, True, "record a submodule's checked-out commit as the new "
                                                       "pointer (a commit), or return it to the recorded one"),
    OpInfo("plan", "medium", False, True, "up to ten steps (stage, unstage, stage_hunks, commit, branch, "
                                          "checkout, stash, merge, rebase, discard, reset, patch), each "
                                          "previewed after the ones before it, approved once, run in order, "
                                          "undone at once"),
    OpInfo("restore", "medium", True, True, "bring a repository back to the state before a completed proposal"),
    OpInfo("restore_snapshot", "medium", True, True, "put a safety-net snapshot's files (all, or some paths; "
                                                     "with index its staged state) back into the working tree"),
)}

HIGH = "high"
LEVELS = ("low", "medium", "high")


def op_info(op: str) -> OpInfo:
    info = OPS.get(op)
    if info is None:
        raise FleetError("BAD_ARGUMENT", f"unknown operation {op!r}; known: {', '.join(sorted(OPS))}")
    return info


def risk_of(op: str, args: dict, preview: dict | None = None) -> str:
    """The risk of one proposal: the op's level, raised to high for the arguments that destroy or rewrite,
    and for a change whose diff is longer than the display cut (the person cannot see all of it on the
    page: no policy may run it unseen, and approving it takes the high-risk confirmation)."""
    if preview and any(v.get("diff_truncated") for v in [preview] + [s.get("preview") or {} for s in
                                                                      preview.get("steps") or []]):
        return HIGH
    if op == "reset" and args.get("mode") in ("hard", "merge"):  # --merge resets staged changes
        return HIGH
    if op == "commit" and args.get("amend"):
        return HIGH
    if op == "push" and args.get("force_with_lease"):
        return HIGH
    if op == "plan":
        risks = [risk_of(s["op"], s.get("args", {})) for s in args.get("steps", []) if s.get("op") in OPS]
        return max(risks or ["low"], key=LEVELS.index)
    return op_info(op).risk


def always_high(op: str) -> bool:
    """Ops that are high-risk whatever their arguments (a policy `auto` rule naming one is invalid)."""
    return op_info(op).risk == HIGH
