"""The start-up re-check over real repos: what changed while nothing watched is read again exactly (git is the
oracle), what did not change is not stored again (its generation stays), vanished repos are marked gone, new
ones are found, and a commit made while the re-check runs is not lost."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from fleet.index.freshness import WATCHER_KEY
from fleet.index.recheck import recheck_chunk
from fleet.git.status import read_status
from fleet.index.scan import CHUNK, refresh_repo, scan
from fleet.git.layout import found_at
from fleet.index.store import Index, open_index
from fleet.repo.record import predict_merge, read_repo
from fleet.watch.notifier import inotify_watch_count
from fleet.watch.watcher import Watcher
from fleet.git.mark import watch_mark
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


@pytest.mark.slow
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


@pytest.mark.slow
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
        total = len(fleet["before"]) + 1  # every known one (the deleted one is found gone), plus the fresh one
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


def _children() -> set[int]:
    """This process's child processes (the re-check's workers among them)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            found |= {int(pid) for pid in (task / "children").read_text().split()}
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


@pytest.mark.slow
def test_a_watcher_stopped_mid_recheck_stops_at_once_and_holds_nothing(fleet, capfd) -> None:
    """Stopped while its worker processes re-check the fleet: it stops without waiting for them, every inotify
    watch it held is released, and its workers exit on their own, cleanly: a spawned worker still starting
    unpickles the pool's write lock by name, which must not have been unlinked under it (it failed with a
    FileNotFoundError traceback on the terminal, when a `serve` was stopped in its first second)."""
    before_watches, before_children = inotify_watch_count(), _children()
    running = RunningWatcher(fleet["db"], [str(fleet["root"])], active_sweep_s=3600, full_sweep_s=3600,
                             discovery_s=3600)
    wait_for(lambda: running.watcher._recheck_pool is not None or running.watcher._up.is_set(), "the workers", 30)
    workers = {pid for pid in _children() - before_children if b"multiprocessing.spawn" in _cmdline(pid)}
    assert workers  # (multiprocessing's resource tracker, started with the first of them, lives on by design)
    running.close()
    assert inotify_watch_count() == before_watches
    wait_for(lambda: not (_children() & workers), "the re-check's workers gone", 30)
    assert "Traceback" not in capfd.readouterr().err


def test_a_watch_mark_moves_with_every_git_change_the_watch_set_would_see(tmp_path: Path) -> None:
    """The mark a re-check takes before reading a repo whose watch is not up yet: equal after reads and
    working-tree edits (no event either), different after each change git makes to its watched files."""
    repo = init_repo(tmp_path / "repo", commits=2)
    gitdir = str(repo / ".git")
    mark = watch_mark(gitdir)
    read_status(repo, repo / ".git")
    read_repo(found_at(str(repo), str(tmp_path)))
    write(repo / "edited.txt", "a working-tree edit: the sweeps' business, not an event\n")
    assert watch_mark(gitdir) == mark
    changes = {
        "a commit": lambda: commit_file(repo, "a.txt", "a\n"),
        "only the reflog grows": lambda: git(repo, "reset", "-q", "--soft", "HEAD"),
        "a new branch": lambda: git(repo, "branch", "extra"),
        "a branch in a new folder": lambda: git(repo, "branch", "topic/nested"),
        "a linked worktree": lambda: git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "extra"),
        "HEAD moves to another branch": lambda: git(repo, "checkout", "-q", "topic/nested"),
        "a config change": lambda: git(repo, "config", "fleet.test", "1"),
        "packed refs": lambda: git(repo, "pack-refs", "--all"),
    }
    for what, change in changes.items():
        change()
        now = watch_mark(gitdir)
        assert now != mark, what
        mark = now
    assert watch_mark(str(tmp_path / "no-such-repo" / ".git")) == b""


@pytest.mark.slow
def test_a_commit_between_a_repos_recheck_and_its_watch_going_up_is_not_lost(fleet, monkeypatch) -> None:
    """The known repos are re-read at once and the watch set is built once all are read: a repo read before
    its watch was up is read again when its git files changed in between (its mark), and the watcher is
    live (`live_at`) only then. The re-check itself is finished when every repo was read."""
    root = fleet["root"]
    building = threading.Event()
    go = threading.Event()
    apply = Watcher._apply_watch_set

    def held_apply(self):  # the watch set's first build waits until the test says go
        building.set()
        assert go.wait(60)
        return apply(self)

    monkeypatch.setattr(Watcher, "_apply_watch_set", held_apply)
    running = RunningWatcher(fleet["db"], [str(root)], active_sweep_s=3600, full_sweep_s=3600, discovery_s=3600)
    try:
        index = running.index
        total = len(fleet["before"])

        def all_read() -> bool:
            meta = index.meta(WATCHER_KEY) or {}
            check = meta.get("reverify") or {}
            return check.get("done") == check.get("total") == total and bool(check.get("finished_at"))
        wait_for(all_read, "every known repo read before the watch set is built", 60)
        assert building.wait(30)  # built once every repo was read
        meta = index.meta(WATCHER_KEY)
        assert meta["mode"] == "starting" and meta["live_at"] is None
        assert meta["backlog"] == total - 1, meta  # read, not yet checked against their marks (but the gone one)
        late = root / "clean-010"
        assert index.repo(str(late.resolve()))["head"] == git(late, "rev-parse", "HEAD").strip()
        late_head = commit_file(late, "gap.txt", "made after its re-check, before its watch was up\n")
        go.set()

        def live() -> bool:
            meta = index.meta(WATCHER_KEY) or {}
            return bool(meta["live_at"]) and meta["backlog"] == 0 and meta["mode"] != "starting"
        wait_for(live, "the watcher to go live", 60)
        wait_for(lambda: index.repo(str(late.resolve()))["head"] == late_head, "the commit made in the gap", 10)
        assert_as_git_says(index, late)
        for path in fleet["changed"]:
            assert_as_git_says(index, Path(path))
    finally:
        go.set()
        running.close()
