"""Events built from reflogs: checked against `git reflog` itself, rewrites, de-duplication, retention, lost work."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleet.index.events import DELETED_MESSAGE, prune_events
from fleet.index.store import open_index
from fleet.index.lost import lost_commits
from fleet.index.scan import refresh_repo, scan
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo
from tests.fleets.repo_states import busy_repo


def events(index, ref: str | None = None) -> list[dict]:
    clause, args = ("where ref = ?", [ref]) if ref else ("", [])
    cur = index.conn.execute(f"select * from events {clause} order by at, id", args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def reflog(repo: Path, ref: str) -> list[tuple[str | None, str, str]]:
    """(old, new, message) for each entry of git's reflog of `ref`, oldest first: the oracle."""
    out = git(repo, "reflog", "show", "--format=%H%x00%gs%x00%P", ref, "--")
    entries = [line.split("\0") for line in out.splitlines() if line]
    return [(None, new, msg) for new, msg, _parents in reversed(entries)]


def rev(repo: Path, what: str) -> str:
    return git(repo, "rev-parse", what).strip()


@pytest.fixture
def fleet(tmp_path: Path, db_path: Path):
    root = tmp_path / "src"
    repo = init_repo(root / "app", commits=2)
    index = open_index(db_path)
    scan(index, [str(root)])
    yield index, repo
    index.close()


def test_branch_events_match_git_reflog_and_head_duplicates_are_dropped(fleet) -> None:
    index, repo = fleet
    commit_file(repo, "b.txt", "b\n", "add b")
    git(repo, "checkout", "-q", "-b", "feature")
    commit_file(repo, "c.txt", "c\n", "add c")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    refresh_repo(index, str(repo))

    for ref in ("refs/heads/main", "refs/heads/feature"):
        ours = [(e["new_sha"], e["message"]) for e in events(index, ref)]
        assert ours == [(new, msg) for _old, new, msg in reflog(repo, ref)]
    head = [(e["new_sha"], e["message"]) for e in events(index, "HEAD")]
    branch_lines = {(new, msg) for ref in ("refs/heads/main", "refs/heads/feature")
                    for _o, new, msg in reflog(repo, ref)}
    git_head = [(new, msg) for _o, new, msg in reflog(repo, "HEAD")]
    # every HEAD movement is an event exactly once: on the branch when it moved one, on HEAD otherwise
    assert head == [entry for entry in git_head if entry not in branch_lines]
    assert [m for _n, m in head] == ["checkout: moving from main to feature", "checkout: moving from feature to main"]
    kinds = {e["message"]: e["kind"] for e in events(index)}
    assert kinds["merge feature: Merge made by the 'ort' strategy."] == "merge"
    assert kinds["branch: Created from HEAD"] == "branch"
    merge_tip = rev(repo, "HEAD")
    assert len([e for e in events(index) if e["new_sha"] == merge_tip]) == 1


def test_rewrote_for_amend_reset_rebase(fleet) -> None:
    index, repo = fleet
    before_amend = rev(repo, "HEAD")
    git(repo, "commit", "-q", "--amend", "-m", "amended")
    commit_file(repo, "x.txt", "x\n", "x")
    before_reset = rev(repo, "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "checkout", "-q", "-b", "topic")
    commit_file(repo, "t.txt", "t\n", "topic work")
    topic_before = rev(repo, "HEAD")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "m.txt", "m\n", "main work")
    git(repo, "checkout", "-q", "topic")
    git(repo, "rebase", "-q", "main")
    git(repo, "reset", "-q", "--soft", "HEAD")  # a reset that drops nothing
    refresh_repo(index, str(repo))
    rows = events(index)

    def one(kind: str, old: str, ref: str = "refs/heads/main") -> dict:
        [row] = [e for e in rows if e["kind"] == kind and e["old_sha"] == old and e["ref"] == ref]
        return row

    assert one("amend", before_amend)["rewrote"] == 1
    assert one("reset", before_reset)["rewrote"] == 1
    finish = one("rebase", topic_before, "refs/heads/topic")
    assert finish["new_sha"] == rev(repo, "topic") and finish["rewrote"] == 1
    keep = [e for e in rows if e["message"] == "reset: moving to HEAD"]
    assert keep and all(e["rewrote"] == 0 for e in keep)
    # git agrees: the old tips are not ancestors of the new ones
    for old, new in ((before_amend, one("amend", before_amend)["new_sha"]), (topic_before, rev(repo, "topic"))):
        assert subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", old, new]).returncode == 1
    assert all(e["rewrote"] == 0 for e in rows if e["kind"] == "commit")


