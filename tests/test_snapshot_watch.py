"""The safety net with the watcher: sweeps see work discarded by real commands, live edits of a tree with an
agent present are snapshotted once they pause (and during long bursts), and the fleet watcher runs both."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fleet.index.store import open_index
from fleet.snapshot.net import SafetyNet
from fleet.snapshot.restore import restore
from fleet.snapshot.shadow import WorkTree, store_for
from fleet.snapshot.timeline import discarded_events, snapshots
from fleet.watch import service
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import git, init_repo, write
from tests.fleets.serving import wait_for


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    root = tmp_path / "fleet"
    repo = init_repo(root / "web")
    write(repo / "page.html", "<p>committed</p>\n")
    git(repo, "add", "page.html")
    git(repo, "commit", "-q", "-m", "page")
    clean = init_repo(root / "quiet")
    assert clean.exists()
    write(repo / "page.html", "<p>an afternoon of work</p>\n")
    write(repo / "draft.md", "untracked draft\n")
    db = tmp_path / "fleet.db"
    settings = tmp_path / "settings.toml"
    settings.write_text("[snapshots]\npause_s = 1\nmin_interval_s = 1\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    run_cli("scan", str(root), db=db, check=True)
    return repo, db


def _tree(repo: Path) -> WorkTree:
    return WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))


def test_sweep_snapshots_dirty_trees_and_sees_a_reset_hard(fleet) -> None:
    repo, db = fleet
    net = SafetyNet(db)
    with open_index(db) as index:
        assert net.sweep(index) >= 1
        quiet = repo.parent / "quiet"
        assert store_for(_tree(quiet), db) is not None          # a baseline for every tree
        assert net.sweep(index) == 0                             # nothing changed: nothing kept
        git(repo, "reset", "-q", "--hard")
        git(repo, "clean", "-fdq")
        assert net.sweep(index) == 1
    [event] = discarded_events(_tree(repo), db)
    assert set(event["files"]) == {"page.html", "draft.md"}
    restore(_tree(repo), db, event["restore_from"])
    assert (repo / "page.html").read_text() == "<p>an afternoon of work</p>\n"
    assert (repo / "draft.md").read_text() == "untracked draft\n"


def test_sweep_sees_a_dirty_worktree_removed_by_force(fleet) -> None:
    """`git worktree remove --force` of a worktree with uncommitted files: no tree is left to snapshot, and
    the work it held must still show as discarded, with the snapshot that gives it back. A whole repository
    deleted outright is said nowhere (its objects are gone too) but never breaks the sweep."""
    import shutil

    repo, db = fleet
    linked = repo.parent / "web-feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    write(linked / "feature.txt", "feature work\n")
    run_cli("scan", str(repo.parent), db=db, check=True)
    tree = WorkTree(str(linked), str(repo / ".git" / "worktrees" / "web-feature"), str(repo / ".git"))
    outside = repo.parent.parent / "outside"                   # an admin folder naming a tree beyond the roots
    write(outside / "secret.txt", "not the fleet's\n")
    write(repo / ".git" / "worktrees" / "evil" / "gitdir", f"{outside}/.git\n")
    net = SafetyNet(db)
    with open_index(db) as index:
        net.sweep(index)
        held = store_for(tree, db).entries()[-1]
        git(repo, "worktree", "remove", "--force", str(linked))
        net.sweep(index)
        net.sweep(index)
        shutil.rmtree(repo.parent / "quiet")
        net.sweep(index)
    [event] = discarded_events(tree, db)
    assert event["files"] == ["feature.txt"] and event["restore_from"] == held["id"]
    assert store_for(WorkTree(str(outside), str(outside / ".git"), str(outside / ".git")), db) is None


@pytest.mark.slow
def test_live_edits_snapshot_each_pause_and_long_bursts(fleet) -> None:
    repo, db = fleet
    net = SafetyNet(db)
    with open_index(db) as index:
        net.sweep(index)
        net.live.want([_tree(repo)])
        try:
            time.sleep(0.5)                                      # the watch is up
            for version in ("one", "two", "three"):
                write(repo / "page.html", f"<p>{version}</p>\n")
                wait_for(lambda: net.tick(index) == 1, f"a snapshot of version {version}", 10.0)
            versions = [store_for(_tree(repo), db).git(["cat-file", "-p", f"{s['id']}:page.html"]).stdout
                        for s in snapshots(_tree(repo), db)[:3]]
            assert versions == [b"<p>three</p>\n", b"<p>two</p>\n", b"<p>one</p>\n"]
            assert [s["trigger"] for s in snapshots(_tree(repo), db)[:3]] == ["watch"] * 3
            taken, started = 0, time.monotonic()
            # edits every 0.3 s never pause for 1 s, yet min_interval_s = 1 still snapshots: two within 3 s of
            # burst on an idle machine; a loaded one (each tick slower) is given until 20 s to show it
            while taken < 2 and time.monotonic() - started < 20.0:
                write(repo / "page.html", f"<p>{time.monotonic()}</p>\n")
                taken += net.tick(index)
                time.sleep(0.3)
            assert taken >= 2
            time.sleep(1.5)
            net.tick(index)                                      # the burst's last edits
            write(repo / ".git" / "description", "not a working-tree edit\n")
            time.sleep(1.5)
            assert net.tick(index) == 0
        finally:
            net.close()


DESTROY = {"reset_hard": [["git", "reset", "-q", "--hard"]], "checkout_dot": [["git", "checkout", "-q", "--", "."]],
           "restore_dot": [["git", "restore", "."]], "clean_fd": [["git", "clean", "-fdq"]],
           "rm_rf": [["rm", "-rf", "site"]], "stash_then_drop": [["git", "stash", "-q", "-u"], ["git", "stash", "drop", "-q"]]}
LOST = {"reset_hard": {"page.html", "site/about.html"}, "checkout_dot": {"page.html", "site/about.html"},
        "restore_dot": {"page.html", "site/about.html"}, "clean_fd": {"draft.md"}, "rm_rf": {"site/about.html"},
        "stash_then_drop": set()}


@pytest.mark.parametrize("how", sorted(DESTROY))
def test_the_fleet_watcher_sees_each_destructive_command_and_it_is_restored(fleet, monkeypatch, how: str) -> None:
    """A real fleet watcher (its periodic sweep every 0.1 s here) sees the loss; the files come back exactly."""
    repo, db = fleet
    write(repo / "site" / "about.html", "<p>about</p>\n")
    git(repo, "add", "site/about.html")
    git(repo, "commit", "-q", "-m", "about")
    write(repo / "site" / "about.html", "<p>about us, rewritten</p>\n")
    before = {p: (repo / p).read_bytes() for p in ("page.html", "draft.md", "site/about.html")}
    monkeypatch.setattr(service, "SWEEP_EVERY_S", 0.1)
    index = open_index(db)
    watcher = service.fleet_watcher(index)
    assert {"snapshots", "live-edits"} <= {h.name for h in watcher._periodic.hooks}
    loop = asyncio.new_event_loop()
    stop: list[asyncio.Event] = []

    def main() -> None:
        async def go() -> None:
            stop.append(asyncio.Event())
            await watcher.run(stop[0])
        loop.run_until_complete(go())

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    try:
        wait_for(lambda: snapshots(_tree(repo), db),
                 "the first sweep's snapshot", 30.0)
        for command in DESTROY[how]:
            subprocess.run(command, cwd=repo, check=True, capture_output=True)
        events = wait_for(lambda: discarded_events(_tree(repo), db), "the discarded work seen by a sweep", 30.0)
        if LOST[how]:
            assert set(events[0]["files"]) == LOST[how]
        else:       # a sweep between the two commands sees a dropped stash; otherwise the files vanished
            assert events[0]["stashes_dropped"] or set(events[0]["files"]) == {"page.html", "draft.md",
                                                                               "site/about.html"}
        restore_from = events[-1]["restore_from"]
    finally:
        wait_for(lambda: stop, "the loop", 5.0)
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(20)
        loop.close()
        index.close()
    assert not thread.is_alive()
    restore(_tree(repo), db, restore_from)
    assert {p: (repo / p).read_bytes() for p in before} == before
