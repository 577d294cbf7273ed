"""Status first, history behind it: a never-seen fleet's state is stored (and shown) before its reflog history,
the pages built on events say history is still being read meanwhile, and the events the second pass records are
the ones a plain `fleetdeck scan` records (the old path is the oracle; git wrote every line).
"""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from fleet.index.events import DELETED_MESSAGE
from fleet.index.freshness import history_progress, prediction_progress
from fleet.index.recheck import recheck_chunk
from fleet.index.scan import (HISTORY_DELAY_ENV, PREDICTION_DELAY_ENV, discover_all, ingest_history,
                              ingest_predictions, refresh_repo, scan)
from fleet.index.store import open_index
from fleet.views.digest import digest
from tests.fleets.cli import fleetdeck_env, run_cli
from tests.fleets.every_state import build_fleet
from tests.fleets.gitbuild import git
from tests.fleets.repo_states import busy_repo
from tests.fleets.serving import Server, wait_for
from tests.fleets.template import shared

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


def _fleet_copy(base: Path) -> Path:
    """`_fleet` under `base`, copied from this session's template of it (built once)."""
    return shared().copy("cold-serve", _fleet, base)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> tuple[Path, object]:
    """The fleet and a plain scan of it (the oracle), once for the module: every test here reads the fleet into
    indexes of its own and changes no repository (the one that adds a repo has a copy of its own)."""
    base = tmp_path_factory.mktemp("cold-serve")
    root = _fleet_copy(base)
    scanned = open_index(base / "scanned.db")
    scan(scanned, [str(root)], workers=1)
    yield root, scanned
    scanned.close()


def held_back(monkeypatch, variable: str, release: Path) -> None:
    """Hold the real serve's pass named by `variable` back until the test makes `release` (a minute at most:
    a failed test's server is stopped before that)."""
    monkeypatch.setenv(variable, f"60:{release}")


@pytest.mark.slow
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
    predicting = set(cold.prediction_backlog()["ids"])  # their score may move with the prediction (below)
    state = {r["path"]: (r["head"], r["branch"], r["ahead"], r["behind"], r["staged"], r["unstaged"],
                         r["untracked"], r["conflicted"], r["stashes"], r["operation"], r["error"],
                         None if r["id"] in predicting else r["score"]) for r in cold.rows()}
    paths = {r["path"] for r in cold.rows() if r["id"] in predicting}
    assert state == {r["path"]: (r["head"], r["branch"], r["ahead"], r["behind"], r["staged"], r["unstaged"],
                                 r["untracked"], r["conflicted"], r["stashes"], r["operation"], r["error"],
                                 None if r["path"] in paths else r["score"]) for r in scanned.rows()}
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


@pytest.mark.slow
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


def predictions_of(index) -> dict[str, tuple]:
    """Each repo's stored merge prediction, reasons and score, by path (what the queue ranks and says)."""
    return {r["path"]: (r["predicted_conflicts"], r["reasons"], r["score"]) for r in index.rows()}


