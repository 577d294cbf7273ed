"""Retention tiers and disk budgets thin the right snapshots, and what is kept stays whole after gc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.snapshot.retention import DAY, HOUR, keep_by_tiers, prune_all, prune_store, store_bytes
from fleet.snapshot.shadow import WorkTree, store_for
from fleet.snapshot.take import take
from tests.fleets.gitbuild import init_repo, write

SETTINGS = {"keep_all_hours": 24, "hourly_days": 7, "daily_days": 30, "repo_budget_bytes": 1 << 40,
            "fleet_budget_bytes": 1 << 40}
NOW = 1_800_000_000.0


def _meta(i: int, t: float, discarded: bool = False) -> dict:
    return {"id": f"{i:040x}", "t": t, "discarded": {"count": 1} if discarded else None}


def test_tiers_keep_all_then_hourly_then_daily_and_never_older() -> None:
    times = [NOW - age for age in (
        40 * DAY, 31 * DAY + 10,                     # past every tier: gone
        20 * DAY, 20 * DAY - 60, 19 * DAY,           # daily tier: the newest of each day
        3 * DAY, 3 * DAY - 600, 3 * DAY - 1200,      # hourly tier, one hour: only the newest
        2 * DAY + 2 * HOUR,
        10 * HOUR, 5 * HOUR, 60, 1)]                 # the last 24 h: all
    entries = [_meta(i, t) for i, t in enumerate(sorted(times))]
    kept = {m["t"] for m in keep_by_tiers(entries, SETTINGS, NOW)}
    expect = {NOW - a for a in (20 * DAY - 60, 19 * DAY, 3 * DAY - 1200, 2 * DAY + 2 * HOUR, 10 * HOUR, 5 * HOUR,
                                60, 1)}
    assert kept == expect


def test_the_snapshot_before_discarded_work_outlives_its_tier() -> None:
    entries = [_meta(0, NOW - 3 * DAY - 100), _meta(1, NOW - 3 * DAY - 50, discarded=True),
               _meta(2, NOW - 3 * DAY - 10), _meta(3, NOW - 10)]
    kept = [m["id"] for m in keep_by_tiers(entries, SETTINGS, NOW)]
    assert entries[0]["id"] in kept            # it gives the discarded work back
    assert entries[1]["id"] not in kept and entries[2]["id"] in kept


def test_the_newest_is_always_kept() -> None:
    entries = [_meta(0, NOW - 90 * DAY)]
    assert keep_by_tiers(entries, SETTINGS, NOW) == entries


def _repo_with_history(tmp_path: Path, db: Path, count: int, step: float,
                       noise: int = 0) -> tuple[WorkTree, list[dict]]:
    repo = init_repo(tmp_path / "r")
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    made = []
    for i in range(count):
        write(repo / "work.txt", (f"version {i}\n" + "x" * 2000 + str(i)).encode() + os.urandom(noise))
        made.append(take(tree, db, "watch", now=NOW - (count - i) * step))
    return tree, made


def test_prune_removes_dropped_snapshots_and_keeps_the_rest_whole(tmp_path: Path, db_path: Path) -> None:
    tree, made = _repo_with_history(tmp_path, db_path, 12, 3 * HOUR)   # 36 h: the older 12 h hourly-thinned
    shadow = store_for(tree, db_path)
    result = prune_store(shadow, SETTINGS, NOW)
    kept = shadow.entries()
    assert result["dropped"] == 0 and len(kept) == 12                  # one per 3 h: every one its own hour
    result = prune_store(shadow, {**SETTINGS, "keep_all_hours": 1, "hourly_days": 0}, NOW)
    kept = shadow.entries()
    assert result["dropped"] > 0 and kept[-1]["id"] == made[-1]["id"]
    for meta in kept:
        body = shadow.git(["cat-file", "-p", f"{meta['tree']}:work.txt"]).stdout
        assert body.startswith(b"version ")
    gone = {m["id"] for m in made} - {m["id"] for m in kept}
    for snapshot_id in gone:
        assert not shadow.ref_path(snapshot_id).exists()
    assert shadow.git(["cat-file", "-e", next(iter(gone))], ok_codes=(0, 1, 128)).returncode != 0


@pytest.mark.slow
def test_repo_budget_thins_oldest_first(tmp_path: Path, db_path: Path) -> None:
    tree, made = _repo_with_history(tmp_path, db_path, 20, 60)
    shadow = store_for(tree, db_path)
    full = store_bytes(shadow)
    result = prune_store(shadow, {**SETTINGS, "repo_budget_bytes": full // 3}, NOW)
    kept = shadow.entries()
    assert result["bytes"] <= full // 3 or len(kept) == 1
    assert kept[-1]["id"] == made[-1]["id"]
    assert [m["id"] for m in kept] == [m["id"] for m in made[-len(kept):]]


@pytest.mark.slow
def test_fleet_budget_thins_the_biggest_store(tmp_path: Path, db_path: Path, monkeypatch) -> None:
    small = init_repo(tmp_path / "small")
    small_tree = WorkTree(str(small), str(small / ".git"), str(small / ".git"))
    write(small / "a.txt", "a\n")
    take(small_tree, db_path, "manual", now=NOW - 10)
    tree, made = _repo_with_history(tmp_path, db_path, 20, 60, noise=150_000)   # ~3 MB of incompressible work
    big = store_for(tree, db_path)
    assert store_bytes(big) > 2 * (1 << 20)
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(f"[snapshots]\nfleet_budget_bytes = {3 << 19}\n")      # 1.5 MiB for both stores
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings_file))
    before_small = len(store_for(small_tree, db_path).entries())
    result = prune_all(db_path, now=NOW, force=True)
    assert result["bytes"] <= 3 << 19
    assert len(store_for(small_tree, db_path).entries()) == before_small
    assert 1 <= len(big.entries()) < 20
    assert big.entries()[-1]["id"] == made[-1]["id"]
    assert os.path.exists(big.ref_path(made[-1]["id"]))


@pytest.mark.slow
def test_a_store_growing_past_its_budget_is_thinned_before_the_hour_is_up(tmp_path: Path, db_path: Path,
                                                                           monkeypatch) -> None:
    """An agent rewriting a big untracked file (a dev database) every few seconds: each snapshot adds its
    size, so waiting an hour to thin would let the store grow without bound."""
    budget = 1 << 20                                  # the smallest the settings allow
    (tmp_path / "settings.toml").write_text(f"[snapshots]\nrepo_budget_bytes = {budget}\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(tmp_path / "settings.toml"))
    repo = init_repo(tmp_path / "r")
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    for i in range(12):                               # 12 x 300 kB of incompressible bytes within 12 minutes
        write(repo / "dev.db", os.urandom(300_000))
        take(tree, db_path, "watch", now=NOW + 60 * i)
    assert store_bytes(store_for(tree, db_path)) <= budget + 300_000


def test_the_budget_drops_the_snapshot_that_gives_discarded_work_back_last(tmp_path: Path, db_path: Path) -> None:
    """An agent that discards work and then churns big files must not push the one snapshot holding that work
    out of the budget while other snapshots can go."""
    repo = init_repo(tmp_path / "r")
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    write(repo / "precious.py", "the person's work\n")
    rescue = take(tree, db_path, "watch", now=NOW - 600)
    (repo / "precious.py").unlink()
    assert take(tree, db_path, "watch", now=NOW - 590)["discarded"]
    for i in range(8):
        write(repo / "churn.bin", os.urandom(100_000))
        take(tree, db_path, "watch", now=NOW - 500 + i)
    shadow = store_for(tree, db_path)
    prune_store(shadow, {**SETTINGS, "repo_budget_bytes": 350_000}, NOW)
    kept = [m["id"] for m in shadow.entries()]
    assert rescue["id"] in kept and len(kept) < 10
    assert store_bytes(shadow) <= 350_000
