"""The dashboard's data logic in fleet/: queue filters and counts, index freshness, the reflog timeline, the
demo fleet, and the `serve` command's refusals. Real repos, git CLI as the oracle."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from fleet.demo import build_demo_fleet
from fleet.index.freshness import REVERIFY_DONE_SHOWN_S, STALE_AFTER, freshness, reverify_progress, watcher_state
from fleet.index.store import open_index
from fleet.views.queue import MAX_PER_PAGE, QueueFilter, attention_queue
from fleet.timespec import iso
from fleet.index.scan import refresh_repo, scan
from fleet.views.detail import timeline
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import git, init_repo
from tests.fleets.repo_states import amend_and_reset


# --- queue ----------------------------------------------------------------------------------------------------

def test_filter_from_params_clamps_and_drops_unknown_values() -> None:
    f = QueueFilter.from_params({"reason": "nonsense", "page": "-4", "per_page": "99999", "q": "  x  ",
                                 "attention": "on"})
    assert (f.reason, f.page, f.per_page, f.q, f.attention_only) == ("", 1, MAX_PER_PAGE, "x", True)
    assert QueueFilter.from_params({"page": "abc"}).page == 1
    assert QueueFilter.from_params({"reason": "conflict", "root": "/r"}).as_params() == {"reason": "conflict",
                                                                                           "root": "/r"}


def test_counts_cover_the_whole_fleet_whatever_the_filter(dashboard_fleet) -> None:
    index, _ = dashboard_fleet
    data = attention_queue(index, QueueFilter(reason="conflict"))
    assert data["matched"] == 1
    assert data["counts"] == {"repos": 4, "attention": 3, "conflicts": 1, "diverged": 1, "dirty": 1,
                              "unpushed": 1, "operations": 1, "agents_working": 0}


def test_agent_filter_and_count_use_presence_rows(dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    dirty = str(repos["dirty"].resolve())
    rows = [{"agent": "claude-code", "repo": dirty, "state": "working"},
            {"agent": "codex", "repo": dirty, "state": "recent"}]
    data = attention_queue(index, QueueFilter(agent="codex"), rows)
    assert [e["name"] for e in data["entries"]] == ["dirty"]
    assert data["entries"][0]["agents"] == [{"agent": "claude-code", "state": "working"},
                                            {"agent": "codex", "state": "recent"}]
    assert data["counts"]["agents_working"] == 1 and data["agents"] == ["claude-code", "codex"]


def test_search_matches_name_branch_and_reason_text_case_insensitively(dashboard_fleet) -> None:
    index, _ = dashboard_fleet
    names = lambda q: [e["name"] for e in attention_queue(index, QueueFilter(q=q))["entries"]]  # noqa: E731
    assert names("DIRTY") == ["dirty"]
    assert names("conflicted file") == ["conflicted"]
    assert names("zzz") == []


def test_pages_never_run_past_the_end(dashboard_fleet) -> None:
    index, _ = dashboard_fleet
    data = attention_queue(index, QueueFilter(per_page=3, page=9))
    assert (data["page"], data["pages"], len(data["entries"])) == (2, 2, 1)


# --- freshness ------------------------------------------------------------------------------------------------

def _meta(index, value: dict) -> None:
    with index.write() as conn:
        conn.execute("insert or replace into meta (key, value) values ('watcher', ?)", (json.dumps(value),))


def test_watcher_state_reads_the_watchers_meta_record(dashboard_fleet) -> None:
    index, _ = dashboard_fleet
    now = float(int(time.time()))  # the watcher writes whole-second ISO stamps
    assert watcher_state(index, now)["state"] == "absent"
    _meta(index, {"mode": "inotify", "heartbeat_at": iso(now - 3), "repos": 4, "backlog": 0, "stopped_at": None})
    assert watcher_state(index, now) == {"state": "running", "mode": "inotify", "repos": 4, "polled": 0,
                                         "backlog": 0, "heartbeat_age_s": 3.0, "reverify": None}
    _meta(index, {"mode": "polling", "heartbeat_at": iso(now - 1), "stopped_at": None})
    assert watcher_state(index, now)["state"] == "polling"
    _meta(index, {"mode": "inotify", "heartbeat_at": iso(now - STALE_AFTER - 5), "stopped_at": None})
    assert watcher_state(index, now)["state"] == "stale"
    _meta(index, {"mode": "inotify", "heartbeat_at": iso(now), "stopped_at": iso(now)})
    assert watcher_state(index, now)["state"] == "stopped"


def test_watcher_state_carries_the_start_up_recheck_while_it_runs_and_for_a_while_after(dashboard_fleet) -> None:
    index, _ = dashboard_fleet
    now = float(int(time.time()))
    check = {"total": 1000, "done": 340, "figures_from": iso(now - 600), "started_at": iso(now - 5),
             "finished_at": None}
    _meta(index, {"mode": "inotify", "heartbeat_at": iso(now), "stopped_at": None, "reverify": check})
    assert watcher_state(index, now)["reverify"] == {**check, "running": True}
    done = {**check, "done": 1000, "finished_at": iso(now - 10)}
    _meta(index, {"mode": "inotify", "heartbeat_at": iso(now), "stopped_at": None, "reverify": done})
    assert watcher_state(index, now)["reverify"] == {**done, "running": False}
    assert watcher_state(index, now + REVERIFY_DONE_SHOWN_S)["reverify"] is None  # heartbeat stale by then too
    assert reverify_progress({"reverify": done}, now + REVERIFY_DONE_SHOWN_S) is None
    _meta(index, {"mode": "inotify", "heartbeat_at": iso(now), "stopped_at": iso(now), "reverify": check})
    assert watcher_state(index, now)["reverify"] is None  # a stopped watcher's re-check is not going on


def test_freshness_reports_the_newest_scan_and_the_change_counter(dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    index.conn.execute("update repos set scanned_at = '2026-01-01T00:00:00Z'")  # scanned in an earlier second
    before = freshness(index)
    refresh_repo(index, str(repos["clean"].resolve()))
    after = freshness(index)
    assert after["generation"] > before["generation"]
    assert after["indexed_at"] > before["indexed_at"]
    assert after["indexed_at"] == index.conn.execute("select max(scanned_at) from repos").fetchone()[0]


# --- event timeline -----------------------------------------------------------------------------------------

def test_timeline_reads_events_and_flags_rewrites_and_recoverable_commits_like_git(tmp_path: Path) -> None:
    root = tmp_path / "root"
    repo = init_repo(root / "r", commits=2)
    amended_away, reset_away = amend_and_reset(repo)
    with open_index(tmp_path / "f.db") as index:
        scan(index, [str(root)])
        repo_id = index.repo("r")["id"]
        events = timeline(index, repo_id)
        # one event per move: git's HEAD reflog, newest first, each move named by the branch it moved
        head_log = git(repo, "reflog", "show", "--format=%H %gs", "HEAD").splitlines()
        assert [f"{e['new_sha']} {e['message']}" for e in events] == head_log
        assert {e["ref"] for e in events} == {"refs/heads/main"}
        rewrites = {e["old_sha"] for e in events if e["rewrote"]}
        assert rewrites == {amended_away, reset_away}
        for sha in rewrites:  # the oracle: git says the old tips are not ancestors of HEAD
            assert git(repo, "merge-base", "--is-ancestor", sha, "HEAD", check=False) == ""
        unreachable = set(git(repo, "rev-list", amended_away, reset_away, "--not", "--all").split())
        assert {e["recoverable"] for e in events if e["recoverable"]} == unreachable == {amended_away, reset_away}
        git(repo, "branch", "rescue", reset_away)
        again = timeline(index, repo_id)
        assert {e["recoverable"] for e in again if e["recoverable"]} == {amended_away}
        assert {e["old_sha"] for e in again if e["rewrote"]} == rewrites
        git(repo, "reflog", "expire", "--expire=now", "--all")
        assert timeline(index, repo_id) == again  # the index remembers what git forgot


# --- demo fleet ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_demo_fleet_has_every_interesting_state(tmp_path: Path) -> None:
    roots = build_demo_fleet(tmp_path / "demo")
    with open_index(tmp_path / "demo.db") as index:
        scan(index, roots)
        entries = {e["name"]: e for e in attention_queue(index, QueueFilter(per_page=100))["entries"]}
        codes = {name: {r["code"] for r in e["reasons"]} for name, e in entries.items()}
        assert "conflict" in codes["api-server"] and entries["api-server"]["operation"] == "merge"
        assert entries["web-frontend"]["operation"] == "rebase"
        assert {"diverged", "predicted_conflict"} <= codes["billing"]
        assert "local_changes" in codes["mobile-app"]
        assert codes["cli-tools"] == {"ahead"} and codes["infra"] == {"behind"}
        assert "stale_stash" in codes["ml-notebooks"] and "worktree" in codes["platform"]
        assert "submodule" in codes["monorepo"] and codes["scratch"] == {"no_upstream"}
        assert codes["design-system"] == {"clean"} and codes["dotfiles"] == {"ahead"}  # rebased, not pushed yet
        events = timeline(index, index.repo("cli-tools")["id"])
        assert len([e for e in events if e["recoverable"]]) == 2
    api = Path(roots[0]) / "api-server"
    assert git(api, "diff", "--name-only", "--diff-filter=U").split() == ["app.py"]
    rebase = Path(roots[0]) / "web-frontend" / ".git" / "rebase-merge"
    assert rebase.is_dir()
    assert git(Path(roots[0]) / "billing", "rev-list", "--left-right", "--count", "HEAD...@{u}").split() == ["2", "3"]
    assert git(Path(roots[1]) / "ml-notebooks", "stash", "list").count("stash@") == 2


def test_demo_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_demo_fleet(tmp_path / "x")
    assert [p.name for p in (tmp_path / "x").iterdir()] == ["keep.txt"]


# --- the serve command's refusals ---------------------------------------------------------------------------

def test_serve_refuses_a_non_loopback_host_without_allow_remote(tmp_path: Path) -> None:
    proc = subprocess.run(fleetdeck_argv("--db", str(tmp_path / "f.db"), "serve", "--host", "0.0.0.0"),
                          capture_output=True, text=True, env=fleetdeck_env(), timeout=60)
    assert proc.returncode == 1
    assert "--allow-remote" in proc.stderr and proc.stdout == ""


def test_serve_refuses_a_root_that_is_not_a_directory(tmp_path: Path) -> None:
    proc = subprocess.run(fleetdeck_argv("--db", str(tmp_path / "f.db"), "serve", str(tmp_path / "missing")),
                          capture_output=True, text=True, env=fleetdeck_env(), timeout=60)
    assert proc.returncode == 1 and "BAD_PATH" in proc.stderr
