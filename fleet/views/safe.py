"""Text from repositories, printed as text: control characters made visible, Markdown kept inert.

A repository's names, branch names, paths and commit messages are a stranger's bytes. Printed raw, an ESC
or OSC sequence drives the terminal (OSC 52 writes the clipboard), a bidi override reorders what a person
reads, and in Markdown `[x](url)` becomes a link. Every CLI printer and the Markdown digest pass such text
through `visible()` (and `md_text()` / `md_code()` for Markdown); JSON output goes through `json_safe()`.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI on some terminals), and the bidi controls.
_UNSAFE = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
           *range(0x2066, 0x206A)]
_VISIBLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}
# In JSON every C0 control is already escaped; the rest are legal raw inside strings, so escape them.
_JSON = {c: f"\\u{c:04x}" for c in _UNSAFE if c >= 0x7F}


def visible(text: object) -> str:
    """`text` (None → "") with every control character written as an escape (`\\x1b`, `\\u202e`)."""
    if text is None:
        return ""
    return str(text).translate(_VISIBLE)


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
