"""The start-up re-check over real repos: what changed while nothing watched is read again exactly (git is the
oracle), what did not change is not stored again (its generation stays), vanished repos are marked gone, new
ones are found, and a commit made while the re-check runs is not lost."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleet.index.freshness import WATCHER_KEY
from fleet.index.recheck import recheck_chunk
from fleet.index.scan import CHUNK, refresh_repo, scan
from fleet.index.store import Index, open_index
from fleet.repo.record import predict_merge
from tests.fleets import oracle
from tests.fleets.dashboard_fleet import build_fleet
from tests.fleets.gitbuild import commit_file, git, init_repo, write
from tests.fleets.serving import wait_for
from tests.fleets.watching import RunningWatcher

COPIES = 26  # with the 4 dashboard repos: more than one chunk, so the watcher uses its worker processes


@pytest.fixture
def fleet(tmp_path: Path) -> dict:
    """30 repos scanned into an index, then changed as if while no watcher ran (`changed`: the repos whose
    state moved; `gone`: one deleted)."""
    repos = build_fleet(tmp_path)
    root = repos["root"]
    for n in range(COPIES):
        shutil.copytree(repos["clean"], root / f"clean-{n:03d}", symlinks=True)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
        before = {r["path"]: (r["id"], r["generation"], r["scanned_at"]) for r in index.summaries()}
    assert len(before) == 4 + COPIES > CHUNK
    commit_file(root / "clean-000", "later.txt", "a commit nobody watched\n")  # head moves
    write(repos["dirty"] / "another.txt", "untracked\n")  # only the working tree changes
    git(root / "clean-001", "reset", "-q", "--soft", "HEAD")  # only the reflog grows
    git(root / "clean-002", "branch", "extra")  # a new branch, nothing else
    shutil.rmtree(root / "clean-003")
    tracking = repos["tracking"]  # its upstream moves on (as a fetch would): the merge is predicted afresh
    upstream = git(tracking, "commit-tree", "@{u}^{tree}", "-p", "@{u}", "-m", "upstream moved").strip()
    git(tracking, "update-ref", "refs/remotes/origin/main", upstream)
    changed = [repos["dirty"], tracking, *(root / f"clean-00{n}" for n in range(3))]
    return {"root": root, "db": db, "before": before, "changed": [str(p.resolve()) for p in changed],
            "gone": str((root / "clean-003").resolve()), "repos": repos}


def assert_as_git_says(index: Index, repo: Path) -> None:
    rec = index.repo(str(repo))
    head = oracle.head_state(repo)
    assert (rec["head"], rec["branch"]) == (head["head"], head["branch"]), repo
    expected = oracle.counts(repo)
    assert {k: rec[k] for k in expected} == expected, repo
    assert sorted(b["name"] for b in rec["branches"]) == sorted(b["name"] for b in oracle.branches(repo)), repo
    upstream = oracle.upstream_state(repo, head["branch"])
    assert {k: rec[k] for k in upstream} == upstream, repo
    if upstream["ahead"] and upstream["behind"]:  # predicted for the commits git names now
        assert (rec["predicted_conflicts"]["ours"], rec["predicted_conflicts"]["theirs"]) == \
            (head["head"], git(repo, "rev-parse", "@{u}").strip()), repo
    stored = index.conn.execute("select count(*) from reflog where repo_id = ? and ref = 'HEAD'",
                                (rec["id"],)).fetchone()[0]
    assert stored == oracle.reflog_count(repo, "HEAD"), repo


def test_a_chunk_stores_what_changed_and_only_that(fleet) -> None:
    with open_index(fleet["db"]) as index:
        known = [p for p in fleet["before"]]
        checked = recheck_chunk(index, known)
        changed_paths = {p for p, (rid, _g, _s) in fleet["before"].items() if rid in checked.changed}
        assert changed_paths == {*fleet["changed"], fleet["gone"]}
        assert checked.unchanged == len(known) - len(changed_paths)
        assert index.repo(fleet["gone"])["gone"]
        for path in fleet["changed"]:
            assert_as_git_says(index, Path(path))
        after = {r["path"]: r for r in index.summaries(include_gone=True)}
        for path, (_rid, generation, scanned_at) in fleet["before"].items():
            if path not in changed_paths:  # read again (scanned_at moves), not stored again (generation stays)
                assert after[path]["generation"] == generation, path
                assert after[path]["scanned_at"] >= scanned_at, path
                assert_as_git_says(index, Path(path))
        # A second pass finds nothing left to store.
        again = recheck_chunk(index, [p for p in known if p != fleet["gone"]])
        assert again.changed == [] and again.unchanged == len(known) - 1


def test_a_prediction_made_for_the_same_two_commits_is_kept(fleet) -> None:
    """Kept as it is (git is not asked: git would say something else), asked again when a commit differs."""
    tracking = fleet["repos"]["tracking"]
    ours, theirs = (git(tracking, "rev-parse", rev).strip() for rev in ("HEAD", "@{u}"))
    fresh = predict_merge(str(tracking), str(tracking / ".git"), ours, theirs)
    assert fresh == {"clean": True, "paths": [], "ours": ours, "theirs": theirs}
    known = {"clean": False, "paths": ["not-from-git.txt"], "ours": ours, "theirs": theirs}
    assert predict_merge(str(tracking), str(tracking / ".git"), ours, theirs, known) is known
    stale = {**known, "theirs": ours}
    assert predict_merge(str(tracking), str(tracking / ".git"), ours, theirs, stale) == fresh


def test_a_single_refresh_predicts_afresh_when_the_upstream_moved(fleet) -> None:
    tracking = fleet["repos"]["tracking"].resolve()
    with open_index(fleet["db"]) as index:
        before = index.repo(str(tracking))["predicted_conflicts"]
        refresh_repo(index, str(tracking))
        assert_as_git_says(index, tracking)
        assert index.repo(str(tracking))["predicted_conflicts"]["theirs"] != before["theirs"]


def test_the_watcher_rechecks_in_worker_processes_and_misses_no_event(fleet) -> None:
    root = fleet["root"]
    fresh = init_repo(root / "fresh", commits=2)  # created while nothing watched
    late = root / "clean-010"
    running = RunningWatcher(fleet["db"], [str(root)], active_sweep_s=3600, full_sweep_s=3600, discovery_s=3600)
    try:
        index = running.index
        wait_for(lambda: (index.meta(WATCHER_KEY) or {}).get("mode") not in (None, "starting"), "the watch set", 30)
        late_head = commit_file(late, "during.txt", "made while the re-check runs\n")

        def finished() -> bool:
            meta = index.meta(WATCHER_KEY) or {}
            return bool(meta.get("reverify", {}).get("finished_at")) and meta.get("backlog") == 0 \
                and index.repo(str(late.resolve()))["head"] == git(late, "rev-parse", "HEAD").strip()
        wait_for(finished, "the re-check and the late commit", 60)
        progress = index.meta(WATCHER_KEY)["reverify"]
        total = len(fleet["before"])  # minus the gone one, plus the fresh one
        assert progress["done"] == progress["total"] == total
        assert late_head
        for path in [*fleet["changed"], str(fresh.resolve()), str(late.resolve())]:
            assert_as_git_says(index, Path(path))
        assert index.repo(fleet["gone"])["gone"]
        after = {r["path"]: r for r in index.summaries(include_gone=True)}
        stored_again = {p for p, (_rid, gen, _s) in fleet["before"].items() if after[p]["generation"] != gen}
        assert stored_again == {*fleet["changed"], fleet["gone"], str(late.resolve())}
        unchanged_ids = {rid for p, (rid, _g, _s) in fleet["before"].items() if p not in stored_again}
        assert not unchanged_ids & set(running.changed)  # on_change heard only of real changes
    finally:
        running.close()
