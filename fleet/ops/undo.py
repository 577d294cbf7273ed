"""The `restore` operation: back to the state before a completed proposal, from its restore point.

It is itself a proposal (an agent may ask; `fleetdeck proposals undo` is the person's shortcut), so it
gets its own restore point and can be undone in turn. It refuses (STALE) when the repository is no longer
exactly as that proposal left it: an undo must never throw away work done since. A fleet-wide branch
clean-up is undone branch by branch instead (fleet.ops.cleanup): it recreates what it deleted.
"""

from __future__ import annotations

import json

from fleet.errors import FleetError
from fleet.ops import catalog, restore, restorepoints
from fleet.ops.catalog import op_info
from fleet.ops.cleanup import undo_branch_delete
from fleet.git.run import run, text
from fleet.ops.model import Ctx, Plan, tree_paths
from fleet.git.files import short_ref
from fleet.ops.pins import head_state, ref_sha


def undoable(row: dict) -> None:
    """BAD_ARGUMENT unless a proposal ran far enough to have something to undo, and fleetdeck can undo it."""
    if not op_info(row["op"]).undoable:
        raise FleetError("BAD_ARGUMENT", f"a {row['op']} cannot be undone by fleetdeck")
    if row["status"] not in ("completed", "failed") or not row.get("restore_point"):
        raise FleetError("BAD_ARGUMENT", f"proposal {row['id']} is {row['status']} and has no restore point to "
                                         "undo")


def _proposal(ctx: Ctx, point_id: str) -> dict | None:
    found = ctx.index.proposals.get(point_id)
    if found is None:
        return None
    row = {k: found[k] for k in ("id", "op", "status", "restore_point", "result")}
    row["result"] = json.loads(row["result"]) if row["result"] else {}
    undoable(row)
    return row


def preview_restore(ctx: Ctx, args: dict) -> Plan:
    catalog.Restore.known(args)
    point_id = catalog.Restore.text(args, "restore_point")
    point = restorepoints.details(ctx.index, point_id)
    row = _proposal(ctx, point_id)
    if row is not None and row["op"] == "branch_delete":
        deleted = [b for b in row["result"].get("branches", []) if b["status"] == "deleted"]
        preview = {"summary": f"undo branch clean-up {point_id}: recreate {len(deleted)} branch(es)",
                   "restore_point": point_id, "undoes_op": "branch_delete",
                   "recreate": [{k: b[k] for k in ("repo", "branch", "tip")} for b in deleted]}
        repos = list(dict.fromkeys(b["repo"] for b in deleted))
        subjects = [{"op": "restore", "repo": repo,
                     "refs": [b["branch"] for b in deleted if b["repo"] == repo]} for repo in repos]
        return Plan({"restore_point": point_id}, preview, paths=[], pin_head=False,
                    policy_refs=[b["branch"] for b in deleted], subjects=subjects)
    restore.check_undo(ctx.repo, point)
    head_ref, head = head_state(ctx.repo)
    refs = {ref: {"now": ref_sha(ctx.repo, ref), "restored": sha} for ref, sha in point["refs"].items()}
    preview = {
        "summary": f"undo {point['op'] or 'proposal'} {point_id}: back to "
                   f"{point['head'][:12] if point['head'] else 'no commit'} on "
                   f"{short_ref(point['head_ref']) if point['head_ref'] else 'detached HEAD'}",
        "restore_point": point_id, "undoes_op": point["op"],
        "head": {"now": head, "restored": point["head"],
                 "branch_now": short_ref(head_ref) if head_ref else None,
                 "branch_restored": short_ref(point["head_ref"]) if point["head_ref"] else None},
        "refs": refs, "files_restored": [f["path"] for f in point["files"]][:200],
        "files_restored_count": len(point["files"]),
    }
    moves = [r for r in point["refs"] if r != "HEAD"]
    writes = list(dict.fromkeys([*point["_saved"], *(point["after"].get("paths") or {})]))
    return Plan({"restore_point": point_id}, preview, refs=moves, moves=moves,
                policy_refs=[short_ref(r) for r in moves], policy_paths=_restored_paths(ctx.repo, point, head),
                writes=writes)


def _restored_paths(repo: str, point: dict, head: str | None) -> list[str]:
    """Every path the restore rewrites: the saved files, what differs between HEAD now and then, and
    what differs between the index now and the saved one (read-tree -u --reset writes all of them)."""
    paths = [f["path"] for f in point["files"]]
    if head and point["head"]:
        paths += tree_paths(repo, point["head"], head)
    staged = run(repo, ["diff-index", "--cached", "--no-renames", "--name-only", "-z", point["index_tree"], "--"],
                 max_bytes=8 << 20).stdout
    paths += [p for p in text(staged).split("\0") if p]
    return list(dict.fromkeys(paths))


def run_restore(ctx: Ctx, args: dict) -> dict:
    point_id = args["restore_point"]
    point = restorepoints.details(ctx.index, point_id)
    row = _proposal(ctx, point_id)
    if row is not None and row["op"] == "branch_delete":
        return {"restored": point_id, **undo_branch_delete(row["result"])}
    restore.check_undo(ctx.repo, point)
    return {"restored": point_id, **restore.apply(ctx.repo, point)}


catalog.Restore.bind(preview_restore, run_restore)
