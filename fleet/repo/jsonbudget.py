"""A Change[] cut to fit a byte budget, measured as the answer is sent: its compact JSON text.

`commit.details` and `diff.refs` promise that their whole result stays within `max_bytes` plus ENVELOPE
(the top-level fields and the counters written after the cut). Changes are taken in path order while
their metadata fits; each change's hunks while they fit (at most `max_hunks`); each hunk's lines while they
fit (at most `max_lines`). Every level that was cut says `truncated` and `omitted_count` (files at the top,
hunks in a change, lines in a hunk), and the top-level `truncated` is true whenever anything was cut.

A change after the cut is never made (diffparse.Indexed), only counted. A change that fits whole is measured
by its JSON, written from git's bytes (`_hunk_json`: a hunk body with nothing to escape is its lines joined),
byte for byte what encoding the change would give; that text is kept with the answer (`Measured`) so the MCP
envelope sends it rather than encoding the change a second time.
"""

from __future__ import annotations

from json.encoder import c_make_encoder, encode_basestring
from typing import Any, Callable, Iterable

from fleet.git import diffparse

ENVELOPE = 1024
DEFAULT_MAX_HUNKS = 200
DEFAULT_MAX_LINES = 200


# json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)'s C encoder, made once: `encode()`
# makes a fresh one per call, which costs more than encoding a change's metadata.
_C_ENCODER = c_make_encoder(None, str, encode_basestring, None, ":", ",", False, False, True)


