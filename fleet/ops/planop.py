"""plan: up to ten everyday steps in one repository, one approval, executed in order, one undo.

Steps are among STEP_OPS (no push, restore, branch clean-up, worktree or nesting). Every step is checked and
previewed with the same rules as the op on its own, in sequence: step 1 against the repository, each later
step against the state the earlier ones leave in a scratch copy (fleet/ops/scratch.py: nothing in the
repository changes, no code the repository defines runs), so "stage a, then commit" shows both files the
commit will record. Each step is its own policy subject with its final refs and paths. When no scratch copy
can be made, the later steps are shown with their arguments, previewed only when they run, and the plan
needs a person (`deferred`).

Execution re-previews each step right before it runs: a step that now names other refs or paths than the
person saw fails STALE, and a step previewed only at run time is policy-checked then (a deny refuses it).
It stops at the first failure; the one restore point, taken before step 1, brings the repository back.
"""

from __future__ import annotations

import contextlib
import re

from fleet.agents.identity import PERSON
from fleet.errors import FleetError
from fleet.ops import catalog, restore
from fleet.ops import coreops, integrate, patchops  # noqa: F401  (they bind the step ops' previews and runs)
from fleet.ops.catalog import STEP_OPS, OpSpec, risk_of
from fleet.ops.model import Ctx, Plan
from fleet.ops.policy import evaluate, load_policy, policy_subjects
from fleet.ops.scratch import scratch_copy
from fleet.words import plural

# The ops a step may be.
STEPS: dict[str, type[OpSpec]] = {name: catalog.OPS[name] for name in STEP_OPS}
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def _steps(args: dict) -> list[dict]:
    """Every step read as catalog.Step declares it, all of them before any is previewed."""
    return [catalog.PlanSteps.record("steps", step, f"step {n}")
            for n, step in enumerate(catalog.PlanSteps.items(args, "steps"), start=1)]


def _expect(plan: Plan) -> dict:
    """What the person approved a step to touch: its refs (shas made by earlier steps left out: a scratch
    commit's sha is not the real one's) and paths."""
    return {"refs": sorted(r for r in set(plan.policy_refs) if not _SHA.fullmatch(r)),
            "paths": sorted(set(plan.policy_paths)), "paths_listed": plan.paths_listed}


def _subject(ctx: Ctx, n: int, op: str, plan: Plan | None, args: dict) -> dict:
    """Step n as a policy subject of its own (fleet.ops.policy.policy_subjects), with its final refs and paths."""
    label = f"step {n} ({op})"
    if plan is None:  # known only when it runs: a `path` deny must assume it touches anything
        return {"op": op, "repo": ctx.repo, "paths_listed": False, "risk": risk_of(op, args), "label": label}
    return {"op": op, "repo": ctx.repo, "refs": plan.policy_refs, "paths": plan.policy_paths,
            "paths_listed": plan.paths_listed, "risk": risk_of(op, plan.args, plan.preview), "label": label}


@contextlib.contextmanager
def _sequence(ctx: Ctx, steps: int):
    """(a Ctx on a scratch copy, None) for previewing steps 2.., or (None, why) when there is none."""
    with contextlib.ExitStack() as stack:
        if steps == 1:
            yield None, None
            return
        try:
            work = stack.enter_context(scratch_copy(ctx.repo))
        except (FleetError, OSError) as exc:
            yield None, f"no scratch copy to preview them in sequence ({getattr(exc, 'message', exc)})"
            return
        yield Ctx(work, ctx.agent, ctx.index), None


