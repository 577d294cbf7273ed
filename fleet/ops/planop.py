"""plan: up to ten everyday steps in one repository, one approval, executed in order, one undo.

Steps are among stage, unstage, stage_hunks, commit, branch, checkout and stash (no push, no restore, no
nesting). Every step's arguments are checked when the plan is proposed, with the same rules as the op on
its own; each step is previewed against the repository as it is now, and a later step that only makes
sense after the earlier ones (a commit of what step 1 stages) is shown with its arguments and previewed
again right before it runs. Execution stops at the first failure; the one restore point, taken before
step 1, brings the repository back to the state before the plan.
"""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.ops.model import Ctx, Op, Plan, known_args

STEP_OPS = ("stage", "unstage", "stage_hunks", "commit", "branch", "checkout", "stash")
MAX_STEPS = 10


def _ops() -> dict[str, Op]:
    from fleet.ops.service import OPS

    return OPS


def _steps(args: dict) -> list[dict]:
    steps = args.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise FleetError("BAD_ARGUMENT", f"steps must be a list of 1..{MAX_STEPS} {{op, args}}")
    clean = []
    for n, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            raise FleetError("BAD_ARGUMENT", f"step {n} must be an object {{op, args}}")
        known_args(f"step {n}", step, {"op", "args"})
        op, step_args = step.get("op"), step.get("args", {})
        if op not in STEP_OPS:
            raise FleetError("BAD_ARGUMENT", f"step {n}: {op!r} cannot be a plan step (allowed: {', '.join(STEP_OPS)})")
        if not isinstance(step_args, dict):
            raise FleetError("BAD_ARGUMENT", f"step {n}: args must be an object")
        clean.append({"op": op, "args": step_args})
    return clean


def preview_plan(ctx: Ctx, args: dict) -> Plan:
    known_args("plan", args, {"steps"})
    steps = _steps(args)
    ops = _ops()
    shown, refs, moves, undo = [], [], [], {}
    policy_refs: list[str] = []
    policy_paths: list[str] = []
    for n, step in enumerate(steps, start=1):
        try:
            plan = ops[step["op"]].preview(ctx, step["args"])
        except FleetError as exc:
            if n == 1 or exc.code != "BAD_ARGUMENT" or "takes no argument" in exc.message:
                raise FleetError(exc.code, f"step {n} ({step['op']}): {exc.message}") from None
            shown.append({"step": n, "op": step["op"], "args": step["args"], "preview": None,
                          "previewed_when_it_runs": exc.message})
            continue
        shown.append({"step": n, "op": step["op"], "args": step["args"], "preview": plan.preview})
        refs += plan.refs
        moves += plan.moves + plan.refs
        policy_refs += plan.policy_refs
        policy_paths += plan.policy_paths
        undo.update(plan.undo)
    preview = {"summary": f"{len(steps)} step(s): " + ", then ".join(s["op"] for s in steps), "steps": shown,
               "note": "runs in order and stops at the first failure; one undo returns to the state before"}
    return Plan({"steps": steps}, preview, refs=list(dict.fromkeys(refs)), moves=list(dict.fromkeys(moves)),
                paths=None, pin_index=True, policy_refs=list(dict.fromkeys(policy_refs)),
                policy_paths=list(dict.fromkeys(policy_paths)), undo=undo)


def run_plan(ctx: Ctx, args: dict) -> dict:
    ops = _ops()
    done, undo = [], {}
    for n, step in enumerate(args["steps"], start=1):
        try:
            plan = ops[step["op"]].preview(ctx, step["args"])
            result = ops[step["op"]].run(ctx, plan.args)
        except FleetError as exc:
            done.append({"step": n, "op": step["op"], "status": "failed", "error": f"{exc.code}: {exc.message}"})
            failed = FleetError(exc.code, f"step {n} ({step['op']}) failed: {exc.message}")
            failed.partial = {"steps": done, "failed_step": n, "undo": undo}
            failed.stderr = getattr(exc, "stderr", "")
            raise failed from None
        undo.update(result.pop("undo", {}) if isinstance(result, dict) else {})
        done.append({"step": n, "op": step["op"], "status": "completed", "result": result})
    return {"steps": done, "undo": undo}


OPS = {"plan": Op(preview_plan, run_plan)}
