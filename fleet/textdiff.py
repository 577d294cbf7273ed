"""Line diffs of text as unified-diff hunks that `git apply` accepts byte for byte.

Lines end only at `\\n` (CR, form feed and U+2028 stay inside a line, as git sees them), so CRLF files keep
their CRs and a final line without a newline gets git's `\\ No newline at end of file` marker. Matching uses
difflib's SequenceMatcher on the part between the common prefix and suffix, which keeps everyday edits of
large files fast; very large middles switch on difflib's popular-line heuristic, which can make a diff
longer but never wrong.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

NO_NEWLINE = "\\ No newline at end of file\n"
# Above this many lines on either side of the changed middle, SequenceMatcher's worst case is quadratic
# in repeated lines; autojunk bounds it.
_EXACT_MATCH_LINES = 4000

Opcode = tuple[str, int, int, int, int]


def split_lines(text: str) -> list[str]:
    """`text` cut after every `\\n`, newlines kept; a final line without one is kept as is."""
    if not text:
        return []
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    body: str
    insertions: int
    deletions: int

    def header(self) -> str:
        return f"@@ -{_range(self.old_start, self.old_count)} +{_range(self.new_start, self.new_count)} @@\n"

    def text(self) -> str:
        return self.header() + self.body


def _range(start: int, count: int) -> str:
    # git writes `-5` for one line and `-4,0` (the line before) for none.
    return str(start) if count == 1 else f"{start},{count}"


def opcodes(old: list[str], new: list[str]) -> list[Opcode]:
    """difflib-style opcodes for the whole of `old` -> `new`."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    old_mid = old[prefix:len(old) - suffix]
    new_mid = new[prefix:len(new) - suffix]
    codes: list[Opcode] = []
    if prefix:
        codes.append(("equal", 0, prefix, 0, prefix))
    if old_mid or new_mid:
        big = max(len(old_mid), len(new_mid)) > _EXACT_MATCH_LINES
        matcher = difflib.SequenceMatcher(None, old_mid, new_mid, autojunk=big)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            codes.append((tag, i1 + prefix, i2 + prefix, j1 + prefix, j2 + prefix))
    if suffix:
        codes.append(("equal", len(old) - suffix, len(old), len(new) - suffix, len(new)))
    return codes


def _groups(codes: list[Opcode], context: int) -> list[list[Opcode]]:
    """Split opcodes into hunks with `context` equal lines around each change (difflib's grouping)."""
    if not any(tag != "equal" for tag, *_ in codes):
        return []
    codes = list(codes)
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    groups: list[list[Opcode]] = []
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def _emit(out: list[str], prefix: str, line: str) -> None:
    out.append(prefix + line)
    if not line.endswith("\n"):
        out.append("\n" + NO_NEWLINE)


def hunks(old: list[str], new: list[str], context: int = 3) -> list[Hunk]:
    """The unified-diff hunks turning lines `old` into lines `new` (both from `split_lines`)."""
    result = []
    for group in _groups(opcodes(old, new), context):
        first, last = group[0], group[-1]
        old_start, old_end = first[1], last[2]
        new_start, new_end = first[3], last[4]
        out: list[str] = []
        plus = minus = 0
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in old[i1:i2]:
                    _emit(out, " ", line)
                continue
            for line in old[i1:i2]:
                _emit(out, "-", line)
            for line in new[j1:j2]:
                _emit(out, "+", line)
            minus += i2 - i1
            plus += j2 - j1
        old_count, new_count = old_end - old_start, new_end - new_start
        result.append(Hunk(old_start + 1 if old_count else old_start, old_count,
                           new_start + 1 if new_count else new_start, new_count,
                           "".join(out), plus, minus))
    return result


def similarity(old: list[str], new: list[str]) -> int:
    """Percent of the larger side's bytes kept unchanged, floored: git's rename score, approximated by lines."""
    old_size = sum(len(line.encode("utf-8")) for line in old)
    new_size = sum(len(line.encode("utf-8")) for line in new)
    largest = max(old_size, new_size)
    if not largest:
        return 100
    kept = sum(len(line.encode("utf-8")) for tag, i1, i2, _, _ in opcodes(old, new) if tag == "equal"
               for line in old[i1:i2])
    return kept * 100 // largest
