"""Pull single string fields out of large JSON documents without parsing (or keeping) the rest.

Continue and Amp keep whole conversations in one JSON file; the field we need (a workspace folder) sits
near the start or in a small `env` block, so a bounded head/tail read plus a string match is enough.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fleet.presence.files import read_head

CHUNK = 64 * 1024


def string_values(data: str, key: str) -> list[str]:
    """Every JSON string value stored under `key` in `data` (decoded), in order of appearance."""
    pattern = re.compile(r'"' + re.escape(key) + r'"\s*:\s*"((?:[^"\\]|\\.)*)"')
    out = []
    for match in pattern.finditer(data):
        try:
            out.append(json.loads('"' + match.group(1) + '"'))
        except ValueError:
            continue
    return out


def head_and_tail(path: Path, chunk: int = CHUNK) -> str:
    """The first and last `chunk` bytes of a file as text (the whole file when small)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(chunk)
            fh.seek(0, 2)
            size = fh.tell()
            if size <= chunk:
                return head.decode("utf-8", "replace")
            fh.seek(max(chunk, size - chunk))
            tail = fh.read(chunk)
    except OSError:
        return ""
    return head.decode("utf-8", "replace") + "\n" + tail.decode("utf-8", "replace")


def first_value(path: Path, key: str) -> str | None:
    values = string_values(read_head(path, CHUNK).decode("utf-8", "replace"), key)
    return values[0] if values else None
