"""The safety net for agents: take a snapshot (nothing in the repository changes, so no approval is needed),
list a working tree's snapshots, and diff two of them or one against the working tree now. Giving work back
is a write: `operation.preview.restore_snapshot` is a proposal a person approves."""

from __future__ import annotations

from typing import Annotated

from mcp.types import ToolAnnotations
from pydantic import Field

from fleet.caps import cap
from fleet.snapshot.take import take, taken
from fleet.snapshot.timeline import diff, snapshots, work_tree_of
from fleet.timespec import parse_since
from mcp_bridge import models
from mcp_bridge.bridge import identity
from mcp_bridge.toolkit import Toolkit
from mcp_bridge.tools_repo import Repo

SnapshotId = Annotated[str, Field(pattern=r"^[0-9a-f]{4,40}$", description="snapshot id (or a unique prefix)")]
Path = Annotated[str | None, Field(max_length=4096, description="only this file or folder (repo-relative)")]
MAX_DIFF = 256 * 1024
TAKES_SNAPSHOT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                 open_world_hint=False)


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    def tree(repo: str):
        return work_tree_of(bridge.resolve(repo))

    @kit.tool("snapshot.take", models.SnapshotTaken, "Snapshot a working tree now", TAKES_SNAPSHOT)
    def snapshot_take(repo: Repo) -> dict:
        """Keep the working tree's exact bytes (tracked and untracked files, the staged state, HEAD, stashes)
        in fleetdeck's own store, before risky work. Nothing in the repository changes and nothing the
        repository defines runs; a snapshot equal to the last one is not kept again (`unchanged`)."""
        who = identity.get()        # the authenticated identity, or unknown:<declared>: never a declared name
        made = take(tree(repo), bridge.index().path, "mcp", agents=[who.agent] if who else [])
        return taken(made)

    @kit.tool("snapshot.list", models.SnapshotList, "Snapshots of a working tree")
    def snapshot_list(repo: Repo, since: Annotated[str | None, Field(max_length=100, description=
                      "only since: ISO 8601, unix ms or 90m/24h/7d")] = None, path: Path = None,
                      limit: Annotated[int, Field(ge=1, le=1000)] = 100) -> dict:
        """The working tree's snapshots, newest first: when, what took it (watch, sweep, a hook, a person),
        the agents present, how many files changed since the one before, and whether work was discarded
        then (restore from the snapshot before such a one to get it back)."""
        found = snapshots(tree(repo), bridge.index().path, since=parse_since(since) if since else None, path=path)
        kept, info = cap(found, limit)
        return {"snapshots": kept, "snapshot_count": len(found), **info}

    @kit.tool("snapshot.diff", models.SnapshotDiff, "Diff between snapshots, or a snapshot and now")
    def snapshot_diff(repo: Repo, from_: Annotated[SnapshotId, Field(alias="from")],
                      to: Annotated[str | None, Field(pattern=r"^[0-9a-f]{4,40}$", description=
                                                      "the later snapshot (default: the working tree now)")] = None,
                      path: Path = None) -> dict:
        """A unified diff from snapshot `from` to snapshot `to` (or to the working tree now), capped at 256 KB."""
        text = diff(tree(repo), bridge.index().path, from_, to, path)
        data = text.encode("utf-8")
        kept = data[:MAX_DIFF].decode("utf-8", "ignore")
        return {"from": from_, "to": to, "patch": kept, "total_bytes": len(data), "truncated": len(data) > MAX_DIFF,
                "omitted_count": len(data) - len(kept.encode("utf-8"))}
