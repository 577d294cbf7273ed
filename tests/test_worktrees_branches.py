"""Linked worktrees and branches other than HEAD in the attention queue, repo.brief and worktree.list:
a worktree mid-cherry-pick (conflicted) and one mid-merge, a dirty one, one outside the roots; branches
diverged, behind, ahead and gone; the branch under a rebase. Git is the oracle for every state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.index.discovery import discover
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.repo.brief import repo_brief
from fleet.repo.parts import worktree_list
from fleet.repo.record import read_repo
from fleet.attention import attention
from tests.fleets import oracle
from tests.fleets.gitbuild import commit_file, git, with_upstream, write


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("wt")
    repo = with_upstream(base / "root", "main-repo", ahead=1)
    commit_file(repo, "shared.txt", "base\n", "shared base")
    git(repo, "branch", "donor")
    git(repo, "branch", "side")
    git(repo, "checkout", "-q", "donor")
    commit_file(repo, "shared.txt", "donor\n", "donor edit")
    git(repo, "checkout", "-q", "side")
    commit_file(repo, "side.txt", "side\n", "side work")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "shared.txt", "main\n", "main edit")
    # mid-cherry-pick with a conflict, in a linked worktree inside the root
    picking = base / "root" / "wt-pick"
    git(repo, "worktree", "add", "-q", "-b", "pick", str(picking), "main")
    git(picking, "cherry-pick", "donor", check=False)
    # mid-merge without conflict (stopped before its commit), in a linked worktree outside the roots
    merging = base / "elsewhere" / "wt-merge"
    git(repo, "worktree", "add", "-q", "-b", "merging", str(merging), "main")
    git(merging, "merge", "--no-commit", "--no-ff", "side")
    # a dirty worktree
    dirty = base / "root" / "wt-dirty"
    git(repo, "worktree", "add", "-q", "-b", "dirty", str(dirty), "main")
    write(dirty / "new.txt", "x\n")
    write(dirty / "README.md", "changed\n")
    return {"base": base, "repo": repo, "picking": picking, "merging": merging, "dirty": dirty}


def _found(path: Path):
    (found,) = [f for f in discover(path) if f.path == os.path.realpath(path)]
    return found


def test_worktree_states_reach_the_radar_with_their_path_and_step(fleet):
    assert oracle.operation(fleet["picking"]) == "cherry-pick" and oracle.counts(fleet["picking"])["conflicted"] == 1
    assert oracle.operation(fleet["merging"]) == "merge"
    index = open_index(fleet["base"] / "fleet.db")
    scan(index, [str(fleet["base"] / "root")])
    (entry,) = [e for e in index.repos() if e["path"] == os.path.realpath(fleet["repo"])]
    reasons = entry["reasons"]
    index.close()
    pick, merge, dirty = (os.path.realpath(fleet[k]) for k in ("picking", "merging", "dirty"))
    by_wt = {(r["code"], r.get("details", {}).get("worktree")): r for r in reasons}
    conflict = by_wt[("conflict", pick)]
    assert conflict["summary"] == f"1 conflicted file during cherry-pick in worktree {pick} (pick)"
    assert conflict["next_step"] == (f"in {pick}: resolve the conflicts, git add them, then git cherry-pick "
                                     "--continue (or --abort)")
    assert reasons[0]["code"] == "conflict"                          # as urgent as in the main worktree
    operation = by_wt[("operation", merge)]
    assert operation["next_step"] == f"in {merge}: git commit to conclude the merge, or git merge --abort"
    changes = by_wt[("local_changes", dirty)]
    counts = oracle.counts(fleet["dirty"])
    assert changes["summary"] == (f"uncommitted changes in worktree {dirty} (dirty): "
                                  f"{counts['unstaged']} modified, {counts['untracked']} untracked")


def test_brief_and_worktree_list_give_each_worktree_its_state(fleet):
    found = _found(fleet["repo"])
    listed = {w["path"]: w for w in worktree_list(found)["worktrees"]}
    for key in ("picking", "merging", "dirty", "repo"):
        row = listed[os.path.realpath(fleet[key])]
        expected = oracle.counts(fleet[key])
        assert {k: row[k] for k in expected} == expected, key
        assert row["operation"] == oracle.operation(fleet[key]), key
    assert listed[os.path.realpath(fleet["merging"])]["error"] is None   # outside the roots: listed with its state
    brief = repo_brief(found)
    states = {w["path"]: w for w in brief["worktree_attention"]}
    assert states[os.path.realpath(fleet["picking"])]["operation"] == "cherry-pick"
    assert states[os.path.realpath(fleet["picking"])]["conflicted"] == 1
    assert states[os.path.realpath(fleet["dirty"])]["untracked"] == 1


def test_other_branches_in_their_real_state(tmp_path: Path):
    repo = with_upstream(tmp_path, "br", ahead=0)
    seed = tmp_path / "br-seed"
    for name in ("diverged", "behind", "ahead", "gone"):
        git(seed, "branch", name)
    git(seed, "push", "-q", "origin", "diverged", "behind", "ahead", "gone")
    git(repo, "fetch", "-q")
    for name in ("diverged", "behind", "ahead", "gone"):
        git(repo, "branch", "-q", "--track", name, f"origin/{name}")
    git(seed, "checkout", "-q", "diverged")
    commit_file(seed, "d.txt", "remote\n")
    git(seed, "checkout", "-q", "behind")
    commit_file(seed, "b.txt", "remote\n")
    git(seed, "push", "-q", "origin", "diverged", "behind")
    git(seed, "push", "-q", "origin", "--delete", "gone")
    git(repo, "fetch", "-q", "--prune")
    for name in ("diverged", "ahead"):
        git(repo, "checkout", "-q", name)
        commit_file(repo, f"{name}.txt", "local\n")
    git(repo, "checkout", "-q", "main")
    track = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in git(
        repo, "for-each-ref", "--format=%(refname:short) %(upstream:track)", "refs/heads").splitlines()}
    assert (track["diverged"], track["behind"], track["ahead"], track["gone"]) == (
        "[ahead 1, behind 1]", "[behind 1]", "[ahead 1]", "[gone]")
    record = read_repo(_found(repo))
    texts = {r["code"]: r for r in attention(record)}
    assert texts["diverged"]["summary"] == "1 other branch diverged from upstream: diverged (1 ahead, 1 behind)"
    assert texts["diverged"]["next_step"].startswith("rebase each on its upstream")
    assert texts["behind"]["summary"] == "1 other branch behind upstream: behind"
    assert texts["ahead"]["summary"] == "1 other branch with unpushed commits: ahead"
    assert texts["no_upstream"]["summary"] == "1 other branch whose upstream is gone: gone"
    # the branch under a rebase is the operation's: no "push them or delete them" for it
    git(repo, "checkout", "-q", "diverged")
    commit_file(repo, "d.txt", "conflicting local\n")
    git(repo, "rebase", "origin/diverged", check=False)
    assert oracle.operation(repo) == "rebase"
    record = read_repo(_found(repo))
    for r in attention(record):
        assert "diverged" not in r.get("details", {}).get("branches", []), r
    hints = repo_brief(_found(repo))["hints"]
    assert hints[0].startswith("1 conflicted file during rebase"), hints
    assert not any("diverged" in hint and "push them" in hint for hint in hints), hints
