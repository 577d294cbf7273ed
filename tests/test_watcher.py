"""The live watcher over real repos: every git operation shows up in the index within a bounded wait."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from fleet.index.store import Index, open_index
from fleet.index.scan import scan
from fleet.index.freshness import WATCHER_KEY
from fleet.watch.periodic import Periodic
from fleet.watch.watchset import repo_watch
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets import serving
from tests.fleets.gitbuild import backdate, commit_file, git, git_env, init_repo, write
from tests.fleets.watching import RunningWatcher

WAIT_S = 5.0


def wait_for(check: Callable[[], object], what: str, timeout: float = WAIT_S) -> object:
    """The shared poller with this file's bound: every change must reach the index within WAIT_S."""
    return serving.wait_for(check, what, timeout)


def meta(index: Index) -> dict | None:
    return index.meta(WATCHER_KEY)


def watching(index: Index) -> dict | None:
    """The watcher's record once its watch set is built (its first record, written when it claims the
    index, says `starting`)."""
    info = meta(index)
    return info if info and info.get("mode") != "starting" else None


@pytest.fixture
def fleet(tmp_path: Path, db_path: Path):
    root = tmp_path / "src"
    app = init_repo(root / "app", commits=2)
    lib = init_repo(root / "group" / "lib", commits=1)
    with open_index(db_path) as index:
        scan(index, [str(root)])
    running = RunningWatcher(db_path, [str(root)], active_sweep_s=0.5, discovery_s=0.5, heartbeat_s=0.5)
    reader = open_index(db_path)
    wait_for(lambda: (watching(reader) or {}).get("pid") == os.getpid(), "the watcher is watching")
    yield reader, app, lib, root, running
    running.close()
    reader.close()


def record(index: Index, repo: Path) -> dict:
    return index.repo(str(repo))


def head_is(index: Index, repo: Path) -> Callable[[], bool]:
    expected = git(repo, "rev-parse", "HEAD").strip()
    return lambda: (record(index, repo) or {}).get("head") == expected  # None until its first read


def event_messages(index: Index, repo: Path, ref: str) -> list[str]:
    rid = record(index, repo)["id"]
    return [r[0] for r in index.conn.execute(
        "select message from events where repo_id = ? and ref = ? order by at, id", (rid, ref))]


def git_reflog_messages(repo: Path, ref: str) -> list[str]:
    return list(reversed(git(repo, "reflog", "show", "--format=%gs", ref, "--").splitlines()))


def test_meta_reports_mode_and_watch_count(fleet) -> None:
    index, app, lib, _root, running = fleet
    info = meta(index)
    assert info["pid"] == os.getpid() and info["mode"] == "inotify" and info["stopped_at"] is None
    assert info["repos"] == 2
    # per repo: the git dir, refs/ and logs/ with their sub-dirs; far below a whole .git tree
    assert 0 < info["watches"] <= 10 * info["repos"]
    assert set(repo_watch(str(app / ".git")).trees) == {str(app / ".git" / "refs"), str(app / ".git" / "logs")}


def test_commit_amend_and_reflog_rows_match_git(fleet) -> None:
    index, app, _lib, _root, running = fleet
    commit_file(app, "a.txt", "a\n", "first watched commit")
    wait_for(head_is(index, app), "commit")
    git(app, "commit", "-q", "--amend", "-m", "amended watched commit")
    wait_for(head_is(index, app), "amend")
    wait_for(lambda: event_messages(index, app, "refs/heads/main") == git_reflog_messages(app, "refs/heads/main"),
             "branch events equal to git reflog")
    rid = record(index, app)["id"]
    amend = index.conn.execute("select rewrote, new_sha from events where repo_id = ? and kind = 'amend'",
                                  (rid,)).fetchall()
    assert amend == [(1, git(app, "rev-parse", "HEAD").strip())]
    head_only = event_messages(index, app, "HEAD")
    assert "commit: first watched commit" not in head_only, "a commit on the branch is one event, not two"
    assert rid in running.changed


@pytest.mark.slow
def test_checkout_branch_create_delete_merge(fleet) -> None:
    index, app, _lib, _root, _running = fleet
    git(app, "checkout", "-q", "-b", "feature/x")
    wait_for(lambda: record(index, app)["branch"] == "feature/x", "checkout -b of a nested branch name")
    commit_file(app, "f.txt", "f\n", "feature work")
    wait_for(head_is(index, app), "commit on feature/x")
    git(app, "checkout", "-q", "main")
    git(app, "merge", "-q", "--no-ff", "-m", "merge x", "feature/x")
    wait_for(head_is(index, app), "merge")
    assert record(index, app)["branch"] == "main"
    git(app, "branch", "-q", "-d", "feature/x")
    wait_for(lambda: [b["name"] for b in record(index, app)["branches"]] == ["main"], "branch delete")
    wait_for(lambda: "checkout: moving from feature/x to main" in event_messages(index, app, "HEAD"),
             "checkout event on HEAD")
    assert event_messages(index, app, "refs/heads/main")[-1] == "merge feature/x: Merge made by the 'ort' strategy."
    deleted = event_messages(index, app, "refs/heads/feature/x")
    assert deleted[0] == "branch: Created from HEAD" and deleted[-1].startswith("branch: deleted")


