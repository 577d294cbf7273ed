"""What a restore point holds, read from the index alone (no git): `restore.details` / `restore.list` and the
undo's input. Apart from fleet.ops.restore, which takes and applies them, so that the MCP tools' answer
types (derived in mcp_bridge/tools_ops.py) do not load the write side with the tools list."""

from __future__ import annotations

import json
from typing import TypedDict

from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.timespec import iso

PREFIX = "refs/fleetdeck/restore"


# The published part of `details` (no docstring: the schema has no description); it also carries
# created_at, proposal_status, index_tree, stash_snapshot, files_commit, after, pruned, and `_`-keys
# for the undo that `public` drops.
class RestoreDetails(TypedDict):
    restore_point: str
    repo: str
    op: str | None
    head_ref: str | None
    head: str | None
    refs: dict
    files: list[dict]
    git_refs: list[str]
    undoable: bool


class RestoreList(TypedDict):
    repo: str
    restore_points: list[dict]
    truncated: bool
    omitted_count: int


def restore_ref(point_id: str, ref: str) -> str:
    return f"{PREFIX}/{point_id}/{ref[5:] if ref.startswith('refs/') else ref}"


def details(index: Index, point_id: str) -> RestoreDetails:
    row = index.restore_points.get(point_id)
    if row is None:
        raise FleetError("NOT_FOUND", f"no restore point {str(point_id)[:80]!r}")
    files = json.loads(row["files"])
    proposal = index.proposals.get(point_id)
    saved = files["saved"]
    return {
        "restore_point": row["id"], "repo": row["repo"], "created_at": iso(row["created_at"]),
        "op": proposal["op"] if proposal else None, "proposal_status": proposal["status"] if proposal else None,
        "head_ref": row["head_ref"], "head": row["head"], "refs": json.loads(row["refs"]),
        "index_tree": row["index_tree"], "stash_snapshot": row["stash_snapshot"],
        "files_commit": row["files_commit"],
        "files": [{"path": p, "saved": v is not None, "mode": v[0] if v else None, "blob": v[1] if v else None,
                   "perm": f"{v[2]:o}" if v and len(v) > 2 else None} for p, v in sorted(saved.items())],
        "git_refs": [restore_ref(row["id"], r) for r, sha in [("HEAD", row["head"]), ("stash", row["stash_snapshot"]),
                     ("files", row["files_commit"]), *json.loads(row["refs"]).items()] if sha],
        "after": json.loads(row["after"]) if row["after"] else None,
        "pruned": bool(row["pruned"]),
        "undoable": bool(row["after"]) and not row["pruned"],
        "_untracked": files["untracked"], "_saved": saved, "_undo": files.get("undo", {}),
    }


def public(point: RestoreDetails) -> RestoreDetails:
    return {k: v for k, v in point.items() if not k.startswith("_")}


def list_points(index: Index, repo: str, limit: int = 200) -> RestoreList:
    rows = index.restore_points.kept_of(repo)
    points = [public(details(index, point_id)) for point_id in rows[:limit]]
    for p in points:
        p.pop("files", None)
    return {"repo": repo, "restore_points": points, "truncated": len(rows) > limit,
            "omitted_count": max(0, len(rows) - limit)}
