"""Merging sightings into states, and collisions between agents (pure functions, controlled clocks)."""

from __future__ import annotations

from fleet.presence import Sighting, Thresholds, collisions, merge

NOW = 1_800_000_000.0
REPO = "/src/alpha"


def s(**kw) -> Sighting:
    base = {"agent": "codex", "repo": REPO, "source": "session"}
    return Sighting(**{**base, **kw})


def states(sightings, now):
    return [(r["agent"], r["state"]) for r in merge(sightings, now)]


def test_working_then_recent_then_gone_as_time_passes():
    seen = [s(last_activity=NOW, tool="shell", files=("a.py",), branch="topic")]
    row = merge(seen, NOW + 10)[0]
    assert (row["state"], row["tool"], row["files"], row["branch"], row["sources"]) == (
        "working", "shell", ["a.py"], "topic", ["session"])
    assert row["last_activity"] == "2027-01-15T08:00:00Z"
    assert states(seen, NOW + 119) == [("codex", "working")]
    assert states(seen, NOW + 121) == [("codex", "recent")]
    assert states(seen, NOW + 899) == [("codex", "recent")]
    assert states(seen, NOW + 901) == []


def test_thresholds_are_configurable():
    seen = [s(last_activity=NOW)]
    tight = Thresholds(working=5, recent=60)
    assert merge(seen, NOW + 10, tight)[0]["state"] == "recent"
    assert merge(seen, NOW + 61, tight) == []


def test_finished_turn_is_not_working_unless_newer_activity():
    assert states([s(last_activity=NOW, idle=True)], NOW + 5) == [("codex", "recent")]
    both = [s(last_activity=NOW, idle=True), s(source="mcp", last_activity=NOW + 3)]
    assert states(both, NOW + 5) == [("codex", "working")]
    older = [s(last_activity=NOW, idle=True), s(source="process", last_activity=NOW - 3)]
    assert states(older, NOW + 5) == [("codex", "recent")]


def test_live_process_is_open_busy_child_is_working_editor_never_works():
    assert states([s(source="process", pid=7, alive=True)], NOW) == [("codex", "open")]
    assert states([s(source="process", pid=7, alive=True, busy=True)], NOW) == [("codex", "working")]
    quiet_alive = [s(source="process", pid=7, alive=True), s(last_activity=NOW - 600)]
    row = merge(quiet_alive, NOW)[0]
    assert (row["state"], row["pid"], row["sources"]) == ("open", 7, ["process", "session"])
    assert states([s(agent="cursor", source="ide", last_activity=NOW, idle=True)], NOW) == [("cursor", "recent")]


def test_rows_merge_per_agent_and_repo_and_sort_by_state_then_time():
    seen = [
        s(agent="aider", repo="/src/beta", source="repo-trace", last_activity=NOW - 300),
        s(agent="codex", last_activity=NOW - 5, files=("b.py",)),
        s(agent="codex", source="mcp", last_activity=NOW - 1, tool="repo.status", files=("a.py", "b.py")),
        s(agent="goose", repo="/src/beta", source="process", alive=True, pid=9),
        s(agent="gemini", repo="/src/beta", last_activity=NOW - 200),
    ]
    rows = merge(seen, NOW)
    assert [(r["agent"], r["state"]) for r in rows] == [
        ("codex", "working"), ("goose", "open"), ("gemini", "recent"), ("aider", "recent")]
    codex = rows[0]
    assert codex["files"] == ["a.py", "b.py"] and codex["tool"] == "repo.status"
    assert codex["sources"] == ["mcp", "session"]


def row(agent, state, files=(), repo=REPO, pids=()):
    return {"agent": agent, "repo": repo, "state": state, "files": list(files), "pids": list(pids)}


def test_collisions_two_live_agents_in_one_repo():
    items = collisions([row("codex", "working"), row("claude-code", "open"), row("aider", "recent"),
                        row("goose", "working", repo="/src/beta")])
    assert items == [{
        "repo": REPO, "kind": "same_repo", "agents": ["claude-code", "codex"], "paths": [],
        "message": "2 agents are active in this repo: claude-code, codex",
        "next_step": "give each agent its own worktree, or pause one",
    }]


def test_collisions_overlapping_files_name_agents_and_paths():
    items = collisions([row("codex", "working", ["src/app.py", "README.md"]),
                        row("aider", "recent", ["src"]),
                        row("gemini", "recent", ["docs/x.md", "src2/y.py"])])
    assert len(items) == 1
    item = items[0]
    assert (item["kind"], item["agents"], item["paths"]) == ("overlapping_files", ["aider", "codex"],
                                                             ["src", "src/app.py"])
    assert "src/app.py" in item["message"]


def test_no_collision_for_one_agent_or_only_recent_agents_or_disjoint_files():
    assert collisions([row("codex", "working", ["a.py"])]) == []
    assert collisions([row("codex", "recent", ["a.py"]), row("aider", "recent", ["b.py"])]) == []
    assert collisions([]) == []


def test_two_processes_of_the_same_agent_collide():
    items = collisions([row("claude-code", "open", pids=[11, 12])])
    assert items[0]["agents"] == ["claude-code#11", "claude-code#12"]
