"""The audit folder's files and how to read them: segments, the checkpoint, last lines, lines newest first.

    current.jsonl                    the active segment (appended to)
    segment-<first seq, 20 digits>.jsonl   rotated segments, oldest pruned first
    checkpoint.json                  seq + hash of the last pruned entry (signed when a key is configured)
    torn-<time>-after-<seq>.part     a torn last line found after a crash, set aside (never deleted)
    .lock                            the append lock (fcntl, exclusive)

Each segment starts with a header line `{"segment": 1, "first_seq": N, "prev_hash": "..."}`: the seq its
first entry must carry and the hash of the entry before it (the previous segment's last entry).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Iterator

from fleet.audit.canon import MAX_ENTRY_BYTES

ACTIVE = "current.jsonl"
CHECKPOINT = "checkpoint.json"
LOCK = ".lock"
SEGMENT = re.compile(r"^segment-(\d{20})\.jsonl$")
TAIL_WINDOW = MAX_ENTRY_BYTES + 4096


def segment_name(first_seq: int) -> str:
    return f"segment-{first_seq:020d}.jsonl"


def segment_files(folder: Path) -> list[tuple[int | None, Path]]:
    """Rotated segments by the first seq in their name, then the active one (seq None) if present."""
    rotated = []
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    for name in names:
        match = SEGMENT.match(name)
        if match:
            rotated.append((int(match.group(1)), folder / name))
    rotated.sort()
    active = folder / ACTIVE
    return [*rotated, *([(None, active)] if ACTIVE in names else [])]


def is_header(value: object) -> bool:
    return isinstance(value, dict) and "segment" in value


def open_regular(path: Path):
    """A binary file object for a regular file, never through a symlink (OSError otherwise)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(f"{path} is not a regular file")
    return os.fdopen(fd, "rb")


def read_checkpoint(folder: Path) -> dict | None:
    try:
        with open_regular(folder / CHECKPOINT) as fh:
            data = fh.read(MAX_ENTRY_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError:
        return {"_malformed": True}
    try:
        value = json.loads(data)
    except ValueError:
        return {"_malformed": True}
    return value if isinstance(value, dict) else {"_malformed": True}


def tail(fd: int, size: int) -> tuple[bytes | None, bytes]:
    """(the last complete line, without its newline, or None; bytes after the last newline: a torn line)."""
    start = max(0, size - TAIL_WINDOW)
    data = os.pread(fd, size - start, start)
    cut = data.rfind(b"\n")
    if cut < 0:
        if start > 0:
            raise ValueError(f"no line end in the last {TAIL_WINDOW} bytes")
        return None, data
    torn = data[cut + 1:]
    begin = data.rfind(b"\n", 0, cut)
    if begin < 0 and start > 0:
        raise ValueError(f"last line is longer than {TAIL_WINDOW} bytes")
    return data[begin + 1:cut], torn


def last_record(path: Path) -> dict | None:
    """The last complete line of a (rotated) segment, parsed: an entry, or its header when it has none."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        line, _ = tail(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    return json.loads(line) if line else None


def lines_newest_first(path: Path, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """Complete lines of a file from the end (a torn last line is skipped), in bounded memory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        pos = os.fstat(fd).st_size
        buf = b""
        ended = False          # buf ends at a line end (the torn part after the last newline dropped)
        while pos > 0:
            step = min(chunk, pos)
            pos -= step
            buf = os.pread(fd, step, pos) + buf
            if not ended:
                cut = buf.rfind(b"\n")
                if cut < 0:
                    if len(buf) > TAIL_WINDOW:
                        return
                    continue
                buf, ended = buf[:cut], True
            parts = buf.split(b"\n")
            buf = parts[0]
            for line in reversed(parts[1:]):
                if line:
                    yield line
            if len(buf) > TAIL_WINDOW:
                return
        if ended and buf:
            yield buf
    finally:
        os.close(fd)
