"""English for counts: `1 file`, `2 files`, `2 branches` (no "file(s)" anywhere a person reads)."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}{'es' if word.endswith(('ch', 'sh', 's', 'x')) else 's'}"
