"""Discarded work as an attention reason: the repo rises to the top rungs for a day, with the command that
gives the work back (fleet.views.radar's extra sources)."""

from __future__ import annotations

import time

from fleet.index.store import Index
from fleet.snapshot.events import KIND, discarded_in_fleet
from fleet.attention import reason

RAISED_FOR_S = 24 * 3600


def discarded_reasons(index: Index) -> dict[str, list[dict]]:
    """{repo path: [discarded reason]} for work discarded in the last day (fleet.views.radar's extra sources)."""
    out: dict[str, list[dict]] = {}
    for event in discarded_in_fleet(index, since=time.time() - RAISED_FOR_S):
        if event["path"] not in out:
            out[event["path"]] = [reason(KIND, event["summary"], f"restore it: `{event['restore']}`",
                                         snapshot=event["restore_from"])]
    return out
