"""Line diffs of text as unified-diff hunks that `git apply` accepts byte for byte.

Lines end only at `\\n` (CR, form feed and U+2028 stay inside a line, as git sees them), so CRLF files keep
their CRs and a final line without a newline gets git's `\\ No newline at end of file` marker. Lines are
aligned patience-style (unique lines first), with difflib's SequenceMatcher inside the remaining gaps; very
large gaps switch on difflib's popular-line heuristic, which can make a diff longer but never wrong.
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass

NO_NEWLINE = "\\ No newline at end of file\n"
# Above this many lines on either side of a gap without unique lines, SequenceMatcher's worst case is
# quadratic in repeated lines; autojunk bounds it.
_EXACT_MATCH_LINES = 1000

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
    """difflib-style opcodes (equal/replace/delete/insert) for the whole of `old` -> `new`."""
    codes: list[Opcode] = []
    i = j = 0
    for bi, bj, size in _matching_blocks(old, new) + [(len(old), len(new), 0)]:
        tag = "replace" if i < bi and j < bj else "delete" if i < bi else "insert" if j < bj else ""
        if tag:
            codes.append((tag, i, bi, j, bj))
        if size:
            codes.append(("equal", bi, bi + size, bj, bj + size))
        i, j = bi + size, bj + size
    return codes


def _matching_blocks(a: list[str], b: list[str]) -> list[tuple[int, int, int]]:
    """Ascending, merged (i, j, size) runs of equal lines: patience anchoring, difflib inside the gaps.

    Lines unique on both sides of a region are aligned by their longest increasing run (git's
    --patience); regions without such anchors fall back to SequenceMatcher. This stays near n log n on
    large files with scattered edits, where difflib alone goes quadratic.
    """
    found: list[tuple[int, int, int]] = []
    stack = [(0, len(a), 0, len(b))]
    while stack:
        alo, ahi, blo, bhi = stack.pop()
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            found.append((alo, blo, 1))
            alo, blo = alo + 1, blo + 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
            found.append((ahi, bhi, 1))
        if alo == ahi or blo == bhi:
            continue
        anchors = _unique_anchors(a, alo, ahi, b, blo, bhi)
        if not anchors:
            big = max(ahi - alo, bhi - blo) > _EXACT_MATCH_LINES
            matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=big)
            found.extend((alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n)
            continue
        prev_i, prev_j = alo, blo
        for i, j in anchors:
            found.append((i, j, 1))
            stack.append((prev_i, i, prev_j, j))
            prev_i, prev_j = i + 1, j + 1
        stack.append((prev_i, ahi, prev_j, bhi))
    merged: list[tuple[int, int, int]] = []
    for i, j, n in sorted(found):
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + n)
        else:
            merged.append((i, j, n))
    return merged


def _unique_anchors(a: list[str], alo: int, ahi: int, b: list[str], blo: int, bhi: int) -> list[tuple[int, int]]:
    """Pairs (i, j) of lines occurring once in a[alo:ahi] and once in b[blo:bhi], longest run increasing in j."""
    where_a: dict[str, int] = {}
    for i in range(alo, ahi):
        where_a[a[i]] = -1 if a[i] in where_a else i
    where_b: dict[str, int] = {}
    for j in range(blo, bhi):
        where_b[b[j]] = -1 if b[j] in where_b else j
    pairs = [(i, where_b[line]) for line, i in where_a.items() if i >= 0 and where_b.get(line, -1) >= 0]
    pairs.sort()
    # Patience sorting: tails[k] = index into pairs of the smallest j ending an increasing run of length k+1.
    tails: list[int] = []
    tail_js: list[int] = []
    back: list[int] = []
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tail_js, j)
        back.append(tails[k - 1] if k else -1)
        if k == len(tails):
            tails.append(n)
            tail_js.append(j)
        else:
            tails[k] = n
            tail_js[k] = j
    run: list[tuple[int, int]] = []
    n = tails[-1] if tails else -1
    while n >= 0:
        run.append(pairs[n])
        n = back[n]
    return run[::-1]


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
