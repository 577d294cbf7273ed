"""The realistic benchmark fleet is what it claims: each kind's state checked with the git CLI (the oracle)."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.fleets.gitbuild import git

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.realfleet import MANIFEST, generate_realistic  # noqa: E402


def _ahead_behind(repo: Path) -> tuple[int, int]:
    out = git(repo, "rev-list", "--left-right", "--count", "HEAD...@{upstream}").split()
    return int(out[0]), int(out[1])


def _check_kind(item: tuple[Path, str]) -> int:
    """One repo's claims checked with git; its HEAD reflog's length."""
    repo, kind = item
    claims = MANIFEST[kind][1]
    reflog_size = len(git(repo, "reflog", "show", "--format=%H", "HEAD").splitlines())
    assert len(git(repo, "remote").split()) == claims["remotes"], (kind, repo)
    branches = git(repo, "for-each-ref", "--format=%(refname:short) %(upstream:short)", "refs/heads").splitlines()
    assert 1 <= len(branches) <= 25
    assert any(line.split(" ", 1)[1] for line in branches), (kind, "no branch tracks an upstream")
    if "branches_min" in claims:
        assert len(branches) >= claims["branches_min"]
        assert {line.split(" ", 1)[1].split("/")[0] for line in branches if line.split(" ", 1)[1]} == \
            {"origin", "backup"}
    if "reflog_min" in claims:
        assert reflog_size >= claims["reflog_min"], (kind, reflog_size)
    if "ahead" in claims:
        assert _ahead_behind(repo) == (claims["ahead"], claims["behind"]), kind
    status = git(repo, "status", "--porcelain=v1")
    assert bool(status.strip()) == (kind in ("dirty", "rebasing", "merging")), (kind, status)
    assert len(git(repo, "stash", "list").splitlines()) == claims.get("stashes", 0), kind
    gitdir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    operation = ("rebase" if (gitdir / "rebase-merge").is_dir() else
                 "merge" if (gitdir / "MERGE_HEAD").exists() else None)
    assert operation == claims.get("operation"), kind
    if operation:
        assert "UU " in status or "AA " in status, (kind, status)
    linked = git(repo, "worktree", "list", "--porcelain").count("worktree ") - 1
    assert linked == claims.get("worktrees", 0), kind
    submodules = git(repo, "submodule", "status").splitlines()
    assert len(submodules) == claims.get("submodules", 0), kind
    assert all(line.startswith(" ") for line in submodules), submodules  # checked out at the recorded commit
    return reflog_size


@pytest.mark.slow
def test_realistic_fleet_has_the_states_it_claims(tmp_path):
    weights = sum(weight for weight, _ in MANIFEST.values())
    fleet = generate_realistic(tmp_path / "fleet", weights)
    assert len(fleet["repos"]) == weights and len(fleet["mirrors"]) == weights // 5
    assert set(fleet["kinds"].values()) == set(MANIFEST)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # the repos' git checks side by side
        reflog_sizes = list(pool.map(_check_kind, fleet["kinds"].items()))
    assert 20 <= min(reflog_sizes) and max(reflog_sizes) <= 520
    all_subjects = "".join(git(repo, "reflog", "show", "--format=%gs", "HEAD") for repo in fleet["repos"][:10])
    for move in ("commit (amend)", "reset: moving to", "rebase", "checkout: moving"):
        assert move in all_subjects, move
    for wt in fleet["worktrees"]:
        assert git(wt, "rev-parse", "--is-inside-work-tree").strip() == "true"
        assert Path(git(wt, "rev-parse", "--git-common-dir").strip()).resolve() == \
            (tmp_path / "fleet" / wt.name / ".git").resolve()
    for mirror in fleet["mirrors"]:
        assert git(mirror, "rev-parse", "--is-bare-repository").strip() == "true"
        assert git(mirror, "config", "remote.origin.mirror").strip() == "true"
    again = generate_realistic(tmp_path / "fleet", weights)  # cached: same fleet, nothing rebuilt
    assert again["repos"] == fleet["repos"]
