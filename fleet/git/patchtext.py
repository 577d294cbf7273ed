"""git's patch text conventions, in one place: C-style path quoting (both ways) and the hunk header."""

from __future__ import annotations

import re

HUNK_HEADER = rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@"  # its four numbers as groups
_HUNK_HEADER = re.compile(rb"^" + HUNK_HEADER)
_ESCAPES = {0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v", 0x0C: b"\\f",
            0x0D: b"\\r", 0x22: b'\\"', 0x5C: b"\\\\"}
_UNESCAPES = {chr(v[1]): k for k, v in _ESCAPES.items()}
_OCTAL = re.compile(r"[0-3][0-7]{2}")
_NEEDS_QUOTE = re.compile(rb'[\x00-\x1f"\\\x7f]')
_NEEDS_QUOTE_HIGH = re.compile(rb'[\x00-\x1f"\\\x7f-\xff]')


def hunk_header(line: bytes | str) -> tuple[int, int, int, int] | None:
    """(old_start, old_lines, new_start, new_lines) of a `@@ -a,b +c,d @@` line (a count left out is 1)."""
    match = _HUNK_HEADER.match(line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line)
    return hunk_numbers(match) if match else None


def hunk_numbers(match: re.Match) -> tuple[int, int, int, int]:
    """The four numbers of a match of HUNK_HEADER (a count left out is 1)."""
    a, b, c, d = match.groups(b"1")
    return int(a), int(b), int(c), int(d)


def quote_path(name: bytes, *, high: bool = False) -> bytes:
    """A path as git prints it in patch headers: C-quoted only when needed; `high` quotes bytes >= 0x80 too
    (core.quotePath=true, git's default, which our runner turns off)."""
    def special(b: int) -> bool:
        return b < 0x20 or b in (0x22, 0x5C, 0x7F) or (high and b >= 0x80)

    if not (_NEEDS_QUOTE_HIGH if high else _NEEDS_QUOTE).search(name):   # the usual case, at C speed
        return name
    out = bytearray(b'"')
    for b in name:
        if b in _ESCAPES:
            out += _ESCAPES[b]
        elif special(b):
            out += b"\\%03o" % b
        else:
            out.append(b)
    return bytes(out + b'"')


def quote_text(name: str) -> str:
    """quote_path for a text path (as fleetdeck writes patches)."""
    return quote_path(name.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")


def quoted_end(text: str) -> int:
    """The index just past the closing quote of the C-quoted name `text` starts with; ValueError if none."""
    pos = 1
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
            continue
        if text[pos] == '"':
            return pos + 1
        pos += 1
    raise ValueError("unterminated quoted file name")


def unquote_path(text: str) -> str:
    """Undo git's C-style quoting of a path (`"a/sp\\"ace"`); unquoted text is returned as is.

    ValueError (with a message for people) on a bad escape, text after the name, or bytes that are not UTF-8.
    """
    if not text.startswith('"'):
        return text
    end = quoted_end(text)
    if text[end:].strip():
        raise ValueError("text after a quoted file name")
    raw = text[1:end - 1]
    out = bytearray()
    pos = 0
    while pos < len(raw):
        ch = raw[pos]
        if ch != "\\":
            out += ch.encode("utf-8")
            pos += 1
            continue
        nxt = raw[pos + 1:pos + 2]
        if nxt in _UNESCAPES:
            out.append(_UNESCAPES[nxt])
            pos += 2
        elif _OCTAL.fullmatch(raw[pos + 1:pos + 4]):
            out.append(int(raw[pos + 1:pos + 4], 8))
            pos += 4
        else:
            raise ValueError(f"bad escape in quoted file name: {raw[pos:pos + 2]!r}")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("quoted file name is not UTF-8") from None
