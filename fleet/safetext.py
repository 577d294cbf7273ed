"""Text from repositories, shown as text: control, bidi and zero-width characters made visible, Markdown
kept inert. The one display rule for the terminal, the dashboard and the digest.

A repository's names, branch names, paths, commit messages and diff lines are a stranger's bytes (and an
agent's patch is a stranger's text). Printed raw, an ESC or OSC sequence drives the terminal (OSC 52 writes
the clipboard); a CR inside an added line makes a browser's or a reader's line split show the rest as an
unchanged context line (Python runs it as a line of its own); a bidi override shows `invoice\\u202efdp.sh`
as `invoicehs.pdf`; a zero-width or tag character hides text. Every CLI printer, the Markdown digest and
every value a dashboard template prints (the Jinja environment's `finalize`, fleet/views/render.py) pass
such text through `visible()` (and `md_text()` / `md_code()` for Markdown); JSON output goes through
`json_safe()`; a diff is cut into lines at `\\n` only (`diff_lines()`), never at a CR.
"""

from __future__ import annotations

import functools
import re

from fleet.git.patchtext import hunk_header

# Made visible: C0 controls, DEL, C1 controls (0x9b is a one-byte CSI on some terminals), every format
# character (Unicode category Cf: bidi controls, zero-width space/joiners, word joiner, BOM, soft hyphen,
# the invisible tag characters), the line and paragraph separators (Zl, Zp), and characters that draw as
# nothing (the combining grapheme joiner, the Hangul fillers). tests/test_safe_text.py checks the Cf/Zl/Zp
# ranges against the running Python's Unicode database.
_FORMAT = ((0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
           (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202E),
           (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
           (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
           (0xE0020, 0xE007F))
_BLANK = (0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0)
_UNSAFE = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *(c for a, b in _FORMAT for c in range(a, b + 1)),
           *_BLANK]
_VISIBLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}")
            for c in _UNSAFE}
# In JSON every C0 control is already escaped; the rest are legal raw inside strings, so escape them.
_JSON = {c: (f"\\u{c:04x}" if c < 0x10000 else  # beyond the BMP: JSON's surrogate pair
             f"\\u{0xD800 + ((c - 0x10000) >> 10):04x}\\u{0xDC00 + ((c - 0x10000) & 0x3FF):04x}")
         for c in _UNSAFE if c >= 0x7F}


def visible(text: object, keep: str = "") -> str:
    """`text` (None → "") with every unsafe character written as an escape (`\\x1b`, `\\u202e`, `\\x0d`);
    `keep` names characters left as they are (`"\\n"` for multi-line text, `"\\t"` for code)."""
    if text is None:
        return ""
    return str(text).translate(_table(keep))


@functools.cache
def _table(keep: str) -> dict[int, str]:
    return {c: shown for c, shown in _VISIBLE.items() if chr(c) not in keep} if keep else _VISIBLE


_MARKS = {"+": "d-add", "-": "d-del", " ": "d-ctx", "": "d-ctx", "\\": "d-meta"}


def diff_lines(diff: str | None) -> list[tuple[str, str]]:
    """A unified diff as (kind, shown line) pairs, read as git reads it: cut at `\\n` only (a CR stays inside
    its line, shown as `\\x0d`); inside a hunk (as many lines as its header counts) a line's kind is its first
    character alone (an added `++x` is an addition, not a header), outside one it is a header; every unsafe
    character visible (tabs kept)."""
    lines = (diff or "").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out, old, new = [], 0, 0
    for line in lines:
        if old > 0 or new > 0 or (line.startswith("\\") and out and out[-1][0] != "d-meta"):
            kind = _MARKS.get(line[:1], "d-ctx")
            old -= kind in ("d-ctx", "d-del")
            new -= kind in ("d-ctx", "d-add")
        elif (counts := hunk_header(line)) is not None:
            kind, old, new = "d-hunk", counts[1], counts[3]
        else:
            kind = "d-meta"
        out.append((kind, visible(line, keep="\t")))
    return out


def json_safe(encoded: str) -> str:
    """JSON text with DEL, C1 and bidi controls escaped as `\\u` sequences (same value, inert on a terminal)."""
    return encoded.translate(_JSON)


def md_text(text: object) -> str:
    """Repository text as inert Markdown: controls visible, every Markdown special character escaped, except
    where it cannot start markup, so a plain-text mail reads `HEAD~1` and `a < b`, not `HEAD\\~1`: a `<` that
    opens no tag or autolink (not before a letter, `/`, `!` or `?`), an `&` that opens no entity, a `>` (it
    only means something at a line's start, where no value goes), a lone `~` (strikethrough needs a pair)."""
    body = visible(text)
    lone_tilde = body.count("~") < 2
    return _MD_OPENS.sub(lambda m: m.group(0) if _inert(m, lone_tilde) else "\\" + m.group(0), body)


_MD_OPENS = re.compile(r"[\\`*_\[\]<>|~&]")
_TAG_START = re.compile(r"[A-Za-z/!?]")
_ENTITY_START = re.compile(r"[A-Za-z0-9#]")


def _inert(match: re.Match, lone_tilde: bool) -> bool:
    ch, after = match.group(0), match.string[match.end():match.end() + 1]
    if ch == "<":
        return not _TAG_START.match(after)
    if ch == "&":
        return not _ENTITY_START.match(after)
    return ch == ">" or (ch == "~" and lone_tilde)


def md_code(text: object) -> str:
    """Repository text as a Markdown code span that no backtick inside it can close early."""
    body = visible(text)
    longest = run = 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"
