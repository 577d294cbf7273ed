"""Presence through the index: refresh_presence, the MCP bridge's records, privacy of the stored bytes, CLI."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.index.store import open_index
from fleet.presence import collisions, presence, record_bridge_activity, refresh_presence
from fleet.index.scan import scan
from tests.fleets import presence as fx
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import git, init_repo


@pytest.fixture
def world(tmp_path: Path, db_path: Path):
    root = tmp_path / "code"
    alpha = init_repo(root / "alpha")
    git(alpha, "checkout", "-q", "-b", "feature")
    beta = init_repo(root / "beta")
    home = tmp_path / "home"
    home.mkdir()
    index = open_index(db_path)
    scan(index, [str(root)])
    yield {"index": index, "alpha": os.path.realpath(alpha), "beta": os.path.realpath(beta), "home": home,
           "db": db_path}
    index.close()


def _fixtures(w, now):
    fx.claude_transcript(w["home"], "-a", os.path.join(w["alpha"], "src"), at=now - 20, branch="feature",
                         tools=[("Edit", {"file_path": os.path.join(w["alpha"], "src/app.py")})])
    fx.codex_rollout(w["home"] / ".codex", w["alpha"], at=now - 30, branch="feature", done=False,
                     patch_files=["src/app.py"])
    fx.gemini_chat(w["home"], "beta", at=now - 400, project=w["beta"], final=True)
    fx.opencode_db(w["home"] / ".local/share/opencode/opencode.db", w["beta"], at=now - 50, running=False)


def test_refresh_stores_merged_rows_and_replaces_old_ones(world):
    now = time.time()
    _fixtures(world, now)
    rows = refresh_presence(world["index"], now=now, home=world["home"], environ={})
    got = {(r["agent"], r["repo"]): r for r in rows}
    assert set(got) == {("claude-code", world["alpha"]), ("codex", world["alpha"]),
                        ("gemini", world["beta"]), ("opencode", world["beta"])}
    claude = got[("claude-code", world["alpha"])]
    assert (claude["state"], claude["branch"], claude["tool"], claude["files"]) == (
        "working", "feature", "Edit", ["src/app.py"])
    assert claude["repo_name"] == "alpha" and claude["repo_id"] == world["index"].repo(world["alpha"])["id"]
    # gemini has no branch of its own: the index's branch fills in
    assert got[("gemini", world["beta"])]["branch"] == "main"
    assert got[("gemini", world["beta"])]["state"] == "recent"
    assert presence(world["index"]) == rows
    assert [c["kind"] for c in collisions(rows)] == ["overlapping_files"]
    # 20 minutes later everything has aged out, and the stored rows say so
    assert refresh_presence(world["index"], now=now + 1200, home=world["home"], environ={}) == []
    assert presence(world["index"]) == []


def test_index_never_holds_prompts_or_contents(world):
    now = time.time()
    _fixtures(world, now)
    record_bridge_activity(world["index"], "codex-mcp-client", world["beta"], "repo.status",
                           [os.path.join(world["beta"], "x.py")], now=now)
    refresh_presence(world["index"], now=now, home=world["home"], environ={})
    needle = fx.SECRET.encode()
    for suffix in ("", "-wal"):
        path = Path(str(world["db"]) + suffix)
        if path.exists():
            assert needle not in path.read_bytes()
            assert b"PROMPT-SECRET" not in path.read_bytes()


def test_bridge_records_its_client_and_survives_refreshes(world):
    now = time.time()
    row = record_bridge_activity(world["index"], "Codex-MCP-Client", os.path.join(world["alpha"], "src"),
                                 "repo.changes\x1b[31m", [os.path.join(world["alpha"], "src/app.py"), "/etc/hosts",
                                                          "lib/b.py"], now=now)
    assert (row["agent"], row["repo"], row["state"], row["sources"], row["tool"]) == (
        "codex", world["alpha"], "working", ["mcp"], "repo.changes[31m")
    assert row["files"] == ["src/app.py", "lib/b.py"]
    assert presence(world["index"])[0]["agent"] == "codex"
    rows = refresh_presence(world["index"], now=now + 60, home=world["home"], environ={})
    assert [(r["agent"], r["state"], r["sources"]) for r in rows] == [("codex", "working", ["mcp"])]
    assert [(r["agent"], r["state"]) for r in
            refresh_presence(world["index"], now=now + 600, home=world["home"], environ={})] == [("codex", "recent")]
    assert refresh_presence(world["index"], now=now + 1000, home=world["home"], environ={}) == []


def test_bridge_refuses_paths_outside_the_fleet(world, tmp_path):
    with pytest.raises(FleetError) as err:
        record_bridge_activity(world["index"], "claude-code", str(tmp_path), "fleet.repos")
    assert err.value.code == "REPO_NOT_IN_FLEET"
    assert presence(world["index"]) == []


def test_client_names_map_to_agent_ids():
    from fleet.presence import agent_id

    assert agent_id("codex-mcp-client") == "codex"
    assert agent_id("codexample") == "codexample"
    assert agent_id("claude-code") == "claude-code"
    assert agent_id("Visual-Studio-Code") == "vscode"
    assert agent_id("  weird name/../x\n") == "weird-name-..-x"
    assert agent_id("") == "unknown"


def test_cli_presence_json_and_table(world):
    now = time.time()
    _fixtures(world, now)
    env = {"HOME": str(world["home"]), "FLEETDECK_DB": str(world["db"]), "CODEX_HOME": None, "CLAUDE_CONFIG_DIR": None}
    out = run_cli("presence", "--json", env=env, text=False, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {(a["agent"], a["state"]) for a in doc["agents"]} >= {("claude-code", "working"), ("codex", "working")}
    assert doc["collisions"][0]["agents"] == ["claude-code", "codex"]
    table = run_cli("presence", env=env, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "claude-code" in table.stdout and "working" in table.stdout and "collision" in table.stdout
