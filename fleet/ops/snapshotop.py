"""The `restore_snapshot` operation: a safety-net snapshot's files (and, with `index`, its staged state) put back
into the working tree, as a proposal like every write.

The preview is `fleet.snapshot.restore.restore(dry_run=True)`: the paths it would write or remove, each pinned
(a path that changes after the preview makes the run STALE) and saved in the restore point (`writes`), so the
proposal's undo puts them back byte for byte. The run is `restore(...)`, which snapshots the present first: its
id (`snapshot_before`) is in the result and on the timeline, a second way back.
"""

from __future__ import annotations

import re

from fleet.errors import FleetError
from fleet.ops import catalog
from fleet.ops.model import DIFF_CAP, Ctx, Plan, string
from fleet.index.target import resolve_target
from fleet.snapshot.restore import restore
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.timeline import diff, work_tree_of
from fleet.words import plural

SNAPSHOT_ID = re.compile(r"^[0-9a-f]{4,40}$")


def _tree(ctx: Ctx) -> WorkTree:
    return work_tree_of(resolve_target(ctx.index, ctx.repo))


def preview_restore_snapshot(ctx: Ctx, args: dict) -> Plan:
    catalog.RestoreSnapshot.known(args)
    wanted = string(args, "snapshot", max_len=40)
    if not SNAPSHOT_ID.fullmatch(wanted):
        raise FleetError("BAD_ARGUMENT", "snapshot must be a snapshot id (4 to 40 hex digits)")
    # no paths (or an empty list, which the published schema refuses): every file of the snapshot
    paths = catalog.RestoreSnapshot.items(args, "paths", ctx.repo) if args.get("paths") else []
    index = catalog.RestoreSnapshot.flag(args, "index")
    tree = _tree(ctx)
    plan = restore(tree, ctx.index.path, wanted, paths=paths, index=index, dry_run=True)
    touched = sorted([*plan["restored"], *plan["removed"]])
    if not touched and not plan["index"]:
        raise FleetError("BAD_ARGUMENT", f"nothing to restore: the working tree already matches snapshot "
                                         f"{plan['snapshot'][:12]}" + (" there" if paths else ""))
    patch = diff(tree, ctx.index.path, plan["snapshot_before"], plan["snapshot"],
                 paths[0] if len(paths) == 1 else None)
    cut = len(patch.encode()) > DIFF_CAP
    if cut:
        patch = patch.encode()[:DIFF_CAP].rsplit(b"\n", 1)[0].decode("utf-8", "replace") + "\n"
    preview = {"summary": f"restore {plural(len(plan['restored']), 'file')} from snapshot {plan['snapshot'][:12]}"
                          + (f", remove {plural(len(plan['removed']), 'file')} it did not have"
                             if plan["removed"] else "") + (" and its staged state" if plan["index"] else ""),
               "snapshot": plan["snapshot"],
               "files": [*({"path": p, "kind": "restore"} for p in plan["restored"]),
                         *({"path": p, "kind": "remove"} for p in plan["removed"])][:200],
               "files_count": len(touched), "index": plan["index"], "diff": patch, "diff_truncated": cut,
               "note": "the newer content of these files is overwritten; the restore point and a snapshot of "
                       "the present keep it"}
    return Plan({"snapshot": plan["snapshot"], "paths": paths, "index": plan["index"]}, preview,
                paths=touched, pin_index=plan["index"], policy_paths=touched, writes=touched)


def run_restore_snapshot(ctx: Ctx, args: dict) -> dict:
    done = restore(_tree(ctx), ctx.index.path, args["snapshot"], paths=args["paths"], index=args["index"])
    return {k: done[k] for k in ("restored", "removed", "index", "snapshot", "snapshot_before")}


catalog.RestoreSnapshot.bind(preview_restore_snapshot, run_restore_snapshot)