@pytest.mark.slow
def test_rebase_reset_and_stash(fleet) -> None:
    index, app, _lib, _root, _running = fleet
    git(app, "checkout", "-q", "-b", "topic")
    commit_file(app, "t.txt", "t\n", "topic")
    git(app, "checkout", "-q", "main")
    commit_file(app, "m.txt", "m\n", "main moves on")
    git(app, "checkout", "-q", "topic")
    git(app, "rebase", "-q", "main")
    wait_for(head_is(index, app), "rebase")
    wait_for(lambda: any(m.startswith("rebase (finish): refs/heads/topic")
                         for m in event_messages(index, app, "refs/heads/topic")), "rebase event")
    rid = record(index, app)["id"]
    [(rewrote,)] = index.conn.execute(
        "select rewrote from events where repo_id = ? and ref = 'refs/heads/topic' and kind = 'rebase'", (rid,))
    assert rewrote == 1
    git(app, "reset", "-q", "--hard", "HEAD~1")
    wait_for(head_is(index, app), "reset --hard")
    wait_for(lambda: index.conn.execute(
        "select rewrote from events where repo_id = ? and kind = 'reset' and ref = 'refs/heads/topic'",
        (rid,)).fetchall() == [(1,)], "reset event with rewrote")
    (app / "README.md").write_text("dirty\n")
    git(app, "stash", "-q")
    wait_for(lambda: (record(index, app)["stashes"], record(index, app)["unstaged"]) == (1, 0), "stash")


@pytest.mark.slow
def test_worktree_add_and_remove(fleet, tmp_path: Path) -> None:
    index, app, _lib, _root, running = fleet
    wt = tmp_path / "wt-one"
    git(app, "worktree", "add", "-q", "-b", "side", str(wt))
    wait_for(lambda: [w["path"] for w in record(index, app)["worktrees"]] == [str(wt)], "worktree add")
    wt_gitdir = str(app / ".git" / "worktrees" / "wt-one")
    wait_for(lambda: (wt_gitdir, "top") in running.watcher.watch_of(str(app)).top, "worktree git dir watched")
    commit_file(wt, "w.txt", "w\n", "work in the worktree")
    side = git(wt, "rev-parse", "HEAD").strip()
    wait_for(lambda: {b["name"]: b["head"] for b in record(index, app)["branches"]}.get("side") == side,
             "commit inside the linked worktree")
    git(app, "worktree", "add", "-q", "--detach", str(tmp_path / "wt-two"))  # no ref moves at all
    wait_for(lambda: len(record(index, app)["worktrees"]) == 2, "second worktree (only .git/worktrees/ changes)")
    git(app, "worktree", "remove", str(wt))
    wait_for(lambda: [w["path"] for w in record(index, app)["worktrees"]] == [str(tmp_path / "wt-two")],
             "worktree remove")


@pytest.mark.slow
def test_new_repo_and_deleted_repo(fleet) -> None:
    index, app, lib, root, running = fleet
    fresh = init_repo(root / "later" / "fresh", commits=1)
    wait_for(lambda: index.repo(str(fresh)), "a repo created under the root")
    wait_for(lambda: str(fresh) in running.watcher.watched_repos(), "the new repo is watched")
    commit_file(fresh, "n.txt", "n\n", "second")
    wait_for(head_is(index, fresh), "a commit in the new repo")
    shutil.rmtree(lib)
    wait_for(lambda: index.repo(str(lib))["gone"], "a deleted repo is marked gone")
    commit_file(app, "still.txt", "s\n", "still watching")
    wait_for(head_is(index, app), "other repos keep reporting after a watched path vanished")
    wait_for(lambda: str(lib) not in running.watcher.watched_repos(), "the watch set was rebuilt without it")


