"""Parse `git diff -z --raw --patch` (and `--numstat -z`) output into Change dicts.

Names come from the NUL-delimited raw part, never from the `diff --git a/... b/...` header, so quoted,
space-containing or non-UTF-8 paths are exact. Patch sections follow the raw entries in the same order.
Only what is asked for is parsed: `index_diff` cuts the patch into per-file sections and counts their
lines at C speed; hunks are parsed per change (`fill`), or hunk by hunk as a byte budget allows
(fleet/repo/shape.py), so a large diff cut to a small answer costs little more than the part returned.
Everything after a section's first `@@` line is hunk text, so a deleted line `-- x` is never mistaken
for a `---` header.
"""

from __future__ import annotations

from typing import Any

from fleet.caps import cap
from fleet.git.patchtext import hunk_header, quote_path

STATUS = {
    "A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied",
    "T": "type_changed", "U": "unmerged",
}


def decode(data: bytes) -> str:
    """git output as text; invalid UTF-8 becomes U+FFFD."""
    return data.decode("utf-8", "replace")


def _mode(value: str) -> str | None:
    return value if value.strip("0") else None


# The flags every caller passes with --patch: fixed prefixes and submodule format whatever the user's
# config says (diff.noprefix, diff.mnemonicPrefix, diff.submodule=log would change the section headers).
PATCH_FLAGS = ["--no-ext-diff", "--no-textconv", "--no-color", "--src-prefix=a/", "--dst-prefix=b/",
               "--submodule=short", "--no-relative"]


def _headers(old: bytes, new: bytes) -> set[bytes]:
    """The `diff --git` lines git may print for these paths (core.quotePath off, and on: high bytes quoted)."""
    plain = b"diff --git " + quote_path(b"a/" + old) + b" " + quote_path(b"b/" + new)
    if old.isascii() and new.isascii():
        return {plain}
    return {plain, b"diff --git " + quote_path(b"a/" + old, high=True) + b" " + quote_path(b"b/" + new, high=True)}


