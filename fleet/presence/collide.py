"""Collisions between agents: two or more agents working or open in one repo, or touching overlapping files.

Pure functions over presence rows, so the radar, the dashboard and the MCP bridge all flag the same things.
Two sessions or processes of the same agent in one repo are two agents: they are named `agent#session`
(or `agent#pid`).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

LIVE = ("waiting", "working", "open")


def _overlaps(a: str, b: str) -> bool:
    """Same path, or one path inside the other (`src` and `src/app.py`)."""
    return a == b or b.startswith(a.rstrip("/") + "/") or a.startswith(b.rstrip("/") + "/")


def _actors(row: dict, several: bool = False) -> list[str]:
    """The row's agent; with several sessions of it in the repo, `agent#session` (or `#pid` per process)."""
    pids = row.get("pids") or []
    if len(pids) > 1:
        return [f"{row['agent']}#{pid}" for pid in pids]
    if several:
        return [f"{row['agent']}#{(row.get('session') or '').removeprefix('mcp:')[:8] or row.get('pid') or '?'}"]
    return [row["agent"]]


def collisions(presence_rows: list[dict]) -> list[dict]:
    """Attention items, one per repo with a collision, most severe first.

    Each item: `repo`, `kind` (`overlapping_files` or `same_repo`), `agents` (named), `paths` (the overlapping
    repo-relative paths, empty for `same_repo`), `message` and `next_step`.
    """
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for row in presence_rows:
        by_repo[row["repo"]].append(row)
    items = []
    for repo, rows in sorted(by_repo.items()):
        count = defaultdict(int)
        for row in rows:
            count[row["agent"]] += 1
        name = {id(row): _actors(row, count[row["agent"]] > 1) for row in rows}
        live = [actor for row in rows if row.get("state") in LIVE for actor in name[id(row)]]
        paths: set[str] = set()
        overlapping: set[str] = set()
        for a, b in combinations(rows, 2):     # two sessions of one agent are two agents here too
            hits = {p for x in a.get("files") or [] for y in b.get("files") or [] if _overlaps(x, y) for p in (x, y)}
            if hits:
                paths |= hits
                overlapping |= {name[id(a)][0], name[id(b)][0]}
        if paths:
            agents = sorted(overlapping)
            items.append({
                "repo": repo, "kind": "overlapping_files", "agents": agents, "paths": sorted(paths),
                "message": f"{', '.join(agents)} touched the same files: {', '.join(sorted(paths))}",
                "next_step": "let one agent finish (or split the files) before the other edits them",
            })
        elif len(live) > 1:
            agents = sorted(live)
            items.append({
                "repo": repo, "kind": "same_repo", "agents": agents, "paths": [],
                "message": f"{len(agents)} agents are active in this repo: {', '.join(agents)}",
                "next_step": "give each agent its own worktree, or pause one",
            })
    items.sort(key=lambda item: (item["kind"] != "overlapping_files", item["repo"]))
    return items
