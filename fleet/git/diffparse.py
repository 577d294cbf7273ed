"""Parse `git diff -z --raw --patch` (and `--numstat -z`) output into Change dicts.

Names come from the NUL-delimited raw part, never from the `diff --git a/... b/...` header, so quoted,
space-containing or non-UTF-8 paths are exact. Patch sections follow the raw entries in the same order;
hunk bodies are read by their line counts, so a deleted line `-- x` is never mistaken for a `---` header.
"""

from __future__ import annotations

from typing import Any

from fleet.caps import cap
from fleet.git.patchtext import hunk_header, quote_path

STATUS = {
    "A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied",
    "T": "type_changed", "U": "unmerged",
}
_SECTION_STARTS = (b"diff --git ", b"diff --cc ", b"diff --combined ", b"* Unmerged path ")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _mode(value: str) -> str | None:
    return None if set(value) <= {"0"} else value


# The flags every caller passes with --patch: fixed prefixes and submodule format whatever the user's
# config says (diff.noprefix, diff.mnemonicPrefix, diff.submodule=log would change the section headers).
PATCH_FLAGS = ["--no-ext-diff", "--no-textconv", "--no-color", "--src-prefix=a/", "--dst-prefix=b/",
               "--submodule=short", "--no-relative"]
def parse_raw(data: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """The raw entries at the start of `data` and the rest (the patch text, if any)."""
    entries: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data) and data[pos:pos + 1] == b":":
        end = data.index(b"\0", pos)
        header = _text(data[pos:end])
        pos = end + 1
        parents = len(header) - len(header.lstrip(":"))
        combined = parents > 1
        fields = header.lstrip(":").split(" ")
        letters = fields[-1]
        code = letters[0]
        names = 2 if code in "RC" and not combined else 1
        paths = []
        for _ in range(names):
            nul = data.index(b"\0", pos)
            paths.append(data[pos:nul])
            pos = nul + 1
        unmerged = combined or code == "U"
        entries.append({
            "_headers": {b"diff --git " + quote_path(b"a/" + paths[0], high=high) + b" "
                         + quote_path(b"b/" + paths[-1], high=high) for high in (False, True)},
            "path": _text(paths[-1]),
            "old_path": _text(paths[0]) if names == 2 else None,
            "status": "unmerged" if unmerged else STATUS.get(code, code.lower()),
            "similarity": int(letters[1:]) if code in "RC" and letters[1:].isdigit() else None,
            "old_mode": _mode(fields[0]),
            "new_mode": _mode(fields[parents]),
            "binary": False,
            "insertions": 0,
            "deletions": 0,
            "hunks": [],
            "_unhashed": not combined and set(fields[3]) <= {"0"},
        })
    if data[pos:pos + 1] == b"\0":
        pos += 1
    return entries, data[pos:]


def _sections(patch: bytes) -> list[list[bytes]]:
    """Split patch text into per-file sections (lists of lines without their newline)."""
    sections: list[list[bytes]] = []
    lines = patch.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(_SECTION_STARTS):
            sections.append([line])
            i += 1
            continue
        if not sections:
            i += 1
            continue
        sections[-1].append(line)
        header = hunk_header(line)
        i += 1
        if header:
            _, old_left, _, new_left = header
            while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith(b"\\")):
                body = lines[i]
                tag = body[:1]
                if tag == b"-":
                    old_left -= 1
                elif tag == b"+":
                    new_left -= 1
                elif tag != b"\\":
                    old_left -= 1
                    new_left -= 1
                sections[-1].append(body)
                i += 1
    return sections


def _fill(change: dict[str, Any], section: list[bytes]) -> None:
    """Add the hunks, binary flag and counts found in one patch section to `change`."""
    hunk: dict[str, Any] | None = None
    for line in section[1:]:
        header = hunk_header(line) if line[:2] == b"@@" else None   # a hunk header always starts with @@
        if header:
            hunk = {
                "old_start": header[0],
                "old_lines": header[1],
                "new_start": header[2],
                "new_lines": header[3],
                "header": _text(line),
                "lines": [],
            }
            change["hunks"].append(hunk)
        elif hunk is not None and line[:1] in (b"+", b"-", b" ", b"\\", b""):
            hunk["lines"].append(_text(line) or " ")     # diff.suppressBlankEmpty prints "" for " "
            if line[:1] == b"+":
                change["insertions"] += 1
            elif line[:1] == b"-":
                change["deletions"] += 1
        elif hunk is None and (line.startswith(b"Binary files ") or line == b"GIT binary patch"):
            change["binary"] = True
    if change["binary"]:
        change["insertions"] = change["deletions"] = None


def parse_diff(data: bytes) -> list[dict[str, Any]]:
    """Change[] from `git diff -z --raw --patch` output (ids not yet assigned).

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
        if entry["status"] == "unmerged":
            if k < len(sections) and not sections[k][0].startswith(b"diff --git "):
                k += 1
            kept.append(entry)
            continue
        # A type change (file <-> symlink) is printed as a deletion then a creation, both with this header.
        printed = False
        while k < len(sections) and sections[k][0] in headers:
            _fill(entry, sections[k])
            printed = True
            k += 1
            if entry["status"] != "type_changed":
                break
        if printed or not (unhashed and entry["status"] == "modified"
                           and entry["old_mode"] == entry["new_mode"]):
            kept.append(entry)
    return kept


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
            "path": _text(name), "old_path": _text(old) if old is not None else None,
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