def encode(value: Any) -> str:
    """`value` as compact JSON, as json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    writes it (no check for a cycle: an answer is a tree)."""
    return "".join(_C_ENCODER(value, 0))


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (what the MCP text mirror and the HTTP API send)."""
    return _measure(value)[1]


def encode_answer(value: Any) -> str:
    """An answer as compact JSON. A list in the top-level dict that writes its own JSON (`_own_text`) is
    spliced in rather than encoded by the generic encoder."""
    if type(value) is dict and any(map(_own_text, value.values())) and all(type(k) is str for k in value):
        fields = ",".join(f"{encode(k)}:{v.encode() if _own_text(v) else encode(v)}" for k, v in value.items())
        return f"{{{fields}}}"   # not "{" + fields + "}" (see Measured.encode)
    return encode(value)


def _own_text(value: Any) -> bool:
    """Whether `value` has its JSON written already or writes it faster than encode() (a diff's changes,
    encoded while their budget was measured; a list with a writer for its items' one shape)."""
    return type(value) is Measured or (isinstance(value, Written) and value.write is not None)


def _measure(value: Any) -> tuple[str, int]:
    """`value`'s compact JSON and its size in bytes (an ASCII text's length is its size: only other text is
    encoded to UTF-8 to be measured)."""
    encoded = encode(value)
    return encoded, len(encoded) if encoded.isascii() else len(encoded.encode())


class Written(list):
    """A list of an answer that writes its own compact JSON (`encode()`). `write`, when set, is one item's
    JSON, byte for byte what encode() gives, written by hand for the items' one known shape: faster than the
    generic encoder, which writes each key and value of each dict as a piece of its own."""

    write: Callable[[Any], str] | None = None

    def encode(self) -> str:
        """The list's JSON by its writer (encode_answer asks only a list that has one, or a Measured)."""
        items = ",".join(map(self.write, self))
        return f"[{items}]"   # not "[" + items + "]" (see Measured.encode)


class Timeless(Written):
    """A list whose items hold no time (no TIME_KEYS field at any depth): the MCP answer's time conversion
    (fleet.views.records.iso_times) passes it as it is instead of walking every item."""

    def __init__(self, items: Iterable[Any] = (), write: Callable[[Any], str] | None = None) -> None:
        super().__init__(items)
        self.write = write


class Rows(Written):
    """Dicts made for this one answer (nothing else holds them), whose only times are at `time_keys` (none
    deeper): the MCP answer's time conversion (fleet.views.records.iso_times) writes those in place instead
    of walking every item and copying the ones it changes. `write` sees a row once its times are written."""

    def __init__(self, items: Iterable[dict[str, Any]], time_keys: tuple[str, ...],
                 write: Callable[[dict[str, Any]], str] | None = None) -> None:
        super().__init__(items)
        self.time_keys = time_keys
        self.write = write


class Measured(Timeless):
    """The kept changes, each with the compact JSON it was measured by (None for a change measured piece
    by piece). `encode()` is the list's compact JSON, reusing those texts; nothing may change the list or
    its items once it is made (the answer is only encoded and sent from here on)."""

    def __init__(self, items: list[dict[str, Any]], texts: list[str | None]) -> None:
        super().__init__(items)
        self.texts = texts

    def encode(self) -> str:
        if len(self.texts) != len(self):
            return encode(list(self))
        items = ",".join(encode(v) if t is None else t for v, t in zip(self, self.texts))
        # Not "[" + items + "]": the second `+` resizes the first one's result in place, and for a large text
        # that realloc costs a fresh copy and its page faults (40x the join itself).
        return f"[{items}]"


def shape_changes(changes: diffparse.Indexed, max_files: int, max_bytes: int, *,
                  max_hunks: int = DEFAULT_MAX_HUNKS, max_lines: int = DEFAULT_MAX_LINES,
                  reserve: int = 0) -> dict[str, Any]:
    """`{changes, file_count, omitted_count, hunks_omitted_count, lines_omitted_count, truncated}` with the
    changes' JSON within `max_bytes - reserve` (`reserve`: what the caller's other fields take).

    The changes are taken in path order (`diffparse.number`'s ids) and each is made only when it is reached
    (`diffparse.Indexed.change`): a change after the cut is neither made, counted nor parsed, only counted in
    `omitted_count`. A kept hunk is decoded only when it is reached, and only as many of its lines as could
    fit, so the work stops with the budget (the counts are exact all the same: they come from the undecoded
    bytes)."""
    room = max_bytes - reserve
    kept: list[dict[str, Any]] = []
    texts: list[str | None] = []
    hunks_omitted = lines_omitted = 0
    for position, i in enumerate(changes.path_order()[:max_files], 1):
        change = changes.change(i)
        change["id"] = diffparse.change_id(position)
        parts = diffparse.open_change(change)
        whole = _whole(change, parts, room, max_hunks, max_lines)
        if whole is not None:   # the usual case: the change fits with every hunk and line (one measure)
            text, cost = whole
            room -= cost
            kept.append(change)
            texts.append(text)
            continue
        change.update(hunks=[], truncated=False, omitted_count=0)
        cost = json_size(change) + 1
        if cost > room:
            break
        room -= cost
        kept.append(change)
        texts.append(None)  # filled hunk by hunk below: encoded with the answer
        for n, (numbers, header, body, total) in enumerate(parts):
            hunk = _hunk(numbers, header, [])
            cost = json_size(hunk) + 1
            if n >= max_hunks or cost > room:
                change["omitted_count"] = len(parts) - n
                change["truncated"] = True
                hunks_omitted += len(parts) - n
                break
            room -= cost
            # A line costs at least its own bytes + 3 in JSON (quotes, comma): read no more than fits.
            lines = diffparse.body_lines(body, max_lines, room)
            take, room = _fit_lines(lines, len(lines), room)
            hunk["lines"] = lines[:take]
            if take < total:
                hunk.update(truncated=True, omitted_count=total - take)
                change["truncated"] = True
                lines_omitted += total - take
            change["hunks"].append(hunk)
    files_omitted = len(changes) - len(kept)
    return {"changes": Measured(kept, texts), "file_count": len(changes), "omitted_count": files_omitted,
            "hunks_omitted_count": hunks_omitted, "lines_omitted_count": lines_omitted,
            "truncated": files_omitted > 0 or any(c["truncated"] for c in kept)}


def _hunk(numbers: tuple[int, int, int, int], header: bytes, lines: list[str]) -> dict[str, Any]:
    return {"old_start": numbers[0], "old_lines": numbers[1], "new_start": numbers[2], "new_lines": numbers[3],
            "header": diffparse.decode(header), "lines": lines, "truncated": False, "omitted_count": 0}


def _whole(change: dict[str, Any], parts: list, room: int, max_hunks: int,
           max_lines: int) -> tuple[str, int] | None:
    """Fill `change` with all its hunks and return its JSON and what it costs when it is within every cap and
    fits in `room`; else None (and `change` as it was). Tried only when its hunk bytes could fit: a line's JSON is
    never shorter than the line and its newline, so a change whose bodies outweigh `room` is not decoded.
    The change's JSON is written from its parts (`_hunk_json`), byte for byte what encoding it would give."""
    if len(parts) > max_hunks:
        return None
    size = 0
    for _, _, body, count in parts:
        if count > max_lines:
            return None
        size += len(body)
    if size > room:
        return None
    hunks, texts = [], []
    for numbers, header, body, _ in parts:
        hunk, hunk_text = _hunk_json(numbers, header, body)
        hunks.append(hunk)
        texts.append(hunk_text)
    text = _change_json(change, ",".join(texts))
    size = len(text) if text.isascii() else len(text.encode())
    if size + 1 <= room:
        change.update(hunks=hunks, truncated=False, omitted_count=0)
        return text, size + 1
    return None


# A whole change's compact JSON: the keys of a diffparse change, in its order, then those shape_changes adds.
_CHANGE_JSON = ('{"path":%s,"old_path":%s,"status":%s,"similarity":%s,"old_mode":%s,"new_mode":%s,"binary":%s,'
                '"insertions":%s,"deletions":%s,"hunks":[%s],"id":%s,"truncated":false,"omitted_count":0}')


def _change_json(change: dict[str, Any], hunks: str) -> str:
    """`change` with these hunks (their JSON), uncut, as `encode` writes it: one format instead of encoding
    the metadata and splicing the hunks in (a value that may be None is written inline, not by a call)."""
    old_path, similarity, old_mode, new_mode = (change["old_path"], change["similarity"], change["old_mode"],
                                                change["new_mode"])
    insertions, deletions = change["insertions"], change["deletions"]
    return _CHANGE_JSON % (
        encode_basestring(change["path"]), "null" if old_path is None else encode_basestring(old_path),
        encode_basestring(change["status"]), "null" if similarity is None else similarity,
        "null" if old_mode is None else encode_basestring(old_mode),
        "null" if new_mode is None else encode_basestring(new_mode), "true" if change["binary"] else "false",
        "null" if insertions is None else insertions, "null" if deletions is None else deletions,
        hunks, encode_basestring(change["id"]))


# The bytes JSON escapes, but for the newline between lines and the tab (written as `\\t` below).
_ESCAPED = bytes(range(0x20)).replace(b"\n", b"").replace(b"\t", b"") + b'"\\'


def _hunk_json(numbers: tuple[int, int, int, int], header: bytes,
               body: bytes) -> tuple[dict[str, Any], str]:
    """A whole hunk and its compact JSON. The usual body (no quote, backslash or control character but tabs,
    no empty line: git's diff.suppressBlankEmpty prints "" for " ", see body_lines) is decoded and split
    once, and its lines' JSON is those lines joined by `","` (each line is its own JSON text, a tab written
    `\\t`); any other is encoded the ordinary way."""
    decoded = diffparse.decode(body)
    lines = decoded.split("\n")
    if len(body.translate(None, _ESCAPED)) == len(body) and "" not in lines:
        lines_json = '","'.join(lines)
        if "\t" in decoded:
            lines_json = lines_json.replace("\t", "\\t")
        lines_json = f'["{lines_json}"]'
    else:
        lines = diffparse.body_lines(body)
        lines_json = encode(lines)
    hunk = _hunk(numbers, header, lines)
    return (hunk,
            '{"old_start":%d,"old_lines":%d,"new_start":%d,"new_lines":%d,"header":%s,"lines":%s,'
            '"truncated":false,"omitted_count":0}' % (*numbers, encode_basestring(hunk["header"]), lines_json))


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
