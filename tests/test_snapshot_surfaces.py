"""Discarded work where the person and the agents look: the attention queue (with the restore command), the
digest, `fleetdeck lost` and MCP `repo.lost` / `fleet.lost`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from fleet.views.digest import digest
from fleet.views.queue import REASON_SOURCES
from fleet.views.radar import radar
from mcp_bridge.server import build_server
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import git, init_repo, write
from tests.fleets.mcp_fleet import call, ok


@pytest.fixture
def discarded(tmp_path: Path) -> dict:
    root = tmp_path / "fleet"
    repo = init_repo(root / "api-server")
    write(repo / "handler.py", "def handle():\n    return 1\n")
    git(repo, "add", "handler.py")
    git(repo, "commit", "-q", "-m", "handler")
    init_repo(root / "other")
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    write(repo / "handler.py", "def handle():\n    return 2\n    # three\n    # more lines\n")
    before = take(tree, db, "hook:claude-code", agents=["claude-code"], command="git reset --hard")
    git(repo, "reset", "-q", "--hard")
    after = take(tree, db, "sweep", agents=["claude-code"])
    assert after["discarded"]["files"] == ["handler.py"]
    return {"root": root, "repo": repo, "db": db, "before": before, "after": after}


def test_the_queue_raises_the_repo_with_the_restore_command(discarded) -> None:
    with open_index(discarded["db"]) as index:
        entries = {e["name"]: e for e in radar(index, extra_sources=REASON_SOURCES)}
    top = entries["api-server"]
    assert top["status"] == "discarded"
    assert top["summary"].startswith("Uncommitted work discarded: 1 file, 3 lines at ")
    assert "while claude-code was working" in top["summary"]
    assert top["next_step"] == f"restore it: `fleetdeck restore api-server {discarded['before']['id'][:12]}`"
    assert "other" not in entries or entries["other"]["status"] != "discarded"


def test_the_digest_lists_the_discard_as_its_own_kind(discarded) -> None:
    with open_index(discarded["db"]) as index:
        found = digest(index, "1h")
    [event] = [e for e in found["events"] if e["kind"] == "discarded"]
    assert event["repo"] == "api-server" and event["identity"] == "claude-code"
    assert event["message"].startswith("Uncommitted work discarded: 1 file")
    assert event["old_sha"] == discarded["before"]["id"] and event["new_sha"] == discarded["after"]["id"]


def test_fleetdeck_lost_lists_discarded_work_beside_dropped_commits(discarded) -> None:
    done = run_cli("lost", "--json", db=discarded["db"])
    assert done.returncode == 0, done.stderr
    [item] = json.loads(done.stdout)["discarded"]
    assert item["repo"] == "api-server" and item["files"] == ["handler.py"] and item["lines"] == 3
    assert item["command"] is None and item["restore_from"] == discarded["before"]["id"]
    text = run_cli("lost", db=discarded["db"]).stdout
    assert f"restore: fleetdeck restore api-server {discarded['before']['id'][:12]}" in text


async def test_agents_find_what_they_discarded_over_mcp(discarded) -> None:
    server = build_server(str(discarded["db"]))
    data = ok(await call(server, "repo.lost", {"repo": "api-server"}))
    assert data["discarded_count"] == 1 and data["discarded"][0]["agents"] == ["claude-code"]
    assert data["discarded"][0]["restore"].startswith("fleetdeck restore api-server ")
    fleet_wide = ok(await call(server, "fleet.lost", {}))
    assert [d["repo"] for d in fleet_wide["discarded"]] == ["api-server"]


async def test_agents_snapshot_list_and_diff_over_mcp(discarded) -> None:
    server = build_server(str(discarded["db"]))
    repo = discarded["repo"]
    write(repo / "handler.py", "def handle():\n    return 3\n")
    made = ok(await call(server, "snapshot.take", {"repo": "api-server"}))
    assert made["trigger"] == "mcp" and made["files"] == 1 and not made["unchanged"]
    again = ok(await call(server, "snapshot.take", {"repo": "api-server"}))
    assert again["unchanged"] and again["id"] == made["id"]
    listed = ok(await call(server, "snapshot.list", {"repo": "api-server"}))
    assert [s["trigger"] for s in listed["snapshots"]] == ["mcp", "sweep", "hook:claude-code"]
    assert listed["snapshots"][1]["discarded"] is True and listed["snapshot_count"] == 3
    assert ok(await call(server, "snapshot.list", {"repo": "api-server", "path": "nothing-here"}))["snapshots"] == []
    text = ok(await call(server, "snapshot.diff", {"repo": "api-server", "from": discarded["before"]["id"][:10],
                                                   "to": made["id"]}))
    assert "-    return 2" in text["patch"] and "+    return 3" in text["patch"] and not text["truncated"]
    write(repo / "handler.py", "def handle():\n    return 4\n")
    now = ok(await call(server, "snapshot.diff", {"repo": "api-server", "from": made["id"]}))
    assert "+    return 4" in now["patch"]
    bad = await call(server, "snapshot.diff", {"repo": "api-server", "from": "zzzz"})
    assert bad.is_error
    assert (repo / "handler.py").read_text() == "def handle():\n    return 4\n"    # nothing in the repo changed


async def test_a_snapshot_names_the_callers_identity_not_its_declared_name(discarded) -> None:
    """Attack: a client with no credential declares itself `claude-code`, discards work and snapshots it:
    the discarded work must not read "while claude-code was working"."""
    from mcp import Client
    from mcp.types import Implementation

    server = build_server(str(discarded["db"]))
    repo = discarded["repo"]
    write(repo / "handler.py", "def handle():\n    return 5\n")
    async with Client(server, client_info=Implementation(name="claude-code", version="1")) as client:
        ok(await client.call_tool("snapshot.take", {"repo": "api-server"}))
        listed = ok(await client.call_tool("snapshot.list", {"repo": "api-server"}))
    assert listed["snapshots"][0]["agents"] == ["unknown:claude-code"]


async def test_an_agent_proposes_the_discarded_work_back_and_a_person_approves(discarded) -> None:
    """`operation.preview.restore_snapshot` is a proposal like every write: nothing changes until a person
    approves; then the bytes are back."""
    server = build_server(str(discarded["db"]))
    repo = discarded["repo"]
    made = ok(await call(server, "operation.preview.restore_snapshot",
                         {"repo": "api-server", "snapshot": discarded["before"]["id"][:12],
                          "paths": ["handler.py"], "reason": "give back what the reset threw away"}))
    assert made["status"] == "pending" and made["op"] == "restore_snapshot" and made["risk"] == "medium"
    assert made["preview"]["files"] == [{"path": "handler.py", "kind": "restore"}]
    assert (repo / "handler.py").read_text() == "def handle():\n    return 1\n"
    from fleet.ops import service

    with open_index(discarded["db"]) as index:
        done = service.approve(index, made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert (repo / "handler.py").read_text() == "def handle():\n    return 2\n    # three\n    # more lines\n"
