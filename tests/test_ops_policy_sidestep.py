"""Policy that cannot be sidestepped, written as the attacks: a plan step known only at run time, a second
repo of a branch clean-up, a restore reaching another repo, a path-limited deny against push and reset,
and a plan whose later step was previewed against the repository as it was before the earlier ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.ops import service
from tests.fleets.gitbuild import bare_remote, commit_file, git, init_repo
from tests.fleets.ops_fleet import propose

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def policy(tmp_path, monkeypatch):
    """Write a policy file and point fleetdeck at it."""
    path = tmp_path / "policy.toml"
    monkeypatch.setenv("FLEETDECK_POLICY", str(path))

    def write(text: str) -> str:
        path.write_text(text)
        return str(path)
    return write


def test_a_plan_step_known_only_at_run_time_never_runs_under_a_ref_limited_auto_rule(ops_fleet, policy):
    """The commit's branch was never checked: `ref = "scratch/*"` let a plan auto-commit on main."""
    policy('[[rules]]\nop = ["branch", "stage", "commit", "plan"]\nref = "scratch/*"\naction = "auto"\n')
    work = ops_fleet["work"]
    head = git(work, "rev-parse", "HEAD").strip()
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "branch", "args": {"name": "scratch/x"}},
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "on main, unseen"}}]})
    assert made["status"] == "pending", made["policy"]
    assert git(work, "rev-parse", "HEAD").strip() == head
    assert made["preview"]["steps"][2]["preview"]["branch"] == "main" and made["policy"]["action"] == "approve"


def test_a_plan_whose_steps_all_match_the_auto_rule_still_runs_at_once(ops_fleet, policy):
    policy('[[rules]]\nop = "stage"\npath = "README.md"\naction = "auto"\n\n'
           '[[rules]]\nop = ["branch", "commit", "plan"]\nref = "scratch/*"\naction = "auto"\n')
    work = ops_fleet["work"]
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "branch", "args": {"name": "scratch/x", "checkout": True}},
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "on scratch"}}]})
    assert made["status"] == "completed", (made["policy"], made["error"])
    assert git(work, "log", "-1", "--format=%s", "scratch/x").strip() == "on scratch"


@pytest.fixture
def two(ops_fleet):
    work = ops_fleet["work"]
    other = init_repo(ops_fleet["root"] / "other", commits=2)
    git(other, "branch", "old", "HEAD~1")
    scan(ops_fleet["index"], [str(ops_fleet["root"])])
    return ops_fleet, work, other


def test_branch_delete_is_checked_against_every_repo_it_touches(two, policy):
    ops_fleet, work, other = two
    policy('[[rules]]\nop = "branch_delete"\nrepo = "*/other"\naction = "deny"\n')
    with pytest.raises(FleetError) as err:
        service.propose(ops_fleet["index"], "codex", "branch_delete", str(work), {"targets": [
            {"repo": str(work), "branches": ["topic"]}, {"repo": "other", "branches": ["old"]}]}, "tidy")
    assert err.value.code == "POLICY_DENIED" and "other" in err.value.message
    assert "old" in git(other, "branch", "--format=%(refname:short)").split()


def test_restore_is_checked_against_every_repo_its_point_touches(two, policy):
    ops_fleet, work, other = two
    policy("")
    done = service.approve(ops_fleet["index"], service.propose(
        ops_fleet["index"], "codex", "branch_delete", "other",
        {"targets": [{"repo": "other", "branches": ["old"]}]}, "tidy")["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    policy('[[rules]]\nop = "restore"\nrepo = "*/other"\naction = "deny"\n\n'
           '[[rules]]\nop = "restore"\naction = "auto"\n')
    with pytest.raises(FleetError) as err:
        service.propose(ops_fleet["index"], "codex", "restore", str(work), {"restore_point": done["id"]}, "undo")
    assert err.value.code == "POLICY_DENIED"
    assert "old" not in git(other, "branch", "--format=%(refname:short)").split()


def _policy_check(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-m", "fleet", "policy", "check", *args, "--json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_a_path_deny_matches_push_and_soft_and_mixed_reset(ops_fleet, policy, tmp_path):
    policy('[[rules]]\nop = ["push", "reset"]\npath = "secret/"\naction = "deny"\n')
    work = ops_fleet["work"]
    remote = bare_remote(tmp_path / "remote.git")
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "-u", "origin", "main")
    commit_file(work, "secret/key.txt", "k\n", "add a key")
    commit_file(work, "src/other.py", "x = 1\n", "unrelated")
    assert _policy_check("codex", "push", str(work), "--path", "secret/key.txt")["action"] == "deny"
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "push", {}, agent="codex")
    assert err.value.code == "POLICY_DENIED"
    for mode in ("soft", "mixed"):
        with pytest.raises(FleetError) as err:
            propose(ops_fleet, "reset", {"mode": mode, "target": "HEAD~2"}, agent="codex")
        assert err.value.code == "POLICY_DENIED", mode
    made = propose(ops_fleet, "reset", {"mode": "soft", "target": "HEAD~1"}, agent="codex")
    assert made["status"] == "pending"  # dropping only src/other.py's commit is not denied


def test_a_plan_step_is_previewed_against_the_state_the_earlier_steps_leave(ops_fleet):
    """'stage a, then commit' showed the one file already staged and committed two."""
    work = ops_fleet["work"]
    git(work, "add", "notes.txt")
    before = (git(work, "status", "--porcelain=v2"), git(work, "rev-parse", "HEAD"), git(work, "stash", "list"))
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "two files"}}]})
    shown = sorted(f["path"] for f in made["preview"]["steps"][1]["preview"]["files"])
    assert shown == ["README.md", "notes.txt"]
    assert (git(work, "status", "--porcelain=v2"), git(work, "rev-parse", "HEAD"),
            git(work, "stash", "list")) == before  # previewing changed nothing in the repository
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert sorted(git(work, "show", "--name-only", "--format=", "HEAD").split()) == shown


def test_the_executor_judges_again_with_the_policy_as_it_is_when_it_runs(ops_fleet, policy):
    policy("")
    work = ops_fleet["work"]
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]}, agent="codex")
    policy('[[rules]]\nop = "stage"\npath = "README.md"\naction = "deny"\nnote = "added since"\n')
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("POLICY_DENIED") and "added since" in done["error"]
    assert done["result"] == {"touched": False} and git(work, "diff", "--cached", "--name-only") == ""


def test_a_path_deny_matches_a_restore_that_rewrites_the_path(ops_fleet, policy):
    """Undoing a soft reset moves the branch back over a commit that holds secret/key.txt: the restore
    rewrites that path although no file saved in the restore point names it."""
    policy("")
    work = ops_fleet["work"]
    commit_file(work, "secret/key.txt", "k\n", "add a key")
    done = service.approve(ops_fleet["index"], propose(ops_fleet, "reset", {"mode": "soft", "target": "HEAD~1"})[
        "proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    policy('[[rules]]\nop = "restore"\npath = "secret/"\naction = "deny"\n')
    with pytest.raises(FleetError) as err:
        service.propose(ops_fleet["index"], "codex", "restore", str(work), {"restore_point": done["id"]}, "undo")
    assert err.value.code == "POLICY_DENIED"
