"""plan proposals: steps checked up front, run in order, stopped at the first failure, undone at once."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.ops import service
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import propose, state


def test_plan_branch_stage_commit_then_undo(ops_fleet):
    work = ops_fleet["work"]
    before = state(work)
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "branch", "args": {"name": "feature/plan", "checkout": True}},
        {"op": "stage", "args": {"paths": ["README.md", "notes.txt"]}},
        {"op": "commit", "args": {"message": "planned commit"}},
    ]})
    steps = made["preview"]["steps"]
    assert [s["op"] for s in steps] == ["branch", "stage", "commit"]
    assert steps[0]["preview"]["branch"] == "feature/plan"
    assert steps[2]["preview"] is None and "nothing to commit" in steps[2]["previewed_when_it_runs"]
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/feature/plan"
    assert git(work, "log", "-1", "--format=%s").strip() == "planned commit"
    assert git(work, "status", "--porcelain") == ""
    undone = service.undo(ops_fleet["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    assert state(work) == before


def test_plan_stops_at_the_first_failure(ops_fleet):
    work = ops_fleet["work"]
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "checkout", "args": {"ref": "topic"}},
        {"op": "commit", "args": {"message": "never"}},
    ]})
    git(work, "branch", "-f", "topic", "HEAD~1")  # moved after the preview: the whole plan is stale
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "STALE" in done["error"]
    git(work, "branch", "-f", "topic", "HEAD")
    write_conflict = work / "src" / "app.py"
    git(work, "checkout", "-q", "-b", "side")
    write_conflict.write_text("side version\n")
    git(work, "commit", "-q", "-m", "side change", "--", "src/app.py")
    git(work, "checkout", "-q", "main")
    write_conflict.write_text("local edit\n")
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "checkout", "args": {"ref": "side"}},
        {"op": "commit", "args": {"message": "never"}},
    ]})
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "step 2 (checkout)" in done["error"]
    assert [s["status"] for s in done["result"]["steps"]] == ["completed", "failed"]
    assert git(work, "log", "-1", "--format=%s").strip() == "add app"
    assert git(work, "diff", "--cached", "--name-only") == "README.md\n"  # step 1 ran; undo is there
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert git(work, "diff", "--cached", "--name-only") == ""


@pytest.mark.parametrize("steps,code", [
    ([], "BAD_ARGUMENT"),
    ([{"op": "push", "args": {}}], "BAD_ARGUMENT"),
    ([{"op": "plan", "args": {"steps": []}}], "BAD_ARGUMENT"),
    ([{"op": "restore", "args": {"restore_point": "p-x"}}], "BAD_ARGUMENT"),
    ([{"op": "stage", "args": {"all": True}}] * 11, "BAD_ARGUMENT"),
    ([{"op": "stage", "args": {"all": True}}, {"op": "checkout", "args": {"ref": "--orphan=x"}}], "BAD_REF"),
    ([{"op": "stage", "args": {"all": True}}, {"op": "stage", "args": {"paths": ["../x"]}}], "BAD_PATH"),
    ([{"op": "stage", "args": {"all": True}, "extra": 1}], "BAD_ARGUMENT"),
])
def test_bad_plans(ops_fleet, steps, code):
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "plan", {"steps": steps})
    assert err.value.code == code


def test_plan_risk_is_its_riskiest_step(ops_fleet):
    git(ops_fleet["work"], "add", "README.md")
    made = propose(ops_fleet, "plan", {"steps": [{"op": "commit", "args": {"message": "x", "amend": True}}]})
    assert made["risk"] == "high"
    made = propose(ops_fleet, "plan", {"steps": [{"op": "stage", "args": {"all": True}}]})
    assert made["risk"] == "low"
