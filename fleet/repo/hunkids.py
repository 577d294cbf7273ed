"""Stable ids for hunks: what `operation.preview.stage_hunks` takes to stage part of a file.

A hunk's id depends only on the change blocks it holds (each maximal run of removed/added lines, with its
position and text), never on the context around them. The same changes listed with `unified` 0 or 10, or
cut by a cap, keep their ids; a hunk that merges two blocks (more context) has the id of that pair, and
stage_hunks resolves either form. Ids change when the file (or, for unstaged hunks, the index) changes.
"""

from __future__ import annotations

import hashlib
from typing import Any


def blocks(hunk: dict[str, Any]) -> list[tuple]:
    """The hunk's change blocks: (old line, removed lines, new line, added lines), positions 1-based."""
    old = hunk["old_start"] + (1 if hunk["old_lines"] == 0 else 0)
    new = hunk["new_start"] + (1 if hunk["new_lines"] == 0 else 0)
    out: list[tuple] = []
    run: list | None = None
    for line in hunk["lines"]:
        mark = line[:1]
        if mark == "-" or mark == "+":
            if run is None:
                run = [old, [], new, []]
            if mark == "-":
                run[1].append(line)
                old += 1
            else:
                run[3].append(line)
                new += 1
        elif mark == "\\":
            if run is not None:
                (run[3] or run[1]).append(line)
        else:
            if run is not None:
                out.append((run[0], tuple(run[1]), run[2], tuple(run[3])))
                run = None
            old += 1
            new += 1
    if run is not None:
        out.append((run[0], tuple(run[1]), run[2], tuple(run[3])))
    return out


def block_id(path: str, side: str, block: tuple) -> str:
    raw = "\0".join([path, side, str(block[0]), *block[1], str(block[2]), *block[3]])
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def run_id(block_ids: list[str]) -> str:
    return "h-" + hashlib.sha256("\0".join(block_ids).encode()).hexdigest()[:16]


def hunk_id(path: str, side: str, hunk: dict[str, Any]) -> str:
    return run_id([block_id(path, side, b) for b in blocks(hunk)])


def assign(changes: list[dict[str, Any]]) -> None:
    """Give every staged/unstaged hunk of `changes` its `id` (before any cap cuts its lines)."""
    for change in changes:
        for hunk in change["hunks"]:
            hunk["id"] = hunk_id(change["path"], hunk.get("side", "unstaged"), hunk)
