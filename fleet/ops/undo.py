"""The `restore` operation: back to the state before a completed proposal, from its restore point.

It is itself a proposal (an agent may ask; `fleetdeck proposals undo` is the person's shortcut), so it
gets its own restore point and can be undone in turn. It refuses (STALE) when the repository is no longer
exactly as that proposal left it: an undo must never throw away work done since.
"""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.ops import restore
from fleet.ops.model import Ctx, Op, Plan, known_args, short_ref, string
from fleet.ops.state import head_state, ref_sha


def preview_restore(ctx: Ctx, args: dict) -> Plan:
    known_args("restore", args, {"restore_point"})
    point_id = string(args, "restore_point", max_len=128)
    point = restore.details(ctx.index, point_id)
    row = ctx.index.conn.execute("SELECT id, op, status, restore_point FROM proposals WHERE id = ?",
                                 (point_id,)).fetchone()
    if row is not None:
        undoable(dict(zip(("id", "op", "status", "restore_point"), row)))
    restore.check_undo(ctx.repo, point)
    head_ref, head = head_state(ctx.repo)
    refs = {ref: {"now": ref_sha(ctx.repo, ref), "restored": sha} for ref, sha in point["refs"].items()}
    preview = {
        "summary": f"undo {point['op'] or 'proposal'} {point_id}: back to {point['head'][:12] if point['head'] else 'no commit'}"
                   f" on {short_ref(point['head_ref']) if point['head_ref'] else 'detached HEAD'}",
        "restore_point": point_id, "undoes_op": point["op"],
        "head": {"now": head, "restored": point["head"],
                 "branch_now": short_ref(head_ref) if head_ref else None,
                 "branch_restored": short_ref(point["head_ref"]) if point["head_ref"] else None},
        "refs": refs, "files_restored": [f["path"] for f in point["files"]][:200],
        "files_restored_count": len(point["files"]),
    }
    moves = [r for r in point["refs"] if r != "HEAD"]
    return Plan({"restore_point": point_id}, preview, refs=moves, moves=moves,
                policy_refs=[short_ref(r) for r in moves], policy_paths=[f["path"] for f in point["files"]],
                untracked_content=[])


def run_restore(ctx: Ctx, args: dict) -> dict:
    point = restore.details(ctx.index, args["restore_point"])
    restore.check_undo(ctx.repo, point)
    return {"restored": args["restore_point"], **restore.apply(ctx.repo, point)}


OPS = {"restore": Op(preview_restore, run_restore)}


def undoable(row: dict) -> None:
    """BAD_ARGUMENT unless a proposal ran far enough to have something to undo, and fleetdeck can undo it."""
    from fleet.ops.catalog import op_info

    if not op_info(row["op"]).undoable:
        raise FleetError("BAD_ARGUMENT", f"a {row['op']} cannot be undone by fleetdeck")
    if row["status"] not in ("completed", "failed") or not row.get("restore_point"):
        raise FleetError("BAD_ARGUMENT", f"proposal {row['id']} is {row['status']} and has no restore point to "
                                         "undo")
