"""Bounded, tolerant reads of agent session files, with a cache keyed by (path, mtime, size).

Session files can be megabytes (tool results inline), so only a bounded tail (or head) is read, and the
parsed summary is cached until the file changes: a periodic refresh then costs one `stat` per file.
Malformed lines and unknown record types are skipped, never fatal.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

TAIL_BYTES = 256 * 1024
HEAD_BYTES = 512 * 1024
FUTURE_SLACK = 60.0
NEEDLE_SPAN = 2048

T = TypeVar("T")


def mtime(path: Path | str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except (OSError, ValueError):
        return None


def recent_files(directory: Path, pattern: str, cutoff: float) -> list[tuple[Path, os.stat_result]]:
    """Regular files under `directory` matching the `/`-separated glob `pattern` (no `**`) modified at or
    after `cutoff`, newest first. Walks with `scandir` (pathlib's glob costs more than the reads it gates)."""
    found: list[tuple[str, os.stat_result]] = []
    _match(str(directory), pattern.split("/"), cutoff, found)
    found.sort(key=lambda item: item[1].st_mtime, reverse=True)
    return [(Path(path), st) for path, st in found]


def _match(directory: str, parts: list[str], cutoff: float, out: list) -> None:
    try:
        entries = os.scandir(directory)
    except OSError:
        return
    head, rest = parts[0], parts[1:]
    literal = not any(c in head for c in "*?[")
    with entries:
        for entry in entries:
            if not (entry.name == head if literal else fnmatch.fnmatchcase(entry.name, head)):
                continue
            try:
                if rest:
                    if entry.is_dir():
                        _match(entry.path, rest, cutoff, out)
                elif entry.is_file():
                    st = entry.stat()
                    if st.st_mtime >= cutoff:
                        out.append((entry.path, st))
            except OSError:
                continue


def read_tail(path: Path, limit: int = TAIL_BYTES) -> bytes:
    """The last `limit` bytes of a file, starting at a line boundary (a cut first line is dropped)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size <= limit:
                return fh.read()
            fh.seek(size - limit)
            data = fh.read(limit)
    except OSError:
        return b""
    cut = data.find(b"\n")
    return data[cut + 1:] if cut >= 0 else b""


def read_head(path: Path, limit: int = HEAD_BYTES) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return b""


def json_lines_reversed(data: bytes, needles: tuple[bytes, ...] = ()) -> Iterator[dict[str, Any]]:
    """JSON objects from newline-delimited `data`, newest (last) first; bad lines are skipped.

    With `needles`, lines whose first NEEDLE_SPAN bytes contain none of them are skipped unparsed (the
    record kind and Claude's `cwd` sit at the start of a line; tool output that cannot matter is never
    decoded)."""
    wanted = re.compile(b"|".join(re.escape(n) for n in needles)).search if needles else None
    for line in reversed(data.split(b"\n")):
        line = line.strip()
        if not line or line[:1] != b"{":
            continue
        if wanted is not None and wanted(line, 0, NEEDLE_SPAN) is None:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def first_json_line(path: Path, limit: int = HEAD_BYTES) -> dict[str, Any] | None:
    head = read_head(path, limit)
    line = head.split(b"\n", 1)[0]
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def read_json(path: Path, limit: int = 2 * 1024 * 1024) -> Any:
    """A whole small JSON document, or None when missing, too large or malformed."""
    try:
        if os.stat(path).st_size > limit:
            return None
        with open(path, "rb") as fh:
            return json.loads(fh.read(limit))
    except (OSError, ValueError):
        return None


def parse_time(value: Any, now: float | None = None) -> float | None:
    """Unix seconds from ms / s numbers, ISO 8601 or `YYYY-MM-DD HH:MM:SS` (UTC); implausible values → None."""
    ts: float | None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        ts = float(value) / 1000.0 if value > 1e11 else float(value)
    elif isinstance(value, str) and value:
        text = value.strip()
        if text.replace(".", "", 1).isdigit():
            return parse_time(float(text), now)
        try:
            parsed = datetime.fromisoformat(text.replace(" ", "T", 1) if "T" not in text else text)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        ts = parsed.timestamp()
    else:
        return None
    if ts <= 0 or (now is not None and ts > now + FUTURE_SLACK):
        return None
    return ts


class ParseCache:
    """LRU of parse results keyed by (path, mtime_ns, size, parser): unchanged files are never re-read."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._data: OrderedDict[tuple, Any] = OrderedDict()

    def get(self, path: Path, st: os.stat_result, parser: Callable[[Path], T]) -> T:
        key = (str(path), st.st_mtime_ns, st.st_size, parser.__module__, parser.__qualname__)
        try:
            value = self._data[key]
            self._data.move_to_end(key)
            return value
        except KeyError:
            pass
        value = parser(path)
        self._data[key] = value
        if len(self._data) > self._size:
            self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        self._data.clear()


CACHE = ParseCache()
