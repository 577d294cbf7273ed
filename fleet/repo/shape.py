"""A Change[] cut to fit a byte budget, measured as the answer is sent: its compact JSON text.

`commit.details` and `diff.refs` promise that their whole result stays within `max_bytes` plus ENVELOPE
(the top-level fields and the counters written after the cut). Changes are taken in path order while
their metadata fits; each change's hunks while they fit (at most `max_hunks`); each hunk's lines while they
fit (at most `max_lines`). Every level that was cut says `truncated` and `omitted_count` (files at the top,
hunks in a change, lines in a hunk), and the top-level `truncated` is true whenever anything was cut.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.git import diffparse

ENVELOPE = 1024
DEFAULT_MAX_HUNKS = 200
DEFAULT_MAX_LINES = 200


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (what the MCP text mirror and the HTTP API send)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def shape_changes(changes: list[dict[str, Any]], max_files: int, max_bytes: int, *,
                  max_hunks: int = DEFAULT_MAX_HUNKS, max_lines: int = DEFAULT_MAX_LINES,
                  reserve: int = 0) -> dict[str, Any]:
    """`{changes, file_count, omitted_count, hunks_omitted_count, lines_omitted_count, truncated}` with the
    changes' JSON within `max_bytes - reserve` (`reserve`: what the caller's other fields take)."""
    numbered = diffparse.number(changes)
    room = max_bytes - reserve
    kept: list[dict[str, Any]] = []
    hunks_omitted = lines_omitted = 0
    for change in numbered[:max_files]:
        hunks = change.get("hunks") or []
        change.update(hunks=[], truncated=False, omitted_count=0)
        cost = json_size(change) + 1
        if cost > room:
            break
        room -= cost
        kept.append(change)
        for n, hunk in enumerate(hunks):
            lines = hunk["lines"]
            hunk.update(lines=[], truncated=False, omitted_count=0)
            cost = json_size(hunk) + 1
            if n >= max_hunks or cost > room:
                change["omitted_count"] = len(hunks) - n
                change["truncated"] = True
                hunks_omitted += len(hunks) - n
                break
            room -= cost
            take, room = _fit_lines(lines, min(max_lines, len(lines)), room)
            hunk["lines"] = lines[:take]
            if take < len(lines):
                hunk.update(truncated=True, omitted_count=len(lines) - take)
                change["truncated"] = True
                lines_omitted += len(lines) - take
            change["hunks"].append(hunk)
    files_omitted = len(numbered) - len(kept)
    return {"changes": kept, "file_count": len(numbered), "omitted_count": files_omitted,
            "hunks_omitted_count": hunks_omitted, "lines_omitted_count": lines_omitted,
            "truncated": files_omitted > 0 or any(c["truncated"] for c in kept)}


def _fit_lines(lines: list[str], most: int, room: int) -> tuple[int, int]:
    """How many of the first `most` lines fit in `room` bytes, and the room left."""
    whole = json_size(lines[:most]) - 2 + (1 if most else 0)   # the items and their commas, as if appended
    if whole <= room:
        return most, room - whole
    take = 0
    for line in lines[:most]:
        cost = json_size(line) + 1
        if cost > room:
            break
        room -= cost
        take += 1
    return take, room