def parse_raw(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """The raw entries at the start of `data` and the rest (the patch text, if any)."""
    entries: list[dict[str, Any]] = []
    pos = 0
    find = data.index
    while data[pos:pos + 1] == b":":
        end = find(b"\0", pos)
        header = data[pos:end].decode("ascii", "replace")
        pos = end + 1
        bare = header.lstrip(":")
        parents = len(header) - len(bare)
        fields = bare.split(" ")
        combined = parents > 1
        letters = fields[-1]
        code = letters[:1]
        nul = find(b"\0", pos)
        first = data[pos:nul]
        pos = nul + 1
        if code in ("R", "C") and not combined:
            nul = find(b"\0", pos)
            last = data[pos:nul]
            pos = nul + 1
            old_path: str | None = decode(first)
            similarity = int(letters[1:]) if letters[1:].isdigit() else None
        else:
            last, old_path, similarity = first, None, None
        unmerged = combined or code == "U"
        entries.append({
            "_headers": _headers(first, last),
            "path": decode(last),
            "old_path": old_path,
            "status": "unmerged" if unmerged else STATUS.get(code, code.lower()),
            "similarity": similarity,
            "old_mode": _mode(fields[0]),
            "new_mode": _mode(fields[parents]),
            "binary": False,
            "insertions": 0,
            "deletions": 0,
            "hunks": [],
            "_unhashed": not combined and not fields[3].strip("0"),
        })
    if data[pos:pos + 1] == b"\0":
        pos += 1
    return entries, data[pos:]


_SECTION_MARKS = (b"\ndiff --git ", b"\ndiff --cc ", b"\ndiff --combined ", b"\n* Unmerged path ")


def _sections(patch: bytes) -> list[bytes]:
    """Patch text cut into per-file sections (bytes, header line first), at C speed.

    A section starts at a line beginning `diff --git ` (or a combined/unmerged header). No line of a hunk
    body can: each starts with ` `, `+`, `-` or `\\` (or is empty, diff.suppressBlankEmpty), and a path
    with a newline is always quoted, so a body line such as `+diff --git a/x b/x` never starts a section.
    """
    text = b"\n" + patch
    starts = []
    for mark in _SECTION_MARKS:
        at = text.find(mark)
        while at >= 0:
            starts.append(at)
            at = text.find(mark, at + len(mark))
    starts.sort()
    return [patch[a:b] for a, b in zip(starts, starts[1:] + [len(patch)])]


def _split_head(section: bytes) -> tuple[bytes, bytes]:
    """(header lines, hunk text from the first `@@` on without the section's last newline). No line before
    the first hunk starts with `@@`, and no body line does (see _sections), so `\n@@` ends the header."""
    at = section.find(b"\n@@")
    if at < 0:
        return section, b""
    body = section[at + 1:]
    return section[:at], body[:-1] if body.endswith(b"\n") else body


def count(change: dict[str, Any]) -> dict[str, Any]:
    """An `index_diff` change with its binary flag and +/- line counts, without parsing hunks: after the
    first hunk header every line starting with `+` (`-`) is an added (deleted) line."""
    for section in change["_sections"]:
        head, body = _split_head(section)
        if b"\nBinary files " in head or (head + b"\n").find(b"\nGIT binary patch\n") >= 0:
            change["binary"] = True
        change["insertions"] += body.count(b"\n+")
        change["deletions"] += body.count(b"\n-")
    if change["binary"]:
        change["insertions"] = change["deletions"] = None
    return change


def _first_line(section: bytes) -> bytes:
    nl = section.find(b"\n")
    return section if nl < 0 else section[:nl]


def hunk_parts(sections: list[bytes]) -> list[tuple[tuple[int, int, int, int], bytes, bytes]]:
    """Each hunk of a change's sections as (header numbers, header line, body bytes), bodies undecoded.

    Every line starting with `@@` is a hunk header (no body line can start so); one git would never print
    that does not parse as a header is skipped, its lines joining the hunk before it."""
    parts: list[tuple[tuple[int, int, int, int], bytes, bytes]] = []
    for section in sections:
        body = _split_head(section)[1]
        if not body:
            continue
        for n, chunk in enumerate(body.split(b"\n@@")):
            if n:
                chunk = b"@@" + chunk
            nl = chunk.find(b"\n")
            line, rest = (chunk, b"") if nl < 0 else (chunk[:nl], chunk[nl + 1:])
            numbers = hunk_header(line)
            if numbers is not None:
                parts.append((numbers, line, rest))
            elif parts and rest:
                numbers, line, prev = parts[-1]
                parts[-1] = (numbers, line, prev + b"\n" + rest if prev else rest)
    return parts


def body_lines(body: bytes, most: int | None = None, within: int | None = None) -> list[str]:
    """The first `most` lines of a hunk body as text (all when None), reading no more than `within` bytes of
    it when given (a line that does not end within them is left out: it could not fit in as many bytes of
    JSON). Decoded in one go: invalid UTF-8 becomes U+FFFD per line, as decoding each line would."""
    if not body:
        return []
    cut = within is not None and len(body) > within
    raw = (body[:within] if cut else body).split(b"\n", -1 if most is None else most)
    if cut:
        raw.pop()   # it ends past `within` (or is the part of a line beyond `most`: dropped below anyway)
    if most is not None:
        del raw[most:]
    lines = decode(b"\n".join(raw)).split("\n") if raw else []
    if "" in lines:  # diff.suppressBlankEmpty prints "" for a blank context line " "
        lines = [line or " " for line in lines]
    return lines


def line_count(body: bytes) -> int:
    return body.count(b"\n") + 1 if body else 0


def index_diff(data: bytes) -> list[dict[str, Any]]:
    """Change[] from `git diff -z --raw --patch` output, neither counted nor parsed yet: each change keeps its
    patch sections (bytes) under `_sections` (see `count`, `fill`, `hunk_parts`).

    A section is given to a raw entry only when its `diff --git` header names exactly that entry's paths,
    so an entry git printed no patch for (or an unexpected section) can never shift hunks onto other files.

    Plumbing that compares with the work tree (`diff-files`, `diff-index` without `--cached`) does not
    refresh the index, so it lists every stat-dirty file with an unhashed (all-zero) work-tree side. Such
    an entry that git then printed no patch for has the same content and mode on both sides: it is not a
    change (porcelain `git diff` refreshes the index to drop it; a reader must not write the index).
    """
    entries, patch = parse_raw(data)
    sections = _sections(patch)
    k = 0
    kept = []
    for entry in entries:
        headers = entry.pop("_headers")
        unhashed = entry.pop("_unhashed")
        mine: list[bytes] = []
        entry["_sections"] = mine
        if entry["status"] == "unmerged":
            if k < len(sections) and not sections[k].startswith(b"diff --git "):
                k += 1
            kept.append(entry)
            continue
        # A type change (file <-> symlink) is printed as a deletion then a creation, both with this header.
        while k < len(sections) and _first_line(sections[k]) in headers:
            mine.append(sections[k])
            k += 1
            if entry["status"] != "type_changed":
                break
        if mine or not (unhashed and entry["status"] == "modified" and entry["old_mode"] == entry["new_mode"]):
            kept.append(entry)
    return kept


def fill(change: dict[str, Any]) -> dict[str, Any]:
    """An `index_diff` change counted and with its hunks parsed in full."""
    count(change)
    change["hunks"] = [{"old_start": numbers[0], "old_lines": numbers[1], "new_start": numbers[2],
                        "new_lines": numbers[3], "header": decode(line), "lines": body_lines(body)}
                       for numbers, line, body in hunk_parts(change.pop("_sections"))]
    return change


def parse_diff(data: bytes) -> list[dict[str, Any]]:
    """Change[] from `git diff -z --raw --patch` output, hunks parsed (ids not yet assigned); see index_diff."""
    return [fill(change) for change in index_diff(data)]


def parse_numstat(data: bytes) -> list[dict[str, Any]]:
    """`git diff --numstat -z` records: `{path, old_path, insertions, deletions, binary}`."""
    return split_numstat(data)[0]


def split_numstat(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """(numstat records, the patch after them) from `git diff --numstat --patch -z`: one git run gives
    both (the records end at an empty NUL-terminated field, then the patch follows)."""
    records: list[dict[str, Any]] = []
    parts = data.split(b"\0")
    i = 0
    while i < len(parts) and parts[i]:
        ins, dels, name = parts[i].split(b"\t", 2)
        old = None
        if name == b"":
            old, name = parts[i + 1], parts[i + 2]
            i += 3
        else:
            i += 1
        binary = ins == b"-"
        records.append({
            "path": decode(name), "old_path": decode(old) if old is not None else None,
            "insertions": None if binary else int(ins), "deletions": None if binary else int(dels),
            "binary": binary,
        })
    consumed = sum(len(part) + 1 for part in parts[:i + 1])   # the records and the empty separator field
    return records, data[consumed:] if i < len(parts) - 1 else b""


def number(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort by path (code-point order, which is git's byte order for UTF-8) and assign `change-N` ids."""
    changes.sort(key=lambda c: (c["path"], c.get("old_path") or ""))
    for n, change in enumerate(changes, 1):
        change["id"] = f"change-{n}"
    return changes


def cap_change(change: dict[str, Any], max_hunks: int = 200, max_lines: int = 200) -> dict[str, Any]:
    """Cap a change's hunks and each hunk's lines, recording `truncated`/`omitted_count` at each level."""
    hunks, info = cap(change["hunks"], max_hunks)
    for hunk in hunks:
        hunk["lines"], hunk_info = cap(hunk["lines"], max_lines)
        hunk.update(hunk_info)
    change["hunks"] = hunks
    change.update(info)
    return change


def summarize(change: dict[str, Any]) -> dict[str, Any]:
    """The change without hunk bodies: counts only (for `summary_only`)."""
    slim = {k: v for k, v in change.items() if k != "hunks"}
    slim["hunk_count"] = len(change["hunks"])
    return slim
