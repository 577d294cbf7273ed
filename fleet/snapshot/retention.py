"""Thinning the shadow stores: tiers by age, then the disk budgets, then git's gc — in the shadow stores only.

Tiers, by age: every snapshot younger than `keep_all_hours`; the newest of each hour until `hourly_days` old;
the newest of each day until `daily_days` old; nothing older. The snapshot just before discarded work (the one that
gives it back) is kept as long as the daily tier lasts, whatever its tier says. The newest snapshot is always
kept. When a store is over `repo_budget_bytes`, or all of them over `fleet_budget_bytes`, its oldest
snapshots go first, the ones that give discarded work back last (the biggest store's first, fleet-wide), until
the budget holds or only the newest is left. A store is thinned hourly, and as soon as the bytes its snapshots
added since put it over its budget.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from fleet.git.run import GitError
from fleet.snapshot.config import snapshot_settings
from fleet.snapshot.shadow import Shadow, shadows, snapshots_root

HOUR = 3600
DAY = 24 * HOUR
STAMP = "pruned-at"
PRUNE_EVERY = HOUR
log = logging.getLogger("fleetdeck.snapshots")


def keep_by_tiers(entries: list[dict], settings: dict, now: float) -> list[dict]:
    """The snapshots the tiers keep, oldest first."""
    if not entries:
        return []
    all_until = now - settings["keep_all_hours"] * HOUR
    hourly_until = min(all_until, now - settings["hourly_days"] * DAY)
    daily_until = min(hourly_until, now - settings["daily_days"] * DAY)
    rescues = _rescues(entries)
    kept, buckets = [], set()
    for meta in reversed(entries):          # newest first: the first seen in a bucket is its newest
        t = meta["t"]
        if meta is entries[-1] or t >= all_until:
            kept.append(meta)
        elif t < daily_until:
            continue
        elif meta["id"] in rescues:
            kept.append(meta)
        else:
            bucket = ("h", int(t // HOUR)) if t >= hourly_until else ("d", int(t // DAY))
            if bucket not in buckets:
                buckets.add(bucket)
                kept.append(meta)
    return kept[::-1]


def _rescues(entries: list[dict]) -> set[str]:
    """The snapshots just before discarded work: the ones that give it back."""
    return {entries[i - 1]["id"] for i, m in enumerate(entries) if i and m.get("discarded")}


def store_bytes(shadow: Shadow) -> int:
    total = 0
    for top, _, files in os.walk(shadow.dir):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total


def _drop(shadow: Shadow, entries: list[dict], kept: list[dict]) -> int:
    """Remove the refs of every snapshot not kept, rewrite the log, gc the store; how many went."""
    keep_ids = {m["id"] for m in kept}
    gone = [m for m in entries if m["id"] not in keep_ids]
    if not gone:
        return 0
    for meta in gone:
        try:
            shadow.ref_path(meta["id"]).unlink()
        except FileNotFoundError:
            pass
    shadow.rewrite_log(kept)
    try:
        shadow.git(["-c", "gc.packRefs=false", "gc", "--quiet", "--prune=now"])   # refs stay files
    except GitError as exc:     # the repository (whose objects the store borrows) is gone: refs still went
        log.warning("gc of the snapshot store of %s failed: %s", shadow.worktree, exc.message)
    return len(gone)


def prune_store(shadow: Shadow, settings: dict | None = None, now: float | None = None,
                budget: int | None = None) -> dict:
    """Thin one store by the tiers and its budget (or `budget`, when the fleet's asks for less)."""
    settings = settings or snapshot_settings()
    now = time.time() if now is None else now
    budget = settings["repo_budget_bytes"] if budget is None else budget
    with shadow.locked():
        entries = shadow.entries()
        rescues = _rescues(entries)
        kept = keep_by_tiers(entries, settings, now)
        dropped = _drop(shadow, entries, kept)
        size = store_bytes(shadow)
        while size > budget and len(kept) > 1:
            # oldest first, the snapshots that give discarded work back last; a quarter at a time: few gc runs
            order = sorted(kept[:-1], key=lambda m: m["id"] in rescues)
            gone = {m["id"] for m in order[:max(1, len(order) // 4)]}
            entries, kept = kept, [m for m in kept if m["id"] not in gone]
            dropped += _drop(shadow, entries, kept)
            size = store_bytes(shadow)
        (shadow.dir / STAMP).write_text(f"{now} {size}", encoding="ascii")
    return {"worktree": shadow.worktree, "dropped": dropped, "kept": len(kept), "bytes": size}


def due(shadow: Shadow, now: float, budget: int | None = None) -> bool:
    """Whether the store was last thinned more than PRUNE_EVERY ago, or (given its `budget`) has grown past
    it since: its size then and the bytes each snapshot since added."""
    try:
        words = (shadow.dir / STAMP).read_text(encoding="ascii").split()
        at, size = float(words[0]), int(words[1]) if len(words) > 1 else 0
    except (OSError, ValueError, IndexError):
        return True
    if now - at >= PRUNE_EVERY:
        return True
    return budget is not None and size + sum(m.get("bytes_added", 0) for m in shadow.entries()
                                             if m["t"] > at) > budget


def prune_all(db_path: str | os.PathLike[str], now: float | None = None, force: bool = False) -> dict:
    """Thin every store that is due (all with `force`), then hold the fleet's budget, biggest store first."""
    settings = snapshot_settings()
    now = time.time() if now is None else now
    root: Path = snapshots_root(db_path)
    stores = shadows(root)
    done = [prune_store(s, settings, now) for s in stores if force or due(s, now)]
    sizes = {s.dir: store_bytes(s) for s in stores}
    while sum(sizes.values()) > settings["fleet_budget_bytes"]:
        biggest = max(stores, key=lambda s: sizes[s.dir])
        before = sizes[biggest.dir]
        result = prune_store(biggest, settings, now, budget=max(0, before - (sum(sizes.values())
                                                                              - settings["fleet_budget_bytes"])))
        sizes[biggest.dir] = result["bytes"]
        done.append(result)
        if result["bytes"] >= before:           # nothing more can go from the biggest: stop
            break
    return {"stores": len(stores), "pruned": done, "bytes": sum(sizes.values())}
