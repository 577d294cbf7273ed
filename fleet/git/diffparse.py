"""Parse `git diff -z --raw --patch` (and `--numstat -z`) output into Change dicts.

Names come from the NUL-delimited raw part, never from the `diff --git a/... b/...` header, so quoted,
space-containing or non-UTF-8 paths are exact. Patch sections follow the raw entries in the same order.
Only what is asked for is parsed: `index_diff` reads the raw part and makes a change only when it is asked
for, its patch section found then (`Indexed`); a change is counted and its hunks found only when it is
reached (`open_change`), and decoded in full (`fill`) or hunk by hunk as a byte budget allows
(fleet/repo/jsonbudget.py), so a large diff cut to a small answer costs little more than the part returned.
Everything after a section's first `@@` line is hunk text, so a deleted line `-- x` is never mistaken
for a `---` header.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.caps import cap
from fleet.git.patchtext import HUNK_HEADER, hunk_header, hunk_numbers, quote_path

STATUS = {
    "A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied",
    "T": "type_changed", "U": "unmerged",
}


def decode(data: bytes) -> str:
    """git output as text; invalid UTF-8 becomes U+FFFD."""
    return data.decode("utf-8", "replace")


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


# One two-tree raw entry (a single leading colon) at C speed: modes, shas, status letter and score, then one
# path or, for a rename/copy, two. Anything else (combined entries of a merge) takes the general parser.
_RAW_PREFIX = rb":([0-7]+) ([0-7]+) ([0-9a-f]+) ([0-9a-f]+) "   # modes and shas
_RAW_ROW = re.compile(_RAW_PREFIX + rb"(?:([RC])(\d*)\0([^\0]*)\0([^\0]*)|([A-QS-Z])\d*\0([^\0]*))\0")
# A byte that makes git quote a path in a patch header (core.quotePath=false); NUL separates raw fields.
_QUOTED_BYTE = re.compile(rb'[\x01-\x1f"\\\x7f]')


def _entry(old_mode: bytes, new_mode: bytes, unhashed: bool, code: str, similarity: int | None,
           first: bytes, last: bytes, old_path: str | None, unmerged: bool) -> dict[str, Any]:
    return {"_first": first, "_last": last, "path": decode(last), "old_path": old_path,
            "status": "unmerged" if unmerged else STATUS.get(code, code.lower()), "similarity": similarity,
            "old_mode": _mode(old_mode), "new_mode": _mode(new_mode), "binary": False, "insertions": 0,
            "deletions": 0, "hunks": [], "_unhashed": unhashed}


_MODES = {m.encode(): m for m in ("100644", "100755", "120000", "160000", "040000")}


def _mode(value: bytes) -> str | None:
    """A raw entry's mode as text, None for "absent" (all zeros)."""
    known = _MODES.get(value)
    if known is not None:
        return known
    return value.decode("ascii", "replace") if value.strip(b"0") else None


