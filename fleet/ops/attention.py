"""Pending proposals as attention reasons: a repository with a proposal waiting for a person rises in the
radar to the highest rung below a conflict in progress (fleet.views.radar's extra sources)."""

from __future__ import annotations

import time

from fleet.attention import reason


def pending_reasons(index) -> dict[str, list[dict]]:
    """{repo path: [pending_proposal reason]} for proposals still pending (not yet expired)."""
    grouped: dict[str, list[tuple]] = {}
    for repo, pid, op, agent in index.proposals.pending_by_repo(time.time()):
        grouped.setdefault(repo, []).append((pid, op, agent))
    out = {}
    for repo, items in grouped.items():
        pid, op, agent = items[0]
        more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
        out[repo] = [reason("pending_proposal", f"{agent} proposes {op}{more}: waiting for approval",
                            f"review it: fleetdeck proposals show {pid}, or /proposals/{pid} on the dashboard",
                            proposals=[i[0] for i in items])]
    return out
