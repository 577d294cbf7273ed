"""Status first, history behind it: a never-seen fleet's state is stored (and shown) before its reflog history,
the pages built on events say history is still being read meanwhile, and the events the second pass records are
the ones a plain `fleetdeck scan` records (the old path is the oracle; git wrote every line).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fleet.index.events import DELETED_MESSAGE
from fleet.index.freshness import history_progress
from fleet.index.recheck import recheck_chunk
from fleet.index.scan import HISTORY_DELAY_ENV, discover_all, ingest_history, scan
from fleet.index.store import open_index
from fleet.views.digest import digest
from tests.fleets.every_state import build_fleet
from tests.fleets.gitbuild import git
from tests.fleets.repo_states import busy_repo
from tests.fleets.serving import Server, wait_for

EVERYTHING = "2000-01-01T00:00:00+00:00"


def _fleet(base: Path) -> Path:
    """Every state git can be in, plus a repo with amends, resets and a deleted branch, and one whose branch log
    has no branch (a deleted-branch event only the first read can record)."""
    root = base / "root"
    build_fleet(root, base / "side")
    repo = busy_repo(root)
    git(repo, "branch", "-D", "doomed")
    logs = repo / ".git" / "logs" / "refs" / "heads"
    (logs / "ghost").write_bytes((logs / "main").read_bytes())
    return root


def events_of(index) -> list[tuple]:
    """Every event as git's lines give it, by repo path (ids differ between indexes; a deleted branch's time is
    when it was noticed, so it is left out)."""
    rows = index.conn.execute(
        "select r.path, e.ref, e.kind, e.old_sha, e.new_sha, case when e.message = ? then null else e.at end,"
        " e.identity, e.message, e.rewrote from events e join repos r on r.id = e.repo_id", (DELETED_MESSAGE,))
    return sorted(rows.fetchall(), key=repr)


def lines_of(index) -> list[tuple]:
    rows = index.conn.execute("select r.path, l.ref, l.old_sha, l.new_sha, l.identity, l.at, l.tz, l.message, l.kind"
                              " from reflog l join repos r on r.id = l.repo_id")
    return sorted(rows.fetchall(), key=repr)


def files_of(index) -> list[tuple]:
    rows = index.conn.execute("select r.path, f.ref, f.inode, f.size from reflog_files f join repos r on r.id = f.repo_id")
    return sorted(rows.fetchall())


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, object]:
    root = _fleet(tmp_path)
    scanned = open_index(tmp_path / "scanned.db")
    scan(scanned, [str(root)], workers=1)
    yield root, scanned
    scanned.close()


def test_state_first_then_history_records_what_a_scan_records(fleet, tmp_path: Path) -> None:
    root, scanned = fleet
    cold = open_index(tmp_path / "cold.db")
    cold.add_root(str(root))
    found = discover_all(cold, [str(root)])
    recheck_chunk(cold, found)  # every repo never seen: its state alone
    ids = [r["id"] for r in cold.rows() if r["error"] is None]  # one whose read failed is stored whole at once
    assert cold.count() == scanned.count() > len(ids) > 15
    readable = {r["path"] for r in cold.rows() if r["error"] is None}
    assert not [ln for ln in lines_of(cold) if ln[0] in readable]
    assert not [e for e in events_of(cold) if e[0] in readable]
    state = {r["path"]: (r["head"], r["branch"], r["ahead"], r["behind"], r["staged"], r["unstaged"],
                         r["untracked"], r["conflicted"], r["stashes"], r["operation"], r["error"], r["score"])
             for r in cold.rows()}
    assert state == {r["path"]: (r["head"], r["branch"], r["ahead"], r["behind"], r["staged"], r["unstaged"],
                                 r["untracked"], r["conflicted"], r["stashes"], r["operation"], r["error"],
                                 r["score"]) for r in scanned.rows()}
    waiting = history_progress(cold)
    assert waiting == {"complete": False, "read": 0, "total": len(ids)}
    assert digest(cold, EVERYTHING)["history"] == waiting
    assert digest(scanned, EVERYTHING)["history"] == {"complete": True, "read": 0, "total": 0}

    backlog = cold.history_backlog()["ids"]
    ingest_history(cold, backlog[:3])
    assert history_progress(cold) == {"complete": False, "read": 3, "total": len(ids)}
    ingest_history(cold, backlog[3:])
    assert history_progress(cold)["complete"] and cold.history_backlog() == {"total": 0, "ids": []}
    assert lines_of(cold) == lines_of(scanned) and len(lines_of(cold)) > 40
    assert files_of(cold) == files_of(scanned)
    assert events_of(cold) == events_of(scanned)
    kinds = {e[2] for e in events_of(cold)}
    assert {"commit", "amend", "reset", "branch", "checkout"} <= kinds
    assert any(e[8] == 1 for e in events_of(cold)) and any(e[7] == DELETED_MESSAGE for e in events_of(cold))
    ingest_history(cold, backlog)  # again: nothing is recorded twice
    assert events_of(cold) == events_of(scanned)
    cold.close()


def test_a_full_read_takes_a_repo_off_the_backlog_and_a_quick_recheck_does_not(fleet, tmp_path: Path) -> None:
    """The backlog outlives a server stopped mid-way: a re-check that finds a repo as stored (its working trees
    alone) leaves it waiting; a full read (a scan, a watcher's re-read) stores its history and takes it off."""
    root, scanned = fleet
    cold = open_index(tmp_path / "cold.db")
    cold.add_root(str(root))
    recheck_chunk(cold, discover_all(cold, [str(root)]))
    total = cold.count("error is null")
    checked = recheck_chunk(cold, [r["path"] for r in cold.rows()])
    assert checked.quick and history_progress(cold) == {"complete": False, "read": 0, "total": total}
    scan(cold, workers=1)
    assert history_progress(cold)["complete"]
    assert events_of(cold) == events_of(scanned) and lines_of(cold) == lines_of(scanned)
    cold.close()


def _get(client: httpx.Client, path: str, **params) -> dict:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.slow  # a real `fleetdeck serve` whose history pass waits out a 6 s delay
def test_cold_serve_shows_every_repo_before_history_and_the_digest_says_so(fleet, tmp_path: Path,
                                                                            monkeypatch) -> None:
    """A real `fleetdeck serve` on an empty index, its history pass held back by the real path's delay: the
    queue is complete while the digest, the repo page and lost commits say history is still being read; once
    it is read, the digest lists exactly the events a plain scan records."""
    root, scanned = fleet
    total, readable = scanned.count(), scanned.count("error is null")
    monkeypatch.setenv(HISTORY_DELAY_ENV, "6")
    server = Server(tmp_path / "served.db", [root])
    try:
        client = httpx.Client(base_url=server.base, headers=server.auth, timeout=30)
        radar = wait_for(lambda: (r := _get(client, "/api/radar")) and r["total"] == total and r, "every repo", 60)
        assert radar["freshness"]["history"]["complete"] is False
        body = _get(client, "/api/digest", since=EVERYTHING, max_events=1000)
        assert body["history"] == {"complete": False, "read": 0, "total": readable}
        assert body["event_count"] < len(events_of(scanned))
        page = client.get("/digest", params={"since": "custom", "custom": EVERYTHING},
                          headers={"Accept": "text/html"}).text
        assert f"Still reading history: 0 of {readable} repos." in page
        repo_id = next(e["id"] for e in radar["entries"] if e["path"].endswith("/app"))
        assert _get(client, f"/api/repos/{repo_id}")["history"]["complete"] is False
        assert "Still reading history" in client.get(f"/repos/{repo_id}", headers={"Accept": "text/html"}).text

        wait_for(lambda: _get(client, "/api/radar")["freshness"]["history"]["complete"], "history read", 60)
        body = _get(client, "/api/digest", since=EVERYTHING, max_events=1000)
        assert body["history"]["complete"] is True
        expected = digest(scanned, EVERYTHING, max_events=1000)
        assert body["event_count"] == expected["event_count"] > 10
        assert sorted(map(_comparable, body["events"]), key=repr) == sorted(map(_comparable, expected["events"]),
                                                                             key=repr)
        page = client.get("/digest", params={"since": "custom", "custom": EVERYTHING},
                          headers={"Accept": "text/html"}).text
        assert "Still reading history" not in page
        with open_index(tmp_path / "served.db") as served:
            assert events_of(served) == events_of(scanned)
    finally:
        server.stop()


def _comparable(event: dict) -> tuple:
    return tuple((k, None if k == "at" and event["message"].startswith("branch: deleted (seen by") else v)
                 for k, v in sorted(event.items()))



@pytest.mark.slow  # a real `fleetdeck serve`, waited on (~2-5 s)
def test_a_repo_made_while_a_cold_serve_reads_the_fleet_is_found_without_waiting_for_discovery(
        fleet, tmp_path: Path) -> None:
    """The cold start walks the roots once, and the watcher walks them again only after every repo's state is
    in (not while the reads need the CPU): a repo made in between is still found then, long before the
    periodic discovery (a minute)."""
    from tests.fleets.gitbuild import init_repo

    root, scanned = fleet
    server = Server(tmp_path / "served.db", [root])
    try:
        init_repo(root / "made-during-the-cold-start", commits=1)
        client = httpx.Client(base_url=server.base, headers=server.auth, timeout=30)
        wait_for(lambda: _get(client, "/api/radar")["total"] == scanned.count() + 1, "the new repo listed", 20)
    finally:
        server.stop()
