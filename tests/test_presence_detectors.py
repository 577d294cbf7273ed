"""Each presence detector against its agent's documented files in a fake HOME, real repos built with git."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from fleet.presence import (amp, claude, cline, codex, continuedev, copilot, cursor, editors, gemini, goose,
                            opencode, qwen, traces)
from fleet.procinfo import process_start
from tests.fleets import presence as fx
from tests.fleets.gitbuild import git, init_repo

NOW = time.time()
FRESH = NOW - 30          # inside the working window
QUIET = NOW - 600         # recent, not working
STALE = NOW - 3600        # gone


@pytest.fixture
def fleet(tmp_path: Path) -> dict:
    alpha = init_repo(tmp_path / "src" / "alpha")
    beta = init_repo(tmp_path / "src" / "beta")
    nested = alpha / "wt" / "feature"
    git(alpha, "worktree", "add", "-q", "-b", "feature", str(nested))
    outside = tmp_path / "elsewhere" / "alpha"
    outside.mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    return {"alpha": str(alpha), "beta": str(beta), "nested": str(nested), "outside": str(outside),
            "home": home, "repos": [str(alpha), str(beta), str(nested)]}


def one(sightings, **match):
    hits = [s for s in sightings if all(getattr(s, k) == v for k, v in match.items())]
    assert len(hits) == 1, (match, sightings)
    return hits[0]


def test_claude_transcript_reads_cwd_branch_tool_and_files_inside_the_repo_only(fleet):
    home, alpha = fleet["home"], fleet["alpha"]
    fx.claude_transcript(home, "-any-folder-name", os.path.join(alpha, "src"), at=FRESH, branch="feature-x",
                         tools=[("Read", {"file_path": "/etc/hosts"}),
                                ("Write", {"file_path": os.path.join(alpha, "src/new.py")}),
                                ("Edit", {"file_path": os.path.join(alpha, "src/app.py")})])
    # The folder name decodes to alpha, but the records say the session ran outside the fleet.
    fx.claude_transcript(home, alpha.replace("/", "-"), fleet["outside"], at=FRESH, name="s2")
    fx.claude_transcript(home, "-old", fleet["beta"], at=STALE, name="s3")
    found = claude.detect(fleet["repos"], NOW, home, {})
    assert len(found) == 1
    s = found[0]
    assert (s.agent, s.repo, s.source, s.branch, s.tool) == ("claude-code", alpha, "session", "feature-x", "Edit")
    assert s.files == ("src/app.py", "src/new.py")
    assert not s.idle and s.last_activity == pytest.approx(FRESH)


def test_claude_finished_turn_is_idle_and_config_dir_is_honoured(fleet, tmp_path):
    custom = tmp_path / "claude-config"
    path = fx.claude_transcript(fleet["home"], "-p", fleet["beta"], at=FRESH, finished=True,
                                tools=[("Bash", {"command": fx.SECRET})])
    (custom / "projects").mkdir(parents=True)
    path.parent.rename(custom / "projects" / "-p")
    assert claude.detect(fleet["repos"], NOW, fleet["home"], {}) == []
    s = one(claude.detect(fleet["repos"], NOW, fleet["home"], {"CLAUDE_CONFIG_DIR": str(custom)}),
            repo=fleet["beta"])
    assert s.idle and s.tool == "Bash" and s.files == ()


def test_nested_worktree_wins_over_its_parent(fleet):
    fx.claude_transcript(fleet["home"], "-n", os.path.join(fleet["nested"], "pkg"), at=FRESH,
                         tools=[("Edit", {"file_path": os.path.join(fleet["nested"], "pkg/a.py")})])
    s = one(claude.detect(fleet["repos"], NOW, fleet["home"], {}), agent="claude-code")
    assert s.repo == fleet["nested"] and s.files == ("pkg/a.py",)


def test_claude_status_file_needs_a_live_pid_with_matching_start(fleet):
    root = fleet["home"] / ".claude"
    me = os.getpid()
    fx.claude_status(root, me, fleet["alpha"], status="busy", proc_start=process_start(me), at=QUIET)
    s = one(claude.detect(fleet["repos"], NOW, fleet["home"], {}), source="session")
    assert (s.pid, s.alive, s.busy, s.repo) == (me, True, True, fleet["alpha"])
    fx.claude_status(root, me, fleet["alpha"], status="busy", proc_start=12345, at=QUIET)   # pid reused
    assert claude.detect(fleet["repos"], NOW, fleet["home"], {}) == []
    dead = 4_194_000
    (root / "sessions" / f"{me}.json").unlink()
    fx.claude_status(root, dead, fleet["alpha"], status="busy", proc_start=1, at=FRESH)
    (root / "sessions" / "pid-77.json").write_text('{"session_id": "x", "cwd": "/"}')
    assert claude.detect(fleet["repos"], NOW, fleet["home"], {}) == []


def test_codex_rollout_cwd_branch_patch_files_and_turn_end(fleet, tmp_path):
    codex_home = tmp_path / "codex-home"
    fx.codex_rollout(codex_home, fleet["beta"], at=FRESH, branch="topic", done=True,
                     patch_files=["lib/x.py", "../escape.txt", "/etc/passwd"])
    fx.codex_rollout(codex_home, fleet["nested"], at=FRESH, branch="feature", done=False,
                     patch_files=["pkg/y.py"], name="0002")
    fx.codex_rollout(codex_home, fleet["alpha"], at=STALE, branch="main", done=False, patch_files=[], name="0003")
    found = codex.detect(fleet["repos"], NOW, fleet["home"], {"CODEX_HOME": str(codex_home)})
    assert len(found) == 2
    done = one(found, repo=fleet["beta"])
    assert (done.agent, done.branch, done.tool, done.files, done.idle) == ("codex", "topic", "shell", ("lib/x.py",), True)
    busy = one(found, repo=fleet["nested"])
    assert (busy.branch, busy.files, busy.idle) == ("feature", ("pkg/y.py",), False)
    assert codex.detect(fleet["repos"], NOW, fleet["home"], {}) == []        # default ~/.codex is empty


def test_gemini_maps_folders_by_marker_registry_and_legacy_hash(fleet):
    home = fleet["home"]
    fx.gemini_chat(home, "alpha", at=FRESH, project=fleet["alpha"],
                   tool_file=os.path.join(fleet["alpha"], "README.md"))
    fx.gemini_chat(home, "beta-1", at=QUIET, final=True)
    fx.gemini_registry(home, {fleet["beta"]: "beta-1"})
    fx.gemini_chat(home, fx.legacy_gemini_slug(fleet["nested"]), at=FRESH)
    fx.gemini_chat(home, "elsewhere", at=FRESH, project=fleet["outside"])
    found = gemini.detect(fleet["repos"], NOW, home, {})
    assert sorted(s.repo for s in found) == sorted([fleet["alpha"], fleet["beta"], fleet["nested"]])
    a = one(found, repo=fleet["alpha"])
    assert (a.tool, a.files, a.idle) == ("write_file", ("README.md",), False)
    assert one(found, repo=fleet["beta"]).idle


def test_qwen_claude_style_chats(fleet):
    fx.qwen_chat(fleet["home"], fleet["beta"], at=FRESH, tool_file="src/q.py")
    s = one(qwen.detect(fleet["repos"], NOW, fleet["home"], {}), agent="qwen")
    assert (s.repo, s.branch, s.tool, s.files) == (fleet["beta"], "qwen-branch", "edit", ("src/q.py",))


def test_copilot_workspace_yaml_and_events(fleet):
    fx.copilot_session(fleet["home"], fleet["alpha"], at=FRESH, branch="cop", ended=True)
    s = one(copilot.detect(fleet["repos"], NOW, fleet["home"], {}), agent="copilot")
    assert (s.repo, s.branch, s.tool, s.files, s.idle) == (fleet["alpha"], "cop", "str_replace_editor",
                                                           ("docs/guide.md",), True)


def _no_sidecars(path: Path) -> None:
    assert not Path(str(path) + "-wal").exists() and not Path(str(path) + "-shm").exists()


def test_opencode_sqlite_read_only_with_running_tool(fleet):
    db = fleet["home"] / ".local/share/opencode/opencode.db"
    fx.opencode_db(db, fleet["beta"], at=FRESH, running=True)
    before = db.read_bytes()
    s = one(opencode.detect(fleet["repos"], NOW, fleet["home"], {}), agent="opencode")
    assert (s.repo, s.tool, s.files, s.busy) == (fleet["beta"], "edit", ("pkg/mod.ts",), True)
    _no_sidecars(db)
    assert db.read_bytes() == before


def test_opencode_skips_archived_stale_and_unknown_schemas(fleet, tmp_path):
    db = fleet["home"] / ".local/share/opencode/opencode.db"
    fx.opencode_db(db, fleet["beta"], at=FRESH, running=False, archived=True)
    assert opencode.detect(fleet["repos"], NOW, fleet["home"], {}) == []
    fx.opencode_db(db.with_name("opencode-beta.db"), fleet["alpha"], at=STALE, running=True)
    assert opencode.detect(fleet["repos"], NOW, fleet["home"], {}) == []
    odd = tmp_path / "odd.db"
    fx.sqlite_store(odd, ["CREATE TABLE session (id TEXT, dir TEXT)"], [], at=FRESH)
    assert opencode.detect(fleet["repos"], NOW, fleet["home"], {"OPENCODE_DB": str(odd)}) == []
    (tmp_path / "junk.db").write_bytes(b"not a database at all")
    assert opencode.detect(fleet["repos"], NOW, fleet["home"], {"OPENCODE_DB": str(tmp_path / "junk.db")}) == []


def test_sqlite_store_with_wal_but_no_shm_is_not_opened(fleet):
    db = fleet["home"] / ".local/share/opencode/opencode.db"
    fx.opencode_db(db, fleet["beta"], at=FRESH, running=True)
    Path(str(db) + "-wal").write_bytes(b"")
    assert opencode.detect(fleet["repos"], NOW, fleet["home"], {}) == []
    assert not Path(str(db) + "-shm").exists()


def test_goose_sqlite_and_legacy_jsonl(fleet):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(FRESH))
    sessions = fleet["home"] / ".local/share/goose/sessions"
    fx.sqlite_store(sessions / "sessions.db", [
        "CREATE TABLE sessions (id TEXT, name TEXT, working_dir TEXT, created_at TEXT, updated_at TEXT)"],
        [("INSERT INTO sessions VALUES (?,?,?,?,?)", ("1", fx.SECRET, fleet["alpha"], stamp, stamp)),
         ("INSERT INTO sessions VALUES (?,?,?,?,?)", ("2", fx.SECRET, fleet["beta"], "2020-01-01 00:00:00",
                                                      "2020-01-01 00:00:00"))], at=FRESH)
    fx.jsonl(sessions / "old.jsonl", [{"working_dir": fleet["nested"], "description": fx.SECRET}], at=QUIET)
    found = goose.detect(fleet["repos"], NOW, fleet["home"], {})
    assert sorted(s.repo for s in found) == sorted([fleet["alpha"], fleet["nested"]])
    assert one(found, repo=fleet["alpha"]).last_activity == pytest.approx(FRESH, abs=1)


def test_cline_live_session_is_open(fleet):
    db = fleet["home"] / ".cline/data/db/sessions.db"
    fx.sqlite_store(db, ["CREATE TABLE sessions (id TEXT, cwd TEXT, workspace_root TEXT, updated_at INTEGER,"
                         " ended_at INTEGER, pid INTEGER)"],
                    [("INSERT INTO sessions VALUES (?,?,?,?,?,?)",
                      ("a", fleet["beta"], fleet["beta"], int(QUIET * 1000), None, os.getpid())),
                     ("INSERT INTO sessions VALUES (?,?,?,?,?,?)",
                      ("b", fleet["alpha"], fleet["alpha"], int(STALE * 1000), int(STALE * 1000), 4_194_000))],
                    at=FRESH)
    s = one(cline.detect(fleet["repos"], NOW, fleet["home"], {}), agent="cline")
    assert (s.repo, s.alive, s.pid) == (fleet["beta"], True, os.getpid())


def test_continue_amp_and_cursor_cli(fleet):
    home = fleet["home"]
    sessions = home / ".continue/sessions"
    sessions.mkdir(parents=True)
    (sessions / "c1.json").write_text(json.dumps({"sessionId": "c1", "title": fx.SECRET,
                                                  "workspaceDirectory": "file://" + fleet["alpha"],
                                                  "history": [{"message": fx.SECRET}] * 50}))
    (sessions / "sessions.json").write_text("[]")
    fx.touch(sessions / "c1.json", FRESH)
    threads = home / ".local/share/amp/threads"
    threads.mkdir(parents=True)
    (threads / "T-1.json").write_text(json.dumps({
        "id": "T-1", "messages": [{"content": fx.SECRET, "uri": "file:///etc"}],
        "env": {"initial": {"trees": [{"displayName": "beta", "uri": "file://" + fleet["beta"]}]}}}))
    fx.touch(threads / "T-1.json", FRESH)
    chat = home / ".cursor/chats/h1/c1"
    chat.mkdir(parents=True)
    (chat / "meta.json").write_text(json.dumps({"cwd": fleet["nested"], "updatedAtMs": int(FRESH * 1000)}))
    fx.touch(chat / "meta.json", FRESH)
    assert one(continuedev.detect(fleet["repos"], NOW, home, {}), agent="continue").repo == fleet["alpha"]
    assert [s.repo for s in amp.detect(fleet["repos"], NOW, home, {})] == [fleet["beta"]]
    assert one(cursor.detect(fleet["repos"], NOW, home, {}), agent="cursor-agent").repo == fleet["nested"]


def test_editor_workspace_storage(fleet):
    config = fleet["home"] / ".config"
    chat_ws = config / "Cursor/User/workspaceStorage/aaa"
    (chat_ws / "chatSessions").mkdir(parents=True)
    (chat_ws / "workspace.json").write_text(json.dumps({"folder": "file://" + fleet["alpha"]}))
    (chat_ws / "chatSessions/x.json").write_text("{}")
    fx.touch(chat_ws / "chatSessions/x.json", FRESH)
    open_ws = config / "Code/User/workspaceStorage/bbb"
    open_ws.mkdir(parents=True)
    (open_ws / "workspace.json").write_text(json.dumps({"folder": "file://" + fleet["beta"]}))
    fx.sqlite_store(open_ws / "state.vscdb", ["CREATE TABLE ItemTable (key TEXT, value BLOB)"], [], at=QUIET)
    remote = config / "Code/User/workspaceStorage/ccc"
    remote.mkdir(parents=True)
    (remote / "workspace.json").write_text(json.dumps({"folder": "vscode-remote://ssh-remote+h" + fleet["alpha"]}))
    found = editors.detect(fleet["repos"], NOW, fleet["home"], {})
    assert one(found, agent="cursor").source == "session"
    vs = one(found, agent="vscode")
    assert (vs.repo, vs.source, vs.idle) == (fleet["beta"], "ide", True)


def test_repo_traces_aider_and_crush(fleet):
    beta = Path(fleet["beta"])
    history = beta / ".aider.chat.history.md"
    history.write_text(f"\n# aider chat started at 2026-05-01 10:00:00\n\n#### {fx.SECRET}\n\nSure.\n\n"
                       "> Applied edit to src/m.py\n> Applied edit to ../../etc/x\n")
    fx.touch(history, FRESH)
    fx.sqlite_store(Path(fleet["alpha"]) / ".crush/crush.db", ["CREATE TABLE t (x)"], [], at=QUIET)
    found = traces.detect(fleet["repos"], NOW, fleet["home"], {})
    a = one(found, agent="aider")
    assert (a.repo, a.source, a.files) == (fleet["beta"], "repo-trace", ("src/m.py",))
    assert one(found, agent="crush").repo == fleet["alpha"]


def test_malformed_and_empty_files_are_skipped(fleet):
    home = fleet["home"]
    bad = home / ".claude/projects/-x/bad.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x00\xff garbage\n[1, 2]\n\"str\"\n{\"cwd\": 5}\n")
    (home / ".gemini/tmp/g/chats").mkdir(parents=True)
    (home / ".gemini/tmp/g/chats/session-x.json").write_text("{broken")
    fx.codex_rollout(home / ".codex", fleet["beta"], at=FRESH, branch="b", done=False, patch_files=[])
    rollout = next((home / ".codex/sessions").rglob("*.jsonl"))
    rollout.write_bytes(b"\n" + rollout.read_bytes())        # first line no longer session_meta
    fx.touch(rollout, FRESH)
    for detect in (claude.detect, gemini.detect):
        assert detect(fleet["repos"], NOW, home, {}) == []
    s = one(codex.detect(fleet["repos"], NOW, home, {}), agent="codex")     # cwd still known from turn_context
    assert (s.repo, s.branch) == (fleet["beta"], None)


def test_tail_read_is_bounded_for_huge_transcripts(fleet):
    path = fx.claude_transcript(fleet["home"], "-big", fleet["alpha"], at=FRESH,
                                tools=[("Edit", {"file_path": os.path.join(fleet["alpha"], "a.py")})])
    filler = json.dumps({"type": "progress", "data": "x" * 1000}) + "\n"
    body = path.read_text()
    path.write_text(filler * 3000 + body)                    # ~3 MB, the interesting part at the end
    fx.touch(path, FRESH)
    s = one(claude.detect(fleet["repos"], NOW, fleet["home"], {}), agent="claude-code")
    assert s.tool == "Edit" and s.files == ("a.py",)


def test_sqlite_reader_refuses_to_create_files(tmp_path):
    from fleet.presence.sqlite_ro import open_readonly

    db = fx.sqlite_store(tmp_path / "x.db", ["CREATE TABLE t (a)"], [("INSERT INTO t VALUES (1)", ())], at=NOW)
    with open_readonly(db, NOW - 60) as conn:
        assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]
        with pytest.raises(sqlite3.Error):
            conn.execute("INSERT INTO t VALUES (2)")
    _no_sidecars(db)
    with open_readonly(db, NOW + 60) as conn:                  # not modified recently: not opened
        assert conn is None
