"""Reading the audit log without verifying it: recent entries (dashboard, MCP `audit.tail`), export, anchors.

These readers trust the files; `verify_log` is what checks them. They skip what they cannot parse (a torn
last line, a header) instead of failing, and stream in bounded memory.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator, TextIO

from fleet.audit import segments as seg
from fleet.audit.canon import MAX_ENTRY_BYTES

CSV_COLUMNS = ("seq", "at", "event", "tool", "op", "agent", "agent_self_declared", "actor", "repo", "args",
               "risk", "proposal_id", "decision", "result", "duration_us", "summary", "key_id", "hash",
               "agent_declared")


def entries(folder: Path) -> Iterator[dict]:
    """Every parseable entry, oldest first."""
    for _, path in seg.segment_files(folder):
        for entry, _line, _where in _lines(path, 0, -1):
            yield entry


Where = tuple[str, int, int]    # an entry's line: (its segment file's name, byte offset, length without the newline)


def entries_after(folder: Path, seq: int, seen: tuple[Where, str] | None = None) -> Iterator[tuple[dict, bytes, Where]]:
    """(entry, its exact line, where that line is) for every parseable entry with a seq above `seq`, oldest first;
    segments that end before it are not read (team mode pushes the log from where the hub's copy ends).

    `seen`: where entry `seq` was read before, and its hash. When that line is still there (same file, same
    bytes' entry), reading resumes right after it instead of parsing the segment from its start: a pusher that
    reads the log's new entries every few seconds costs what is new, not the whole 8 MB segment. Otherwise (the
    segment rotated or was pruned, another log) the segments are read as without it."""
    files = seg.segment_files(folder)
    resumed = _resume(files, seq, seen) if seen is not None else None
    if resumed is not None:
        yield from resumed
        return
    start = 0
    for i, (first, _) in enumerate(files):
        if first is not None and first <= seq + 1:
            start = i
    for _, path in files[start:]:
        yield from _lines(path, 0, seq)


def _lines(path: Path, offset: int, seq: int) -> Iterator[tuple[dict, bytes, Where]]:
    try:
        fh = seg.open_regular(path)
    except OSError:               # pruned while we were reading, or not a regular file
        return
    with fh:
        fh.seek(offset)
        while line := fh.readline(MAX_ENTRY_BYTES + 2):
            entry = _parse(line)
            if entry is not None and entry.get("seq", 0) > seq:
                yield entry, line.rstrip(b"\n"), (path.name, offset, len(line.rstrip(b"\n")))
            offset += len(line)


def still_at(folder: Path, seq: int, seen: tuple[Where, str]) -> bool:
    """Whether entry `seq` with the hash `seen` names is still where `seen` says it was read."""
    return _located(seg.segment_files(folder), seq, seen) is not None


def _located(files: list[tuple[int | None, Path]], seq: int, seen: tuple[Where, str]) -> tuple[int, int] | None:
    """(which of `files`, the offset right after the line) when entry `seq` is where `seen` says, else None."""
    (name, offset, length), digest = seen
    at = next((i for i, (_, path) in enumerate(files) if path.name == name), None)
    if at is None:
        return None
    try:
        with seg.open_regular(files[at][1]) as fh:
            fh.seek(offset)
            line = fh.read(length + 1)
    except OSError:
        return None
    entry = _parse(line) if len(line) == length + 1 else None
    if entry is None or entry["seq"] != seq or entry.get("hash") != digest:
        return None
    return at, offset + length + 1


def _resume(files: list[tuple[int | None, Path]], seq: int, seen: tuple[Where, str]) -> Iterator | None:
    """The entries after `seq` read from right after its line, or None when that line is not where `seen` says."""
    found = _located(files, seq, seen)
    if found is None:
        return None
    at, offset = found

    def rest() -> Iterator[tuple[dict, bytes, Where]]:
        yield from _lines(files[at][1], offset, seq)
        for _, path in files[at + 1:]:
            yield from _lines(path, 0, seq)
    return rest()


def newest(folder: Path, limit: int, **match: Any) -> tuple[list[dict], int]:
    """Up to `limit` entries, newest first, whose fields equal `match` (None = any; agent matches the
    declared name); and how many older entries matched too (counted, never silently cut)."""
    wanted = {k: v for k, v in match.items() if v is not None}
    files = seg.segment_files(folder)
    found: list[dict] = []
    omitted = 0
    for _, path in reversed(files):
        for line in seg.lines_newest_first(path):
            if len(found) == limit and not wanted:
                return found, max(0, found[-1]["seq"] - _first_seq(files))
            entry = _parse(line + b"\n")
            if entry is None or not _matches(entry, wanted):
                continue
            if len(found) == limit:
                omitted += 1
            else:
                found.append(entry)
    return found, omitted


def _first_seq(files: list[tuple[int | None, Path]]) -> int:
    """The first retained seq: the oldest segment's header says it."""
    for _, path in files:
        try:
            with seg.open_regular(path) as fh:
                header = json.loads(fh.readline(4096) or b"null")
        except (OSError, ValueError):
            continue
        if seg.is_header(header):
            return int(header["first_seq"])
    return 1


def _matches(entry: dict, wanted: dict) -> bool:
    for key, value in wanted.items():
        have = entry.get(key)
        if key == "agent":
            have = (have or {}).get("name")
        if have != value:
            return False
    return True


def _parse(line: bytes) -> dict | None:
    if not line.endswith(b"\n"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict) or seg.is_header(value) or not isinstance(value.get("seq"), int):
        return None
    return value


def export(folder: Path, out: TextIO, fmt: str, since: str | None = None, until: str | None = None) -> int:
    """Write entries with `since <= at < until` (ISO 8601 UTC strings compare in time order) as JSONL or CSV."""
    count = 0
    writer = csv.writer(out) if fmt == "csv" else None
    if writer:
        writer.writerow(CSV_COLUMNS)
    for entry in entries(folder):
        at = entry.get("at") or ""
        if (since and at < since) or (until and at >= until):
            continue
        if writer:
            agent = entry.get("agent") or {}
            row = {**entry, "agent": agent.get("name"), "agent_self_declared": agent.get("self_declared"),
                   "agent_declared": agent.get("declared_name")}
            writer.writerow([_cell(row.get(c)) for c in CSV_COLUMNS])
        else:
            out.write(json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n")
        count += 1
    return count


def _cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a leading = + - @ would make it a formula."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def anchor_of(entry: dict) -> dict:
    """What to keep elsewhere: the head's seq and hash (and its signature, when the log is signed)."""
    keep = {"anchor": 1, "seq": entry["seq"], "hash": entry["hash"], "at": entry.get("at")}
    if entry.get("sig"):
        keep.update(key_id=entry.get("key_id"), sig=entry["sig"])
    return keep