def test_events_survive_reflog_expiry_and_pruning_is_explicit(fleet, db_path: Path) -> None:
    index, repo = fleet
    commit_file(repo, "b.txt", "b\n", "add b")
    refresh_repo(index, str(repo))
    before = events(index)
    assert len(before) == 3
    git(repo, "reflog", "expire", "--expire=now", "--all")
    assert git(repo, "reflog", "show", "main") == ""
    commit_file(repo, "c.txt", "c\n", "add c")
    refresh_repo(index, str(repo))
    after = events(index)
    assert after[:3] == before and after[3]["message"] == "commit: add c"

    cutoff_at = after[3]["at"]
    proc = run_cli("--db", str(db_path), "prune-events", "--older-than", "1s", "--json")
    assert proc.returncode == 0, proc.stderr
    assert events(index) == []  # git's fixed test clock is in the past: everything is older than 1s
    refresh_repo(index, str(repo))
    assert events(index) == [], "pruned lines must not come back on the next read"
    assert cutoff_at < int(__import__("time").time())
    bad = run_cli("--db", str(db_path), "prune-events", "--older-than", "soon")
    assert bad.returncode == 1 and "BAD_ARGUMENT" in bad.stderr


def test_prune_keeps_newer_events(fleet) -> None:
    index, repo = fleet
    rows = events(index)
    middle = rows[1]["at"]
    result = prune_events(index, 0, now=middle)
    assert result["events_deleted"] == 1
    assert [e["at"] for e in events(index)] == [e["at"] for e in rows[1:]]


def test_deleted_branch_is_an_event_and_its_unmerged_tip_is_recoverable(fleet) -> None:
    index, repo = fleet
    git(repo, "checkout", "-q", "-b", "spike")
    tip = commit_file(repo, "s.txt", "s\n", "spike idea")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "merged-one")
    refresh_repo(index, str(repo))
    git(repo, "branch", "-q", "-D", "spike")
    git(repo, "branch", "-q", "-d", "merged-one")
    refresh_repo(index, str(repo))
    deleted = [e for e in events(index) if e["message"] == DELETED_MESSAGE]
    assert {(e["ref"], e["old_sha"], e["new_sha"]) for e in deleted} == {
        ("refs/heads/spike", tip, None), ("refs/heads/merged-one", rev(repo, "main"), None)}
    refresh_repo(index, str(repo))
    assert len([e for e in events(index) if e["message"] == DELETED_MESSAGE]) == 2, "recorded once"
    lost = lost_commits(index)
    assert [(c["sha"], c["subject"], c["dropped_by"], c["ref"]) for c in lost["commits"]] == [
        (tip, "spike idea", "branch", "refs/heads/spike")]


def test_lost_commits_match_git_fsck(fleet) -> None:
    index, repo = fleet
    git(repo, "commit", "-q", "--amend", "-m", "amend it")
    commit_file(repo, "x.txt", "x\n", "soon reset")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "checkout", "-q", "--detach")
    commit_file(repo, "d.txt", "d\n", "detached work")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "keep", "HEAD@{4}")  # "soon reset": a ref reaches this dropped tip again
    refresh_repo(index, str(repo))
    found = lost_commits(index)
    fsck = git(repo, "fsck", "--unreachable", "--no-reflogs")
    unreachable = {line.split()[2] for line in fsck.splitlines() if line.startswith("unreachable commit")}
    assert {c["sha"] for c in found["commits"]} == unreachable and len(unreachable) == 2
    subjects = {c["subject"]: c["dropped_by"] for c in found["commits"]}
    assert subjects == {"commit 1": "amend", "detached work": "checkout"}
    for c in found["commits"]:
        assert git(repo, "log", "-1", "--format=%s", c["sha"]).strip() == c["subject"]