def test_reflog_expiry_keeps_indexed_events(fleet) -> None:
    index, app, _lib, _root, _running = fleet
    commit_file(app, "e.txt", "e\n", "before expiry")
    wait_for(lambda: "commit: before expiry" in event_messages(index, app, "refs/heads/main"), "event")
    before = event_messages(index, app, "refs/heads/main")
    git(app, "reflog", "expire", "--expire=now", "--all")
    commit_file(app, "f.txt", "f\n", "after expiry")
    wait_for(lambda: "commit: after expiry" in event_messages(index, app, "refs/heads/main"), "event after expiry")
    assert event_messages(index, app, "refs/heads/main") == before + ["commit: after expiry"]
    assert git_reflog_messages(app, "refs/heads/main") == ["commit: after expiry"]


@pytest.mark.slow
def test_working_tree_edits_are_picked_up_by_the_sweep(fleet) -> None:
    index, app, _lib, _root, _running = fleet
    write(app / "x.txt", "x\n")                  # a commit made now: git's own time in the reflog is recent
    now = f"@{int(time.time())} +0000"
    subprocess.run(["git", "-C", str(app), "add", "x.txt"], check=True, capture_output=True, env=git_env())
    subprocess.run(["git", "-C", str(app), "commit", "-q", "-m", "recent activity"], check=True, capture_output=True,
                   env={**git_env(), "GIT_AUTHOR_DATE": now, "GIT_COMMITTER_DATE": now})
    wait_for(head_is(index, app), "commit")
    (app / "x.txt").write_text("edited, .git untouched\n")
    wait_for(lambda: record(index, app)["unstaged"] == 1, "the active-repo sweep sees a working-tree edit")


@pytest.mark.slow
def test_periodic_hooks_run_and_failures_do_not_stop_them(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "src"
    init_repo(root / "one")
    calls: list[str] = []

    def hook(index: Index) -> None:
        calls.append(str(index.path))
        if len(calls) == 1:
            raise RuntimeError("a failing hook is logged, not fatal")

    running = RunningWatcher(db_path, [str(root)], periodic=[Periodic(hook, 0.1)])
    try:
        wait_for(lambda: len(calls) >= 3, "three runs of the hook")
        assert [h.name for h in running.watcher.periodic_hooks()] == [hook.__qualname__]
    finally:
        running.close()
    assert set(calls) == {str(db_path)}
    with pytest.raises(ValueError):
        Periodic(hook, 0)


def test_second_watcher_on_the_same_index_exits_1(fleet, db_path: Path) -> None:
    _index, _app, _lib, root, _running = fleet
    proc = subprocess.run(fleetdeck_argv("--db", str(db_path), "watch", str(root)), capture_output=True,
                          text=True, env=fleetdeck_env(), timeout=60)
    assert proc.returncode == 1
    assert f"another watcher (pid {os.getpid()}) is already writing to {db_path}" in proc.stderr


def _start_cli_watcher(db_path: Path, root: Path, *extra: str, prefix: list[str] | None = None) -> subprocess.Popen:
    argv = (prefix or []) + fleetdeck_argv("--db", str(db_path), "watch", str(root), *extra)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=fleetdeck_env())


@pytest.mark.slow
def test_sigterm_stops_the_cli_watcher_cleanly(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "src"
    repo = init_repo(root / "one")
    proc = _start_cli_watcher(db_path, root)
    try:
        with open_index(db_path) as index:
            wait_for(lambda: (meta(index) or {}).get("pid") == proc.pid, "the CLI watcher's heartbeat", 20)
            commit_file(repo, "c.txt", "c\n", "seen by the CLI watcher")
            wait_for(head_is(index, repo), "commit seen by the CLI watcher")
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=15)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
            info = meta(index)
            assert info["stopped_at"] is not None and info["pid"] == proc.pid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    second = _start_cli_watcher(db_path, root)  # the lock was released
    try:
        with open_index(db_path) as index:
            wait_for(lambda: (meta(index) or {}).get("pid") == second.pid, "a new watcher after a clean stop", 20)
        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=15) == 0
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()


