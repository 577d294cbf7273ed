"""The house rules a repository's recent history shows, so an agent writes a commit message that fits:
Conventional Commits or not (and which types), sign-offs and other trailers, typical subject length, ticket
prefixes. Read from the newest SAMPLE commits reachable from HEAD; a rule is only reported with the counts
behind it, never guessed from one commit.
"""

from __future__ import annotations

import re
from collections import Counter
from statistics import median
from typing import TypedDict

from fleet.git.run import GitError, run_git

SAMPLE = 50
MAX_LOG_BYTES = 4 << 20   # the sample's messages: more is no history worth reading for its habits
_PREFIXED = re.compile(r"^([a-z][a-z0-9_-]{0,30})(\([^()\n]{1,64}\))?(!)?: \S")
# The types of the Conventional Commits tooling (commitlint's config-conventional); any other lowercase
# `word: subject` is the "area: subject" habit (git, the kernel), reported apart.
CONVENTIONAL_TYPES = frozenset({"feat", "fix", "docs", "style", "refactor", "perf", "test", "build", "ci",
                                "chore", "revert"})
_TICKET = re.compile(r"\b([A-Z][A-Z0-9]{1,9})-\d+\b")
_ISSUE_REF = re.compile(r"(?:^|\s|\()#\d+\b")
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]{0,40}): \S")


class Conventions(TypedDict):
    sampled: int
    conventional_commits: bool
    conventional_ratio: float
    types: list[str]
    area_prefix_ratio: float
    area_prefixes: list[str]
    signed_off_ratio: float
    trailers: dict[str, int]
    subject_length: dict[str, int]
    ticket_prefixes: dict[str, int]
    issue_refs_ratio: float


def head_log(path: str, count: int, fields: str, max_bytes: int, *,
             no_merges: bool = False) -> list[list[bytes]] | None:
    """The newest `count` commits on HEAD, each as the NUL-separated `fields` of its format (bytes); none in a
    repo without commits, None when the output is over `max_bytes`."""
    width = fields.count("%x00") + 1
    try:
        data = run_git(path, ["log", "-z", *(["--no-merges"] if no_merges else []), f"--max-count={count}",
                              f"--format={fields}", "HEAD", "--"], timeout=10, max_bytes=max_bytes).stdout
    except GitError as exc:
        return None if exc.code == "LIMIT" else []
    parts = data.split(b"\0")   # `width` per commit, and one empty after the last (git's -z terminator)
    return [parts[i:i + width] for i in range(0, len(parts) - width + 1, width)]


def non_merge_messages(path: str, count: int = SAMPLE) -> list[tuple[str, str]]:
    """(subject, body) of the newest `count` non-merge commits on HEAD; none in a repo without commits."""
    rows = head_log(path, count, "%s%x00%b", MAX_LOG_BYTES, no_merges=True) or []
    return [(subject.decode("utf-8", "replace"), body.decode("utf-8", "replace")) for subject, body in rows]


def _trailers(body: str) -> list[str]:
    """Trailer keys of a message body: the last paragraph, when every line of it is `Key: value`."""
    paragraphs = [p for p in body.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return []
    lines = paragraphs[-1].strip().splitlines()
    keys = [m.group(1) for m in (_TRAILER.match(line) for line in lines) if m]
    return keys if len(keys) == len(lines) else []


def house_rules(messages: list[tuple[str, str]]) -> Conventions | None:
    """`{sampled, conventional_commits, conventional_ratio, types, area_prefix_ratio, area_prefixes,
    signed_off_ratio, trailers, subject_length {median, p90, max}, ticket_prefixes, issue_refs_ratio}` of
    the (subject, body) of the newest non-merge commits (`non_merge_messages`); None without commits."""
    if not messages:
        return None
    n = len(messages)
    prefixed = [m for m in (_PREFIXED.match(s) for s, _ in messages) if m]
    conventional = [m for m in prefixed if m.group(1) in CONVENTIONAL_TYPES]
    areas = Counter(m.group(1) for m in prefixed if m.group(1) not in CONVENTIONAL_TYPES)
    types = Counter(m.group(1) for m in conventional)
    keys = [_trailers(body) for _, body in messages]
    trailers = Counter(key for found in keys for key in set(found))
    signed = sum(1 for found in keys if "Signed-off-by" in found)
    lengths = sorted(len(s) for s, _ in messages)
    tickets = Counter(t for s, _ in messages for t in set(_TICKET.findall(s)))
    ratio = round(len(conventional) / n, 2)
    return {
        "sampled": n,
        "conventional_commits": ratio >= 0.8,
        "conventional_ratio": ratio,
        "types": [t for t, _ in types.most_common(6)],
        "area_prefix_ratio": round(sum(areas.values()) / n, 2),
        "area_prefixes": [a for a, _ in areas.most_common(4)],
        "signed_off_ratio": round(signed / n, 2),
        "trailers": {k: c for k, c in trailers.most_common(5)},
        "subject_length": {"median": int(median(lengths)), "p90": lengths[min(n - 1, int(n * 0.9))],
                           "max": lengths[-1]},
        "ticket_prefixes": {f"{k}-": c for k, c in tickets.most_common(3) if c >= 2},
        "issue_refs_ratio": round(sum(1 for s, _ in messages if _ISSUE_REF.search(s)) / n, 2),
    }
