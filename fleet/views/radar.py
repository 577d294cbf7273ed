"""The attention queue: why each repository needs a person, ranked, each reason with a next step.

The reasons stored with each record come from `fleet.attention`; `radar()` adds what changes outside the
repo itself (agent collisions, ...) at query time from the reason sources its caller passes in
(`extra_sources`): this module knows no source, so nothing it imports needs to import it back.
"""

from __future__ import annotations

from typing import Callable, Sequence

from fleet.attention import reason
from fleet.views.ranking import rows_of, sort_key


# A reason source: index -> {repo path: [reason, ...]} for reasons that live outside the repo record.
ExtraReasons = Callable[[object], dict[str, list[dict]]]


def radar(index, limit: int | None = None, include_clean: bool = False,
          extra_sources: Sequence[ExtraReasons] = ()) -> list[dict]:
    """The ranked queue from the index: one entry per repo that needs attention, most urgent first.

    `extra_sources` add reasons kept outside the repo records (the surfaces pass
    `fleet.presence.attention.collision_reasons` and `fleet.ops.attention.pending_reasons`); they can only
    raise a repo. The stored part is ranked once per index change (fleet/views/ranking.py), so a request
    costs one pass, not a decode of every record. The entries are shared with that table: read them, and
    copy (`dict(entry)`) before changing one.
    """
    extra: dict[str, list[dict]] = {}
    for source in extra_sources:
        for path, reasons in source(index).items():
            extra.setdefault(path, []).extend(reasons)
    entries = []
    for ranked in rows_of(index).ranked(index, _entry, _clean):
        added = extra.get(ranked.entry["path"])
        if added:
            reasons = sorted(ranked.own_reasons + added, key=lambda r: -r["score"])
            entries.append(_with_reasons(ranked.entry, reasons))
        elif include_clean or ranked.stored_score > 0:
            entries.append(ranked.entry)
    if extra:
        entries.sort(key=sort_key)
    return entries[:limit] if limit else entries


def _clean() -> dict:
    return reason("clean", "clean and in sync", "nothing to do")


def _with_reasons(entry: dict, reasons: list[dict]) -> dict:
    top = reasons[0]
    return {**entry, "score": top["score"], "status": top["code"], "summary": top["summary"],
            "next_step": top["next_step"], "reasons": reasons}


def _entry(row: dict, reasons: list[dict]) -> dict:
    return _with_reasons({
        "id": row["id"], "name": row["name"], "path": row["path"], "root": row["root"],
        "branch": row["branch"], "head": row["head"], "ahead": row["ahead"], "behind": row["behind"],
        "dirty": (row["staged"] or 0) + (row["unstaged"] or 0) + (row["untracked"] or 0),
        "conflicted": row["conflicted"], "operation": row["operation"], "last_activity": row["last_activity"],
        "error": row["error"],
    }, reasons)
