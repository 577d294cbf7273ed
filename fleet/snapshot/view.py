"""The safety net as the dashboard shows it: a working tree's Timeline (its snapshots and discarded events,
newest first, capped with counts), one snapshot's diff against its neighbour or the working tree now, and what
a restore would overwrite. The dashboard's handlers call these; a restore itself is
`fleet.snapshot.restore.restore`.

Whether the net is on comes from the settings; which trees are watched live and which fall back to the sweeps
(over the live-watch budget) from the watcher's meta record (`fleet.snapshot.net.STATUS_KEY`, every sweep).
"""

from __future__ import annotations

from pathlib import Path

from fleet.errors import FleetError
from fleet.git.layout import common_dir
from fleet.index.store import Index
from fleet.snapshot.compare import blobs_at, raw_diff
from fleet.snapshot.config import snapshot_settings
from fleet.snapshot.restore import restore, store_of
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from fleet.snapshot.timeline import diff, discarded_events, snapshots
from fleet.safetext import visible

MAX_SHOWN = 30
MAX_PAGE_DIFF = 256 * 1024
STATUS_KEY = "snapshots"    # the index's meta record of the watcher's SafetyNet.live_status()


def tree_of(repo: dict) -> WorkTree | None:
    """The working tree of an index row (a repo page's `repo`); None for a bare repository."""
    if repo.get("bare"):
        return None
    return WorkTree(repo["path"], repo["gitdir"], str(common_dir(Path(repo["gitdir"]))))


def net_status(index: Index) -> dict:
    """On or off (and why, when the settings cannot be read), and the trees over the live-watch budget, by
    name, from the watcher's last sweep."""
    try:
        enabled, error = snapshot_settings()["enabled"], None
    except FleetError as exc:
        enabled, error = False, exc.message
    record = index.meta(STATUS_KEY) or {}
    names = index.live_names()
    return {"enabled": enabled, "error": error, "as_of": record.get("at"),
            "watched": record.get("watched", []),
            "fallback": [{"path": p, "name": names.get(p, p)} for p in record.get("fallback", [])]}


def repo_timeline(index: Index, repo: dict, limit: int = MAX_SHOWN) -> dict:
    """The Timeline of one repository's working tree: its newest `limit` snapshots, each with its older
    neighbour (what its diff is against) and, when it found work discarded, what was lost and the snapshot
    that gives it back."""
    status = net_status(index)
    tree = tree_of(repo)
    out = {**status, "bare": tree is None, "entries": [], "total": 0, "discarded_total": 0, "omitted": 0,
           "live": tree is not None and tree.path in status["watched"],
           "over_budget": tree is not None and any(f["path"] == tree.path for f in status["fallback"])}
    if tree is None or not status["enabled"]:
        return out
    found = snapshots(tree, index.path)
    lost = {e["snapshot"]: e for e in discarded_events(tree, index.path)}
    entries = []
    for i, snap in enumerate(found[:limit]):
        older = found[i + 1]["id"] if i + 1 < len(found) else None
        entries.append({**snap, "previous": older, "lost": lost.get(snap["id"])})
    return {**out, "entries": entries, "total": len(found), "discarded_total": len(lost),
            "omitted": max(0, len(found) - limit)}


def shown(text: str) -> str:
    """A diff as text with every control, bidi and zero-width character written as an escape, line by line
    (the display rule, fleet.safetext), so the text route shows what the page shows."""
    return "".join(visible(line, keep="\t") + "\n" for line in text.split("\n")[:-1])


def snapshot_diff(tree: WorkTree, db_path: str, snapshot_id: str, against: str | None = None,
                  path: str | None = None) -> dict:
    """Snapshot `snapshot_id` against its older neighbour (`previous`: what changed when it was taken) or
    against the working tree now (`now`: what restoring it would change back), as raw diff text; by default
    the neighbour, or now for the oldest snapshot."""
    shadow = store_of(tree, db_path)
    snap = shadow.find(snapshot_id)
    entries = shadow.entries()
    at = next(i for i, m in enumerate(entries) if m["id"] == snap["id"])
    previous = entries[at - 1]["id"] if at else None
    against = against or ("previous" if previous else "now")
    if against == "previous":
        if previous is None:
            raise FleetError("NOT_FOUND", f"snapshot {snap['id'][:12]} is the oldest: there is nothing before it")
        old, new = shadow.find(previous), snap
    elif against == "now":      # a snapshot of the present (nothing in the repository changes)
        old, new = snap, take(tree, db_path, "manual")
    else:
        raise FleetError("BAD_ARGUMENT", "against is previous or now")
    text = diff(tree, db_path, old["id"], new["id"], path)
    files = sorted(c[3] for c in raw_diff(shadow, old["tree"], new["tree"], [path] if path else []))
    data = text.encode("utf-8")
    cut = len(data) > MAX_PAGE_DIFF
    if cut:
        text = data[:MAX_PAGE_DIFF].rsplit(b"\n", 1)[0].decode("utf-8", "replace") + "\n"
    return {"snapshot": snap["id"], "at": snap["at"], "trigger": snap["trigger"], "previous": previous,
            "against": against, "path": path, "diff": text, "truncated": cut, "files": files}


def restore_plan(tree: WorkTree, db_path: str, snapshot_id: str, path: str | None) -> dict:
    """What restoring the snapshot (all of it, or one path) would do to the working tree now: the newer
    content it overwrites, what it recreates, what it removes (`restore(dry_run=True)`) and the diff from now
    to the snapshot there."""
    plan = restore(tree, db_path, snapshot_id, paths=[path] if path else [], dry_run=True)
    text = diff(tree, db_path, plan["snapshot_before"], plan["snapshot"], path)
    shadow = store_of(tree, db_path)
    existing = blobs_at(shadow, shadow.find(plan["snapshot_before"])["tree"], plan["restored"])
    return {**plan, "overwritten": [p for p in plan["restored"] if p in existing],
            "recreated": [p for p in plan["restored"] if p not in existing], "path": path,
            "diff": text[:MAX_PAGE_DIFF], "truncated": len(text) > MAX_PAGE_DIFF}