def preview_plan(ctx: Ctx, args: dict) -> Plan:
    catalog.PlanSteps.known(args)
    steps = _steps(args)
    ops = STEPS
    shown, refs, moves, untracked, subjects, undo, paths = [], [], [], [], [], {}, []
    run_steps, deferred = [], None
    with _sequence(ctx, len(steps)) as (copy, why):
        for n, step in enumerate(steps, start=1):
            op = step["op"]
            here = ctx if n == 1 else copy
            if here is None:
                deferred = f"step {n} ({op}) is previewed only when it runs: {why}"
                shown.append({"step": n, "op": op, "args": step["args"], "preview": None, "files": None,
                              "previewed_when_it_runs": why})
                subjects.append(_subject(ctx, n, op, None, step["args"]))
                run_steps.append({**step, "expect": None})
                continue
            try:
                plan = ops[op].preview(here, step["args"])
            except FleetError as exc:
                raise FleetError(exc.code, f"step {n} ({op}): {exc.message}") from None
            if copy is not None and n < len(steps):
                try:
                    ops[op].run(copy, plan.args)
                except FleetError as exc:
                    raise FleetError(exc.code, f"step {n} ({op}) would fail after the steps before it: "
                                               f"{exc.message}") from None
            shown.append({"step": n, "op": op, "args": step["args"], "preview": plan.preview,
                          "files": plan.policy_paths[:200], "files_count": len(plan.policy_paths)})
            subjects.append(_subject(ctx, n, op, plan, step["args"]))
            run_steps.append({**step, "expect": _expect(plan)})
            refs += plan.refs
            moves += plan.moves + plan.refs
            untracked += plan.untracked_content
            paths += plan.policy_paths
            undo.update(plan.undo)
    preview = {"summary": f"{plural(len(steps), 'step')}: " + ", then ".join(s["op"] for s in steps), "steps": shown,
               "note": "each step previewed against what the steps before it leave; runs in order and stops "
                       "at the first failure; one undo returns to the state before"}
    step_refs = [r for s in subjects for r in s.get("refs", [])]
    return Plan({"steps": run_steps}, preview, refs=list(dict.fromkeys(refs)), moves=list(dict.fromkeys(moves)),
                paths=None, pin_index=True, policy_refs=list(dict.fromkeys(step_refs)),
                policy_paths=list(dict.fromkeys(paths)), untracked_content=list(dict.fromkeys(untracked)),
                undo=undo, paths_listed=all(s["paths_listed"] for s in subjects), subjects=subjects,
                deferred=deferred)


def _check_step(ctx: Ctx, step: dict, plan: Plan) -> None:
    """STALE when the step now touches other refs or paths than the person approved; for a step previewed
    only now, POLICY_DENIED when the policy refuses it."""
    if step.get("expect") is not None:
        now = _expect(plan)
        if now != step["expect"]:
            raise FleetError("STALE", f"it would now touch refs {now['refs']} and paths {now['paths'][:10]}, "
                                      f"not the previewed {step['expect']['refs']} and {step['expect']['paths'][:10]}")
        return
    subject = policy_subjects(ctx.index, step["op"], ctx.repo, plan, risk_of(step["op"], plan.args, plan.preview))
    decision = evaluate(load_policy(), ctx.agent, subject)
    if decision.action == "deny" and ctx.agent != PERSON:
        raise FleetError("POLICY_DENIED", f"the policy refuses this step: {decision.why}")


def run_plan(ctx: Ctx, args: dict) -> dict:
    ops = STEPS
    done, undo = [], {}
    for n, step in enumerate(args["steps"], start=1):
        try:
            plan = ops[step["op"]].preview(ctx, step["args"])
            _check_step(ctx, step, plan)
            restore.extend(ctx.index, ctx.repo, ctx.proposal_id,  # saved before this step writes them
                           [*plan.writes, *plan.untracked_content])
            result = ops[step["op"]].run(ctx, plan.args)
        except FleetError as exc:
            done.append({"step": n, "op": step["op"], "status": "failed", "error": f"{exc.code}: {exc.message}"})
            raise FleetError(exc.code, f"step {n} ({step['op']}) failed: {exc.message}",
                             {"partial": {"steps": done, "failed_step": n, "undo": undo},
                              "stderr": exc.details.get("stderr", "")}) from None
        undo.update(result.pop("undo", {}) if isinstance(result, dict) else {})
        done.append({"step": n, "op": step["op"], "status": "completed", "result": result})
    return {"steps": done, "undo": undo}


catalog.PlanSteps.bind(preview_plan, run_plan)