@pytest.mark.slow
def test_state_first_then_merge_predictions_as_a_scan_makes_them(fleet, tmp_path: Path) -> None:
    """The state pass leaves a never-seen diverged repo's merge prediction to come: its record says so (its
    `diverged` reason says it is still predicting, never that merging is clean, and no `will conflict` with
    no paths), the backlog counts it; the pass behind makes exactly the predictions, reasons and scores a plain
    scan stores (the one that conflicts moves up), and a repo stored again meanwhile keeps its own."""
    root, scanned = fleet
    cold = open_index(tmp_path / "cold.db")
    cold.add_root(str(root))
    recheck_chunk(cold, discover_all(cold, [str(root)]))
    expected = predictions_of(scanned)
    diverged = sorted(p for p, (prediction, _, _) in expected.items() if prediction)
    assert len(diverged) >= 2 and any(not expected[p][0]["clean"] for p in diverged)
    assert any(expected[p][0]["clean"] for p in diverged)
    waiting = cold.prediction_backlog()["ids"]
    assert prediction_progress(cold) == {"complete": False, "made": 0, "total": len(diverged)} == \
        {"complete": False, "made": 0, "total": len(waiting)}
    before = predictions_of(cold)
    for path in diverged:
        prediction, reasons, score = before[path]
        assert prediction == {"pending": True, "ours": expected[path][0]["ours"],
                                          "theirs": expected[path][0]["theirs"]}
        codes = [r["code"] for r in reasons]
        assert "predicted_conflict" not in codes and "clean" not in codes
        top = next(r for r in reasons if r["code"] == "diverged")
        assert top["details"] == {"prediction": "pending"} and "still predicting" in top["summary"]
        assert score <= 90
    assert {p: v for p, v in before.items() if p not in diverged} == \
        {p: v for p, v in expected.items() if p not in diverged}

    ingest_predictions(cold, waiting[:1])
    assert prediction_progress(cold) == {"complete": False, "made": 1, "total": len(waiting)}
    ingest_predictions(cold, waiting[1:])
    assert prediction_progress(cold) == {"complete": True, "made": 0, "total": 0}
    assert predictions_of(cold) == expected
    assert max(score for p, (_, _, score) in expected.items() if p in diverged) == 95  # the conflicting one moved up

    # stored again meanwhile (a watcher's full read): the pass leaves that record alone
    again = open_index(tmp_path / "again.db")
    again.add_root(str(root))
    recheck_chunk(again, discover_all(again, [str(root)]))
    ids = again.prediction_backlog()["ids"]
    scan(again, workers=1)
    assert again.prediction_backlog() == {"total": 0, "ids": []} and predictions_of(again) == expected
    generation = again.generation()
    ingest_predictions(again, ids)
    assert again.generation() == generation and predictions_of(again) == expected
    cold.close()
    again.close()


@pytest.mark.slow
def test_a_pending_prediction_outlives_a_stopped_server_and_a_quick_recheck(fleet, tmp_path: Path) -> None:
    """A re-check that finds a repo as stored (its working trees alone) keeps its pending prediction and the
    backlog (the pass behind makes it); a full read never reuses a pending one as if it were made."""
    root, scanned = fleet
    cold = open_index(tmp_path / "cold.db")
    cold.add_root(str(root))
    recheck_chunk(cold, discover_all(cold, [str(root)]))
    waiting = cold.prediction_backlog()
    checked = recheck_chunk(cold, [r["path"] for r in cold.rows()])
    assert checked.quick and cold.prediction_backlog() == waiting
    for repo_id in waiting["ids"]:   # the full read (`refresh_repo`, a watcher's) predicts afresh
        refresh_repo(cold, cold.repo(repo_id)["path"])
    assert cold.prediction_backlog() == {"total": 0, "ids": []}
    assert predictions_of(cold) == predictions_of(scanned)
    cold.close()


