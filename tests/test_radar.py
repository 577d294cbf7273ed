"""The attention ladder as a pure function, and the queue order from a real index."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from fleet.index.store import open_index
from fleet.views.radar import radar
from fleet.attention import SCORES, attention
from fleet.index.scan import scan
from tests.fleets.gitbuild import commit_file, git, git_env, init_repo, with_upstream, write


def base(**over) -> dict:
    rec = {"branch": "main", "head": "a" * 40, "upstream": "origin/main", "ahead": 0, "behind": 0,
           "staged": 0, "unstaged": 0, "untracked": 0, "conflicted": 0, "operation": None,
           "branches": [], "worktrees": [], "submodules": [], "stash_list": [], "error": None}
    rec.update(over)
    return rec


def codes(rec: dict) -> list[str]:
    return [r["code"] for r in attention(rec)]


def test_ladder_order_follows_design():
    order = ["conflict", "predicted_conflict", "diverged", "operation", "local_changes", "behind", "ahead",
             "stale_stash", "worktree", "submodule", "no_upstream", "clean"]
    assert [SCORES[c] for c in order] == sorted((SCORES[c] for c in order), reverse=True)


def test_each_reason_has_summary_and_next_step():
    old = (datetime.now(timezone.utc) - timedelta(days=9)).isoformat()
    rec = base(conflicted=2, operation="merge", ahead=1, behind=2, untracked=3,
               predicted_conflicts={"clean": False, "paths": ["a.txt"]},
               stash_list=[{"index": 0, "sha": "b" * 40, "message": "wip", "at": old}],
               worktrees=[{"path": "/x", "prunable": True, "locked": False}],
               submodules=[{"path": "lib", "state": "drifted"}])
    reasons = attention(rec)
    assert [r["code"] for r in reasons] == ["conflict", "predicted_conflict", "diverged", "local_changes",
                                            "stale_stash", "worktree", "submodule"]
    assert all(r["summary"] and r["next_step"] for r in reasons)
    assert "git commit" in reasons[0]["next_step"]


def test_simple_states():
    assert codes(base()) == ["clean"]
    assert codes(base(behind=2)) == ["behind"]
    assert codes(base(ahead=2)) == ["ahead"]
    assert codes(base(upstream=None, ahead=None, behind=None)) == ["no_upstream"]
    assert codes(base(operation="rebase", operation_detail={"branch": "topic", "step": 1, "total": 3})) == ["operation"]
    assert codes(base(error="HEAD is garbage", head=None, branch=None))[0] == "broken"
    other = base(branches=[{"name": "feature", "current": False, "ahead": 3}])
    assert codes(other) == ["ahead"]


def test_queue_orders_conflict_above_dirty_above_behind(tmp_path: Path):
    root = tmp_path / "root"
    clean = init_repo(root / "a-clean", commits=1)
    git(clean, "remote", "add", "origin", str(clean))  # no upstream configured for main → no_upstream
    dirty = init_repo(root / "b-dirty", commits=1)
    write(dirty / "x.txt", "x\n")
    conflict = init_repo(root / "c-conflict", commits=1)
    commit_file(conflict, "f.txt", "base\n")
    git(conflict, "checkout", "-q", "-b", "other")
    commit_file(conflict, "f.txt", "other\n")
    git(conflict, "checkout", "-q", "main")
    commit_file(conflict, "f.txt", "main\n")
    git(conflict, "merge", "other", check=False)
    with_upstream(tmp_path / "side", "behind", behind=1)  # makes the remote d-synced clones
    git(tmp_path, "clone", "-q", str(tmp_path / "side" / "behind-remote.git"), str(root / "d-synced"))
    index = open_index(tmp_path / "f.db")
    scan(index, [str(root)])
    names = [e["name"] for e in radar(index)]
    assert names.index("c-conflict") < names.index("b-dirty") < names.index("a-clean")
    assert "d-synced" not in names  # clean and in sync
    assert "d-synced" in [e["name"] for e in radar(index, include_clean=True)]
    assert radar(index, limit=1)[0]["name"] == "c-conflict"
    index.close()


def test_agent_collisions_raise_a_repo_in_the_queue(tmp_path: Path):
    from fleet.presence.attention import collision_reasons
    from fleet.presence.store import replace_rows

    root = tmp_path / "root"
    init_repo(root / "calm", commits=1)
    busy = init_repo(root / "busy", commits=1)
    write(root / "calm" / "x.txt", "dirty\n")  # local changes: 80
    index = open_index(tmp_path / "f.db")
    scan(index, [str(root)])
    assert [e["name"] for e in radar(index)][0] == "calm"
    rec = index.repo("busy")
    rows = [{"agent": agent, "repo": rec["path"], "repo_id": rec["id"], "repo_name": "busy", "state": "working",
             "sources": ["process"], "branch": "main", "tool": "Edit", "files": ["src/app.py"], "pid": None,
             "pids": [], "last_activity": "2026-01-01T00:00:00Z", "refreshed_at": "2026-01-01T00:00:00Z"}
            for agent in ("claude", "codex")]
    replace_rows(index, rows)
    top = radar(index, limit=1, extra_sources=(collision_reasons,))[0]
    assert top["name"] == "busy" and top["status"] == "agent_collision"
    assert top["reasons"][0]["details"]["agents"] == ["claude", "codex"]
    assert top["reasons"][0]["details"]["paths"] == ["src/app.py"]
    assert str(busy) in top["path"] or top["path"] == str(busy.resolve())
    index.close()


def _git_at(repo: Path, when: float, *args: str) -> None:
    """git with its clock at `when` (gitbuild's runs in 2025)."""
    stamp = f"@{int(when)} +0000"
    env = {**git_env(), "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_DATE": stamp}
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def test_detached_head_and_a_fresh_stash_are_not_clean(tmp_path: Path):
    root = tmp_path / "fleet"
    detached = init_repo(root / "detached", commits=2)
    git(detached, "checkout", "-q", "--detach", "HEAD~1")
    stashed = init_repo(root / "stashed", commits=1)
    write(stashed / "README.md", "put aside\n")
    _git_at(stashed, time.time() - 3600, "stash", "push", "-q", "-m", "half an idea")  # an hour ago
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(root)])
    by_name = {e["name"]: e for e in radar(index)}
    head = git(detached, "rev-parse", "HEAD").strip()
    assert git(detached, "symbolic-ref", "-q", "HEAD", check=False) == ""  # git: detached
    top = by_name["detached"]["reasons"][0]
    assert top["code"] == "detached" and head[:12] in top["summary"]
    assert top["next_step"] == f"git switch -c keep-{head[:7]} to keep what is here on a branch, or git switch main"
    assert git(stashed, "stash", "list", "--format=%gs").strip() == "On main: half an idea"
    assert by_name["stashed"]["status"] == "stash" and "half an idea" in by_name["stashed"]["summary"]
    index.close()


def test_active_is_the_last_reflog_entry_not_the_file_time(tmp_path: Path):
    """A repo whose last commit is days old reads as days old, though its reflog file was written just now
    (a clone, a copy, a demo): the time git wrote in the entry is the activity."""
    root = tmp_path / "fleet"
    repo = init_repo(root / "old", commits=1)
    three_days_ago = int(time.time()) - 3 * 86400
    _git_at(repo, three_days_ago, "commit", "-q", "--allow-empty", "-m", "old work")
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(root)])
    entry = next(e for e in radar(index, include_clean=True) if e["name"] == "old")
    when = datetime.fromisoformat(entry["last_activity"].replace("Z", "+00:00")).timestamp()
    logged = int(git(repo, "reflog", "-1", "--format=%gd", "--date=unix").split("{")[1].rstrip("}\n"))
    assert abs(when - logged) < 2 and abs(when - three_days_ago) < 2
    index.close()