def parse_raw(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The raw entries at the start of `data` and where the rest (the patch text, if any) starts. Each entry
    keeps its paths' bytes (`_first`, `_last`) to find its patch section by."""
    entries: list[dict[str, Any]] = []
    pos = 0
    find = data.index
    fast = _RAW_ROW.match
    while data[pos:pos + 1] == b":":
        match = fast(data, pos)
        if match is not None:
            old_mode, new_mode, _, new_sha, rc, score, first, last, code, only = match.groups()
            pos = match.end()
            unhashed = not new_sha.strip(b"0")
            if rc is not None:
                entries.append(_entry(old_mode, new_mode, unhashed, rc.decode(), int(score) if score else None,
                                      first, last, decode(first), False))
            else:
                letter = code.decode()
                entries.append(_entry(old_mode, new_mode, unhashed, letter, None, only, only, None,
                                      letter == "U"))
            continue
        end = find(b"\0", pos)
        header = data[pos:end]
        pos = end + 1
        bare = header.lstrip(b":")
        parents = len(header) - len(bare)
        fields = bare.split(b" ")
        combined = parents > 1
        letters = fields[-1].decode("ascii", "replace")
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
        unhashed = not combined and len(fields) > 3 and not fields[3].strip(b"0")
        entries.append(_entry(fields[0], fields[parents], unhashed, code, similarity, first, last, old_path,
                              combined or code == "U"))
    if data[pos:pos + 1] == b"\0":
        pos += 1
    return entries, pos


_SECTION_MARKS = (b"\ndiff --git ", b"\ndiff --cc ", b"\ndiff --combined ", b"\n* Unmerged path ")


def _sections(data: bytes, start: int, unmerged: bool) -> list[bytes]:
    """The patch text that begins at `start` in `data`, cut into per-file sections (bytes, header line first), at
    C speed and without copying the patch first (a fresh copy of a large output costs its page faults).

    A section starts at a line beginning `diff --git ` (or, when some raw entry is unmerged or combined,
    a combined/unmerged header: git prints those for such entries only). No line of a hunk body can: each
    starts with ` `, `+`, `-` or `\\` (or is empty, diff.suppressBlankEmpty), and a path with a newline is
    always quoted, so a body line such as `+diff --git a/x b/x` never starts a section.
    """
    starts = []
    for mark in _SECTION_MARKS if unmerged else _SECTION_MARKS[:1]:
        if data.startswith(mark[1:], start):
            starts.append(start)
        at = data.find(mark, start)
        while at >= 0:
            starts.append(at + 1)
            at = data.find(mark, at + len(mark))
    starts.sort()
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


def _names(line: bytes, old: bytes, new: bytes, plain: bool) -> bool:
    """Whether `line` is the `diff --git` header of these paths. `plain`: no path in the output has a byte
    git quotes whatever core.quotePath says, so the unquoted header is the one to expect (or, for a path
    with bytes >= 0x80, its core.quotePath=true form)."""
    if plain:
        if line == b"diff --git a/" + old + b" b/" + new:
            return True
        if old.isascii() and new.isascii():
            return False
    return line in _headers(old, new)


def _first_line(section: bytes) -> bytes:
    nl = section.find(b"\n")
    return section if nl < 0 else section[:nl]


# A hunk header line where a line of hunk text starts (hunk_header's pattern, to the end of the line).
_HUNK_LINE = re.compile(HUNK_HEADER + rb"[^\n]*")
# (header numbers, header line, body bytes, the body's line count)
Part = tuple[tuple[int, int, int, int], bytes, bytes, int]


def open_change(change: dict[str, Any]) -> list[Part]:
    """Count an `index_diff` change (binary flag, +/- lines) and return its hunks as (header numbers, header
    line, body bytes, its line count), bodies undecoded; its `_sections` are consumed.

    After the first hunk header every line starting with `+` (`-`) is an added (deleted) line. Every line
    starting with `@@` is a hunk header (no body line can start so); one git would never print that does not
    parse as a header is skipped, its lines joining the hunk before it. When every header parses, the counts
    come from them: a hunk's lines are its context, deleted and added lines and its `\\ No newline` marks, and
    its header counts the old side (context + deleted) and the new side (context + added)."""
    parts: list[Part] = []
    insertions = deletions = 0
    for section in change.pop("_sections"):
        at = section.find(b"\n@@")
        if at < 0:   # no hunk: a binary file says so in the header (a file with hunks is text)
            if b"\nBinary files " in section or b"\nGIT binary patch\n" in section + b"\n":
                change["binary"] = True
            continue
        stop = len(section) - 1 if section.endswith(b"\n") else len(section)
        match = _HUNK_LINE.match(section, at + 1, stop)
        rest = at + 3 if match is None else match.end()
        # The usual body has no `@` at all (told by memchr): no other `@@` line, without searching for one.
        nxt = section.find(b"\n@@", rest, stop) if section.find(b"@", rest, stop) >= 0 else -1
        if match is not None and nxt < 0:   # the usual section: one hunk
            numbers = hunk_numbers(match)
            text = section[match.end() + 1:stop]
            count = text.count(b"\n") + 1 if text else 0
            lines = count - _marks(text)
            insertions += lines - numbers[1]
            deletions += lines - numbers[3]
            parts.append((numbers, match.group(), text, count))
            continue
        starts = [at + 1]
        at = nxt
        while at >= 0:
            starts.append(at + 1)
            at = section.find(b"\n@@", at + 3, stop)
        found = [_HUNK_LINE.match(section, at, stop) for at in starts]
        if None in found:   # some `@@` line is no header: the careful way
            body = section[starts[0]:stop]
            insertions += body.count(b"\n+")
            deletions += body.count(b"\n-")
            parts += _hunks_line_by_line(body)
            continue
        for match, end in zip(found, [at - 1 for at in starts[1:]] + [stop]):
            numbers = hunk_numbers(match)
            text = section[match.end() + 1:end]
            count = line_count(text)
            lines = count - _marks(text)
            insertions += lines - numbers[1]
            deletions += lines - numbers[3]
            parts.append((numbers, match.group(), text, count))
    if change["binary"]:
        change["insertions"] = change["deletions"] = None
    else:
        change["insertions"] += insertions
        change["deletions"] += deletions
    return parts


def _marks(text: bytes) -> int:
    """How many `\\ No newline at end of file` lines a hunk body has (`find`, not `in`: a bytes operand of `in`
    is first tried as an integer, and the error that makes costs more than the search)."""
    return text.count(b"\n\\") + (text[:1] == b"\\") if text.find(b"\\") >= 0 else 0


def _hunks_line_by_line(body: bytes) -> list[Part]:
    parts: list[Part] = []
    for n, chunk in enumerate(body.split(b"\n@@")):
        if n:
            chunk = b"@@" + chunk
        nl = chunk.find(b"\n")
        line, rest = (chunk, b"") if nl < 0 else (chunk[:nl], chunk[nl + 1:])
        numbers = hunk_header(line)
        if numbers is not None:
            parts.append((numbers, line, rest, line_count(rest)))
        elif parts and rest:
            numbers, line, prev, _ = parts[-1]
            joined = prev + b"\n" + rest if prev else rest
            parts[-1] = (numbers, line, joined, line_count(joined))
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


class Indexed:
    """The changes of one `git diff -z --raw --patch` output, each made only when asked for: `change(i)` is the
    i-th in git's order, neither counted nor parsed yet (its patch sections, bytes, under `_sections`: see
    `open_change`, `fill`), `len()` how many there are and `path_order()` the order `number` gives them. A
    diff cut to a byte budget (fleet/repo/jsonbudget.py) builds only the changes it keeps: on a 500-file commit
    cut to 150, the other 350 cost the split of their raw entry and the decoding of their path, no more.

    The usual output (every raw entry a two-tree one, none unmerged or a type change) is read quickly: the raw
    part read entry by entry at C speed (`_USUAL_ENTRY`), its paths decoded in one go; an asked change's
    section found by its index (git prints one section per entry, in the raw part's order) and checked to
    be under the plain `diff --git` header of that entry's paths. Anything else, or a section under another
    header (a path git quotes), is read the general way (`_general_index`), which pairs sections with entries
    by their headers, quoted or not, and agrees with every change already made the quick way (each was under
    its own header, and each entry is one change either way)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.general: list[dict[str, Any]] | None = None
        end = data.find(b"\0\0") + 1 or len(data)  # a path is never empty: the raw part ends at the first NUL pair
        self.entries = _USUAL_ENTRY.findall(data, 0, end)
        heads, rcs, olds, lasts = zip(*self.entries) if self.entries else [()] * 4
        self.olds, self.lasts = olds, lasts   # olds: a rename's or copy's source, else b""
        renames = len(rcs) - rcs.count(b"")
        # Every byte of the raw part in some entry (the entries found abut), else some entry is not the usual
        # kind (combined, unmerged, a type change).
        all_heads = b"".join(heads)
        if len(all_heads) + len(b"".join(olds)) + len(b"".join(lasts)) + 2 * len(heads) + renames != end:
            self._fall_back()
            return
        self.starts: list[int] = []   # where each section found so far starts (git's order)
        self.scanned = end + 1        # where the search for the next section goes on
        if all_heads.find(b"0000000 M") >= 0 and not self._all_sections():   # an unhashed new side
            self._fall_back()   # a stat-dirty entry git printed no patch for is no change: the general way
            return
        self.paths = _decode_each(lasts)
        self.old_paths = [old or None for old in _decode_each(olds)] if renames else [None] * len(lasts)

    def _fall_back(self) -> None:
        self.general = _general_index(self.data)
        self.paths = [c["path"] for c in self.general]
        self.old_paths = [c["old_path"] for c in self.general]

    def __len__(self) -> int:
        return len(self.paths)

    def path_order(self) -> list[int]:
        """Indexes in path order (code-point order, which is git's byte order for UTF-8; a rename's old path
        breaks a tie): the order of `number`."""
        return _path_order(self.paths, self.old_paths)

    def change(self, i: int) -> dict[str, Any]:
        """The i-th change in git's order (a fresh dict each call)."""
        if self.general is None:
            made = self._made(i)
            if made is not None:
                return made
            self._fall_back()   # a header git would not print, or a section under another entry's header
        change = self.general[i]
        return {**change, "_sections": list(change["_sections"])}

    def _made(self, i: int) -> dict[str, Any] | None:
        """The i-th change made the quick way, or None when its section is not where, or under the header, expected."""
        section = self._section(i)
        if section is None:
            return None
        head, rc, _, _ = self.entries[i]
        old_mode, new_mode, _, _, status = head.split(b" ")   # `_USUAL_ENTRY` matched exactly these five fields
        return {"path": self.paths[i], "old_path": self.old_paths[i], "status": _STATUS_BYTES[status[:1]],
                "similarity": int(status[1:]) if rc and status[1:] else None,
                "old_mode": _mode(old_mode[1:]), "new_mode": _mode(new_mode),
                "binary": False, "insertions": 0, "deletions": 0, "hunks": [], "_sections": [section]}

    def _section(self, i: int) -> bytes | None:
        """The i-th patch section, once every section up to the one after it is found under its entry's
        header; None if one is not."""
        data, starts = self.data, self.starts
        while len(starts) <= i + 1 and self.scanned >= 0:
            k = len(starts)
            at = self.scanned if k == 0 else data.find(b"\ndiff --git ", self.scanned) + 1 or -1
            if at < 0 or (k == 0 and not data.startswith(b"diff --git ", at)):
                self.scanned = -1
                break
            if k >= len(self.lasts) or not data.startswith(
                    b"diff --git a/" + (self.olds[k] or self.lasts[k]) + b" b/" + self.lasts[k] + b"\n", at):
                return None
            starts.append(at)
            self.scanned = at + 11
        if i >= len(starts):
            return None
        return data[starts[i]:starts[i + 1] if i + 1 < len(starts) else len(data)]

    def _all_sections(self) -> bool:
        """Whether every entry has its section, each under its own header, and there is no other section."""
        return self._section(len(self.lasts) - 1) is not None


_STATUS_BYTES = {k.encode(): v for k, v in STATUS.items()}
# One usual raw entry (Indexed), found at C speed: a two-tree entry (one colon, then a mode) added, modified or
# deleted, or renamed or copied with its source (not a type change: two sections; nor unmerged: none). Groups:
# its header (parsed when its change is made), R or C, the source, the path. The header's fields are matched
# strictly (`_RAW_PREFIX`): a false start inside a path (`:0…`) fails within its next few bytes, so a hostile name
# full of colons costs linear time, not a scan to its end from every colon.
_USUAL_ENTRY = re.compile(rb"(" + _RAW_PREFIX.replace(b"(", b"(?:")   # its fields uncaptured: the header is one group
                          + rb"(?:[ADM]|([RC]))\d*)\0(?(2)([^\0]+)\0)([^\0]+)\0")


def _decode_each(fields: tuple[bytes, ...]) -> list[str]:
    """Each field as `decode` gives it, in one decode: a NUL ends any invalid UTF-8 sequence, so each field's
    replacement characters are its own."""
    return b"\0".join(fields).decode("utf-8", "replace").split("\0") if fields else []


def index_diff(data: bytes) -> Indexed:
    """The changes of `git diff -z --raw --patch` output, each made when asked for (see `Indexed`)."""
    return Indexed(data)


def _general_index(data: bytes) -> list[dict[str, Any]]:
    """Change[] from `git diff -z --raw --patch` output in git's order, neither counted nor parsed yet: each
    change keeps its patch sections (bytes) under `_sections`.

    A section is given to a raw entry only when its `diff --git` header names exactly that entry's paths,
    so an entry git printed no patch for (or an unexpected section) can never shift hunks onto other files.

    Plumbing that compares with the work tree (`diff-files`, `diff-index` without `--cached`) does not
    refresh the index, so it lists every stat-dirty file with an unhashed (all-zero) work-tree side. Such
    an entry that git then printed no patch for has the same content and mode on both sides: it is not a
    change (porcelain `git diff` refreshes the index to drop it; a reader must not write the index).
    """
    entries, patch = parse_raw(data)
    sections = _sections(data, patch, any(e["status"] == "unmerged" for e in entries))
    # No path needs quoting (the usual case, told at C speed): each header is its plain form.
    plain = _QUOTED_BYTE.search(data, 0, patch) is None
    k = 0
    kept = []
    for entry in entries:
        first, last = entry.pop("_first"), entry.pop("_last")
        unhashed = entry.pop("_unhashed")
        mine: list[bytes] = []
        entry["_sections"] = mine
        if entry["status"] == "unmerged":
            if k < len(sections) and not sections[k].startswith(b"diff --git "):
                k += 1
            kept.append(entry)
            continue
        # A type change (file <-> symlink) is printed as a deletion then a creation, both with this header.
        while k < len(sections) and _names(_first_line(sections[k]), first, last, plain):
            mine.append(sections[k])
            k += 1
            if entry["status"] != "type_changed":
                break
        if mine or not (unhashed and entry["status"] == "modified" and entry["old_mode"] == entry["new_mode"]):
            kept.append(entry)
    return kept


def fill(change: dict[str, Any]) -> dict[str, Any]:
    """An `index_diff` change counted and with its hunks parsed in full."""
    change["hunks"] = [{"old_start": numbers[0], "old_lines": numbers[1], "new_start": numbers[2],
                        "new_lines": numbers[3], "header": decode(line), "lines": body_lines(body)}
                       for numbers, line, body, _ in open_change(change)]
    return change


def parse_diff(data: bytes) -> list[dict[str, Any]]:
    """Change[] from `git diff -z --raw --patch` output, hunks parsed (ids not yet assigned); see index_diff."""
    changes = index_diff(data)
    return [fill(changes.change(i)) for i in range(len(changes))]


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


def _path_order(paths: list[str], old_paths: list[str | None]) -> list[int]:
    """Indexes of changes in path order (code-point order, which is git's byte order for UTF-8), a rename's
    old path breaking a tie, else git's order."""
    if any(old_paths):
        keys = [(path, old or "") for path, old in zip(paths, old_paths)]
        return sorted(range(len(keys)), key=keys.__getitem__)
    return sorted(range(len(paths)), key=paths.__getitem__)


def number(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort by path (`_path_order`) and assign `change-N` ids."""
    order = _path_order([c["path"] for c in changes], [c.get("old_path") for c in changes])
    changes[:] = [changes[i] for i in order]
    for n, change in enumerate(changes, 1):
        change["id"] = change_id(n)
    return changes


def change_id(n: int) -> str:
    """The id of the n-th change of an answer, in path order (1-based)."""
    return f"change-{n}"


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