def _get(client: httpx.Client, path: str, **params) -> dict:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.slow  # a real `fleetdeck serve`, waited on
def test_cold_serve_shows_every_repo_before_history_and_the_digest_says_so(fleet, tmp_path: Path,
                                                                            monkeypatch) -> None:
    """A real `fleetdeck serve` on an empty index, its history pass held back through the real path until the test
    has looked: the queue is complete while the digest, the repo page and lost commits say history is still
    being read; once it is read, the digest lists exactly the events a plain scan records."""
    root, scanned = fleet
    total, readable = scanned.count(), scanned.count("error is null")
    release = tmp_path / "history may go on"
    held_back(monkeypatch, HISTORY_DELAY_ENV, release)
    server = Server(tmp_path / "served.db", [root])
    try:
        client = httpx.Client(base_url=server.base, headers=server.auth, timeout=30)
        radar = wait_for(lambda: (r := _get(client, "/api/radar")) and r["total"] == total and r, "every repo", 60)
        assert radar["freshness"]["history"]["complete"] is False
        body = _get(client, "/api/digest", since=EVERYTHING, max_events=1000)
        assert body["history"] == {"complete": False, "read": 0, "total": readable}
        # the watch set waits for the history pass (its build would take a core from the workers reading it)
        assert _get(client, "/api/radar")["freshness"]["watcher"]["mode"] == "starting"
        assert body["event_count"] < len(events_of(scanned))
        page = client.get("/digest", params={"since": "custom", "custom": EVERYTHING},
                          headers={"Accept": "text/html"}).text
        assert f"Still reading history: 0 of {readable} repos." in page
        repo_id = next(e["id"] for e in radar["entries"] if e["path"].endswith("/app"))
        assert _get(client, f"/api/repos/{repo_id}")["history"]["complete"] is False
        assert "Still reading history" in client.get(f"/repos/{repo_id}", headers={"Accept": "text/html"}).text
        assert _get(client, "/api/radar")["freshness"]["history"]["complete"] is False  # still held back

        release.touch()
        wait_for(lambda: _get(client, "/api/radar")["freshness"]["history"]["complete"], "history read", 60)
        wait_for(lambda: _get(client, "/api/radar")["freshness"]["watcher"]["mode"] in ("inotify", "polling"),
                 "the watch set up once the history is read", 60)
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
        release.touch()
        server.stop()


@pytest.mark.slow  # a real `fleetdeck serve`, waited on
def test_cold_serve_shows_every_repo_before_its_merge_predictions_and_says_so(fleet, tmp_path: Path,
                                                                             monkeypatch) -> None:
    """A real `fleetdeck serve` on an empty index, its merge predictions held back through the real path until the
    test has looked: the queue is complete while a diverged repo's row, its page and the API say its prediction is still to come
    (never `clean`, never `will conflict` without paths); once made, every repo's prediction, reasons and
    score are a plain scan's and the queue's order is the scan's."""
    root, scanned = fleet
    expected = predictions_of(scanned)
    diverged = {p for p, (prediction, _, _) in expected.items() if prediction}
    release = tmp_path / "predictions may go on"
    held_back(monkeypatch, PREDICTION_DELAY_ENV, release)
    server = Server(tmp_path / "served.db", [root])
    try:
        client = httpx.Client(base_url=server.base, headers=server.auth, timeout=30)
        radar = wait_for(lambda: (r := _get(client, "/api/radar")) and r["total"] == scanned.count() and r,
                         "every repo", 60)
        assert radar["freshness"]["predictions"] == {"complete": False, "made": 0, "total": len(diverged)}
        rows = {e["path"]: e for e in radar["entries"]}
        assert diverged <= set(rows)
        for path in diverged:
            codes = [r["code"] for r in rows[path]["reasons"]]
            assert rows[path]["status"] == "diverged" and "predicted_conflict" not in codes, rows[path]
            assert rows[path]["reasons"][0]["details"] == {"prediction": "pending"}
        page = client.get("/", headers={"Accept": "text/html"}).text
        assert f"Still predicting merges: 0 of {len(diverged)} diverged repos." in page
        assert "still predicting whether merging it conflicts" in page
        conflicting = next(p for p in diverged if not expected[p][0]["clean"])
        repo_page = client.get(f"/repos/{rows[conflicting]['id']}", headers={"Accept": "text/html"}).text
        assert "still predicting whether merging it conflicts" in repo_page and "will conflict" not in repo_page
        detail = _get(client, f"/api/repos/{rows[conflicting]['id']}")["reasons"]
        assert detail[0]["code"] == "diverged" and detail[0]["details"] == {"prediction": "pending"}
        assert _get(client, "/api/radar")["freshness"]["predictions"]["made"] == 0  # still held back

        release.touch()
        wait_for(lambda: _get(client, "/api/radar")["freshness"]["predictions"]["complete"], "predictions made", 60)
        radar = _get(client, "/api/radar")
        assert {e["path"]: e["status"] for e in radar["entries"]}[conflicting] == "predicted_conflict"
        assert "Still predicting merges" not in client.get("/", headers={"Accept": "text/html"}).text
        repo_page = client.get(f"/repos/{rows[conflicting]['id']}", headers={"Accept": "text/html"}).text
        assert "still predicting" not in repo_page and "will conflict" in repo_page
        with open_index(tmp_path / "served.db") as served:
            assert predictions_of(served) == expected
            assert [r["path"] for r in served.rows()] and sorted((-r["score"], r["path"]) for r in served.rows()) == \
                sorted((-r["score"], r["path"]) for r in scanned.rows())
    finally:
        release.touch()
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

    _, scanned = fleet
    root = _fleet_copy(tmp_path)  # a repo is added to it: a copy of its own
    server = Server(tmp_path / "served.db", [root])
    try:
        init_repo(root / "made-during-the-cold-start", commits=1)
        client = httpx.Client(base_url=server.base, headers=server.auth, timeout=30)
        wait_for(lambda: _get(client, "/api/radar")["total"] == scanned.count() + 1, "the new repo listed", 20)
    finally:
        server.stop()


