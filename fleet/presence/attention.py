"""Agent collisions as attention reasons for the radar (two agents in one repo, or on the same files)."""

from __future__ import annotations

from fleet.presence.collide import collisions
from fleet.presence.store import read_rows
from fleet.attention import reason


def collision_reasons(index) -> dict[str, list[dict]]:
    """{repo path: [agent_collision reason]} from the presence rows of the last refresh."""
    out: dict[str, list[dict]] = {}
    for item in collisions(read_rows(index)):
        out.setdefault(item["repo"], []).append(
            reason("agent_collision", item["message"], item["next_step"], agents=item["agents"], paths=item["paths"]))
    return out