def test_lost_cli_lists_recoverable_commits(fleet, db_path: Path) -> None:
    index, repo = fleet
    dropped = rev(repo, "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    refresh_repo(index, str(repo))
    proc = run_cli("--db", str(db_path), "lost", "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    data = json.loads(proc.stdout)
    assert [(c["repo"], c["sha"], c["dropped_by"]) for c in data["commits"]] == [("app", dropped, "reset")]
    text = run_cli("--db", str(db_path), "lost").stdout
    assert dropped[:12] in text and f"branch recovered-{dropped[:8]} {dropped}" in text
    git(repo, "branch", "rescued", dropped)
    assert lost_commits(index)["commits"] == []


def test_cold_store_records_events_with_its_lines_as_a_read_back_would(tmp_path: Path, monkeypatch) -> None:
    """A repo stored for the first time has its events decided before the write and written with its lines;
    they are the events the read-back path (`record_events`) records, line for line, duplicates in a reflog
    included."""
    root = tmp_path / "src"
    repo = busy_repo(root)
    log = repo / ".git" / "logs" / "HEAD"
    log.write_bytes(log.read_bytes() + log.read_bytes().splitlines(keepends=True)[-1])  # a repeated line

    def events_of(db: Path) -> list[tuple]:
        index = open_index(db)
        scan(index, [str(root)], workers=1)
        rows = index.conn.execute("select ref, kind, old_sha, new_sha, at, message, rewrote, reflog_id from events"
                                  " order by id").fetchall()
        cursor = index.conn.execute("select * from event_cursor").fetchall()
        lines = index.conn.execute("select count(*) from reflog").fetchone()[0]
        index.close()
        return rows + [("cursor", cursor), ("lines", lines)]

    with_lines = events_of(tmp_path / "a.db")
    import fleet.index.scan as scan_module
    monkeypatch.setattr(scan_module, "record_first_events", lambda *args: set())
    read_back = events_of(tmp_path / "b.db")
    assert len(with_lines) > 8 and with_lines == read_back
    assert any(row[6] == 1 for row in with_lines[:-2])  # a rewrite among them (the amend, the reset)


def test_cold_scan_records_a_branch_log_without_its_branch_as_deleted(tmp_path: Path) -> None:
    """A repo stored for the first time whose branch log has no branch (git left the log behind) gets the
    deleted-branch event, as the read-back path gives it; a repo whose every log has its branch gets none."""
    root = tmp_path / "src"
    repo = busy_repo(root)
    clean = init_repo(root / "clean", commits=2)
    tip = git(repo, "rev-parse", "main").strip()
    logs = repo / ".git" / "logs" / "refs" / "heads"
    (logs / "ghost").write_bytes((logs / "main").read_bytes())
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(root)], workers=1)
    deleted = index.conn.execute("select r.path, e.ref, e.old_sha from events e join repos r on r.id = e.repo_id"
                                 " where e.message = ?", (DELETED_MESSAGE,)).fetchall()
    index.close()
    assert deleted == [(str(repo), "refs/heads/ghost", tip)]
    assert str(clean) not in {path for path, _, _ in deleted}


def test_an_event_after_every_event_was_pruned_takes_a_new_id(fleet) -> None:
    """Pruning every event (an idle fleet past its retention) left `event_rows` empty, and SQLite gave the next
    event id 1 again: ids a reader that follows ids (team mode's outbox) had passed long ago."""
    index, repo = fleet
    highest = max(e["id"] for e in events(index))
    held = len(events(index))
    assert prune_events(index, 0, now=max(e["at"] for e in events(index)) + 1)["events_deleted"] == held
    assert events(index) == []
    commit_file(repo, "after.txt", "after\n", "after the prune")
    refresh_repo(index, str(repo))
    fresh = events(index)
    assert [e["message"] for e in fresh] == ["commit: after the prune"] * len(fresh) and fresh
    assert min(e["id"] for e in fresh) > highest