# `python -m fleet ARGS...` that reports its garbage collector to stderr: how much was frozen and whether a worker
# collects when the cold start forks its workers (through the real `process_pool`), and the host's own at exit.
COLLECTOR = ("import atexit, gc, runpy, sys\n"
             "from fleet.index import recheck\n"
             "from fleet.watch import coldstart\n"
             "def reporting(*args, **kwargs):\n"
             "    pool = recheck.process_pool(*args, **kwargs)\n"
             "    print('FORKED', gc.get_freeze_count(), pool.submit(gc.isenabled).result(), file=sys.stderr)\n"
             "    return pool\n"
             "coldstart.process_pool = reporting\n"
             "atexit.register(lambda: print('EXIT', gc.get_freeze_count(), gc.isenabled(), file=sys.stderr))\n"
             "sys.argv = ['fleetdeck', *sys.argv[1:]]\n"
             "runpy.run_module('fleet', run_name='__main__', alter_sys=True)\n")


@pytest.mark.slow  # a real `fleetdeck serve`, waited on
def test_cold_serve_starts_without_collector_passes_and_serves_with_them(fleet, tmp_path: Path) -> None:
    """`fleetdeck serve` pauses the garbage collector for its start-up (fleet/cli/serve.py): what it made before
    forking the cold start's workers is frozen out of their collections and they collect again at once; the host
    serves with its collector on, everything start-up made (the web stack too) frozen out of it."""
    root, scanned = fleet
    argv = ["--db", str(tmp_path / "served.db"), "serve", str(root), "--port", "0"]
    proc = subprocess.Popen([sys.executable, "-c", COLLECTOR, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=fleetdeck_env())
    try:
        lines = [proc.stdout.readline()]
        while lines[-1] and "Bearer " not in lines[-1]:
            lines.append(proc.stdout.readline())
        base, token = lines[-1].split()[4].rsplit("/mcp", 1)[0], lines[-1].split()[-1]
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        wait_for(lambda: _get(client, "/api/radar")["total"] == scanned.count(), "every repo", 60)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    forked = [line.split()[1:] for line in err.splitlines() if line.startswith("FORKED ")]
    exited = [line.split()[1:] for line in err.splitlines() if line.startswith("EXIT ")]
    assert len(forked) == len(exited) == 1, err[-2000:]
    (frozen_at_fork, worker_collects), (frozen_at_exit, host_collects) = forked[0], exited[0]
    assert worker_collects == host_collects == "True"
    assert int(frozen_at_exit) > int(frozen_at_fork) > 10_000


def test_a_serve_that_fails_to_start_leaves_the_collector_on(tmp_path: Path) -> None:
    """The collector paused for serve's start-up is on again when the start fails (here in this process)."""
    try:
        failed = run_cli("serve", str(tmp_path / "no such root"), "--port", "0", db=tmp_path / "served.db")
        assert failed.returncode == 1 and "no such root" in failed.stderr
        assert gc.isenabled()
    finally:
        gc.enable()