def _userns_with_few_watches() -> list[str] | None:
    """A user namespace whose inotify watch limit is 3 (real exhaustion, no effect outside it)."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            "echo 3 > /proc/sys/user/max_inotify_watches"], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "--user", "--map-root-user", "sh", "-c",
            'echo 3 > /proc/sys/user/max_inotify_watches && exec "$@"', "sh"]


@pytest.mark.slow
def test_out_of_inotify_watches_falls_back_to_polling(tmp_path: Path, db_path: Path) -> None:
    prefix = _userns_with_few_watches()
    if prefix is None:
        pytest.skip("cannot create a user namespace with a lowered inotify limit here")
    root = tmp_path / "src"
    repo = init_repo(root / "one")
    backdate(root)  # the poller compares whole-second mtimes: the commit below lands in a later second
    proc = _start_cli_watcher(db_path, root, prefix=prefix)
    try:
        with open_index(db_path) as index:
            info = wait_for(lambda: watching(index), "heartbeat", 20)
            assert info["mode"] == "polling" and info["watches"] == 0
            commit_file(repo, "p.txt", "p\n", "seen by polling")
            wait_for(head_is(index, repo), "commit seen while polling")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert "falling back to polling" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_forced_polling_mode(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "src"
    repo = init_repo(root / "one")
    backdate(root)  # the poller compares whole-second mtimes: the commit below lands in a later second
    running = RunningWatcher(db_path, [str(root)], force_polling=True)
    try:
        with open_index(db_path) as index:
            wait_for(lambda: (meta(index) or {}).get("mode") == "polling", "polling mode in meta")
            assert running.watcher.polled_repos() == running.watcher.watched_repos() == [os.path.realpath(repo)]
            commit_file(repo, "p.txt", "p\n", "polled")
            wait_for(head_is(index, repo), "commit seen by polling")
    finally:
        running.close()


@pytest.mark.slow
def test_out_of_inotify_watches_polls_only_the_repos_that_do_not_fit(tmp_path: Path, db_path: Path) -> None:
    """16 watches hold two of four repos (7 each): those keep live events, the other two are polled."""
    probe = _userns_with_few_watches()
    if probe is None:
        pytest.skip("cannot create a user namespace with a lowered inotify limit here")
    prefix = ["unshare", "--user", "--map-root-user", "sh", "-c",
              'echo 16 > /proc/sys/user/max_inotify_watches && exec "$@"', "sh"]
    root = tmp_path / "src"
    repos = [init_repo(root / f"r{n}", commits=1) for n in range(4)]
    backdate(root)  # the poller compares whole-second mtimes: the commits below land in a later second
    proc = _start_cli_watcher(db_path, root, prefix=prefix)
    try:
        with open_index(db_path) as index:
            info = wait_for(lambda: watching(index), "heartbeat", 20)
            assert info["mode"] == "polling" and info["repos"] == 4
            assert 0 < info["polled"] < 4 and 0 < info["watches"] <= 16, info
            for repo in repos:
                commit_file(repo, "p.txt", "p\n", "seen live or by polling")
            for repo in repos:
                wait_for(head_is(index, repo), f"commit in {repo.name}")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0 and "falling back to polling" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- the parts, one by one ------------------------------------------------------------------------------

def test_notifier_is_watching_when_built_and_reports_start_failures_at_once(tmp_path: Path) -> None:
    """watchfiles' public `watch()` as the notifier uses it: up within a step, events delivered, a stop that
    is prompt, and a start failure raised to the caller (not lost in the thread). A watchfiles that stops
    honouring `stop_event` this way fails here."""
    from fleet.watch.notifier import Notifier

    got: list[set] = []
    started = time.perf_counter()
    notifier = Notifier([str(tmp_path)], recursive=False, polling=False, deliver=got.append)
    assert time.perf_counter() - started < 1.0
    try:
        (tmp_path / "HEAD").write_text("ref: refs/heads/main\n")
        wait_for(lambda: any(path == str(tmp_path / "HEAD") for batch in got for _c, path in batch), "an event")
    finally:
        stopping = time.perf_counter()
        notifier.close()
    assert time.perf_counter() - stopping < 1.0
    with pytest.raises(FileNotFoundError):
        Notifier([str(tmp_path / "missing")], recursive=True, polling=False, deliver=got.append)


def test_refresh_queue_debounces_events_and_keeps_a_worker_for_them() -> None:
    from fleet.watch.schedule import RefreshQueue

    queue = RefreshQueue(workers=2, quiet_s=0.03, max_delay_s=0.3)
    queue.touch("a", 0.0)
    assert queue.take(0.01) == ([], 0.03)  # still within the quiet period
    queue.touch("a", 0.02)  # a new event pushes it back ...
    assert queue.take(0.04) == ([], 0.05)
    for t in (0.08, 0.16, 0.24, 0.32):  # ... but never past max_delay_s after the first
        queue.touch("a", t)
    assert queue.take(0.31) == ([("a", False)], None)
    queue.touch("a", 0.4)
    assert queue.take(1.0) == ([], None), "a repo is never re-read twice at once"
    queue.finish("a", False)
    assert queue.take(1.0) == ([("a", False)], None)
    queue.finish("a", False)
    queue.sweep(["s1", "s2", "s1"])
    assert queue.backlog() == 2
    assert queue.take(2.0) == ([("s1", True)], None), "sweeps leave the last worker to events"
    queue.touch("e", 2.0)
    assert queue.take(2.1) == ([("e", False)], None)
    queue.finish("s1", True)
    queue.finish("e", False)
    assert queue.take(2.2) == ([("s2", True)], None)
