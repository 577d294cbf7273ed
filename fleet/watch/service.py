"""The watcher as fleetdeck runs it (`watch`, `serve`, `demo`): the one place its periodic hooks are set up.

`fleet_watcher()` builds a `Watcher` with the fleet's periodic work (agent presence every few seconds and
within a second of a live agent session's file changing, fleet/presence/pulse.py, so `/agents`, the inbox and
the radar's agent collisions stay fresh; the proposals' retention sweep hourly): add periodic
work there. `watching()` runs that
watcher beside other work on the current event loop — the dashboard's lifespan — and stops it when the
block ends. It claims the index at once (the lock, and the re-check recorded as due) but can start the
work itself `after` something else, so `serve` answers from the index before the fleet is re-read. With
`once=True` (`serve --no-watch`) the watcher re-checks the fleet and stops, the host keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import AsyncIterator, Awaitable, Callable

from fleet.errors import FleetError
from fleet.index.store import Index, open_index
from fleet.ops.service import sweep as sweep_proposals
from fleet.presence.pulse import TICK_S, Pulse
from fleet.snapshot.net import SWEEP_EVERY_S, TICK_EVERY_S, SafetyNet
from fleet.team import config as team_config
from fleet.team.push import Pusher
from fleet.watch.periodic import Periodic
from fleet.watch.watcher import Watcher

log = logging.getLogger("fleetdeck.watcher")

PROPOSALS_EVERY_S = 3600.0   # decided proposals past their retention leave the index (fleet.ops.service.sweep)


def fleet_watcher(index: Index, roots: list[str] | None = None, **options) -> Watcher:
    """A Watcher over `roots` (saved roots when None) with the fleet's periodic hooks: agent presence, the
    safety net's snapshots (sweeps, and the live edits of trees with an agent present), and the proposals'
    retention sweep."""
    net = SafetyNet(index.path)
    hooks = [Periodic(Pulse(), TICK_S, name="presence"),
             Periodic(net.sweep, SWEEP_EVERY_S, name="snapshots"),
             Periodic(net.tick, TICK_EVERY_S, name="live-edits", close=net.close),
             Periodic(sweep_proposals, PROPOSALS_EVERY_S, name="proposals")]
    return Watcher(index, roots, periodic=hooks, **options)


@contextlib.asynccontextmanager
async def watching(db_path: str | os.PathLike[str], roots: list[str] | None = None, *,
                   after: Callable[[], Awaitable[object]] | None = None, **options) -> AsyncIterator[Watcher | None]:
    """Run the fleet watcher on this event loop for the duration of the block; yields it.

    The watcher claims the index before this yields; its work (discovery, the watch set, the re-check of
    every repo) starts once `after()` returns, when given; `on_rechecked()`, when given, is called once the
    start-up re-check is over. When another process already watches this index (`fleetdeck watch`, a second
    `serve`), that watcher keeps it fresh: this yields None and says so, instead of failing the host (and
    calls `on_rechecked` at once: there is no re-check of ours to wait for). A watcher that crashes later is logged; its final `meta` record tells the dashboard
    it stopped. With `cold` (`fleet.watch.coldstart.begin`: the fleet's state is being read already) the
    work starts at once, whatever `after` says.
    """
    index = open_index(db_path)
    watcher = fleet_watcher(index, roots, **options)
    if options.get("cold") is not None:
        after = None  # a cold start: nothing known to show first, the reading has begun
    try:
        watcher.claim()
    except FleetError as exc:
        if exc.code != "CONFLICT":
            index.close()
            raise
        log.warning("%s: serving without a watcher of our own", exc.message)
        index.close()
        if options.get("on_rechecked") is not None:
            options["on_rechecked"]()
        yield None
        return
    stop = asyncio.Event()
    task = asyncio.ensure_future(watcher.run(stop, after=after))
    task.add_done_callback(_log_failure)
    pusher = team_pusher(index.path)
    try:
        yield watcher
    finally:
        if pusher is not None:
            await asyncio.to_thread(pusher.stop)
        stop.set()
        with contextlib.suppress(Exception):  # already logged by _log_failure
            await task
        index.close()


def team_pusher(db_path: str | os.PathLike[str]) -> Pusher | None:
    """The team push thread, when this machine joined a hub (`fleetdeck team join`): the process that
    watches an index is the one that pushes it. A broken `[team]` section is logged, never fatal."""
    try:
        config = team_config.load()
    except FleetError as exc:
        log.warning("team mode off: %s", exc.message)
        return None
    return Pusher(db_path, config).start() if config is not None else None


def _log_failure(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the watcher stopped: %s", task.exception(), exc_info=task.exception())
