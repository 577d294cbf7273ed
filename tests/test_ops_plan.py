"""plan proposals: steps checked up front, run in order, stopped at the first failure, undone at once."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.ops import service
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import propose, state


@pytest.mark.slow
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
    # the commit is previewed against what the first two steps leave (a scratch copy): both files, on the branch
    assert steps[2]["preview"]["branch"] == "feature/plan"
    assert sorted(f["path"] for f in steps[2]["preview"]["files"]) == ["README.md", "notes.txt"]
    assert steps[2]["args"] == {"message": "planned commit"}
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/feature/plan"
    assert git(work, "log", "-1", "--format=%s").strip() == "planned commit"
    assert git(work, "status", "--porcelain") == ""
    undone = service.undo(ops_fleet["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    assert state(work) == before


@pytest.mark.slow
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
    with pytest.raises(FleetError) as err:  # the checkout would fail after step 1: refused up front
        propose(ops_fleet, "plan", {"steps": [
            {"op": "stage", "args": {"paths": ["README.md"]}},
            {"op": "checkout", "args": {"ref": "side"}},
            {"op": "commit", "args": {"message": "never"}}]})
    assert "step 2 (checkout) would fail" in err.value.message
    assert git(work, "diff", "--cached", "--name-only") == ""  # previewing changed nothing
    hook = work / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho refused by the hook >&2\nexit 1\n")
    hook.chmod(0o755)
    made = propose(ops_fleet, "plan", {"steps": [  # the person's hook runs only for real: step 2 fails then
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "never"}}]})
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "step 2 (commit)" in done["error"]
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


@pytest.mark.slow
def test_plans_take_merge_rebase_discard_reset_and_patch_steps(ops_fleet):
    """Each new step is previewed against what the steps before it leave, and the plan runs them all."""
    work = ops_fleet["work"]
    git(work, "checkout", "-q", "-b", "side", "HEAD~1")
    (work / "side.txt").write_text("side\n")
    git(work, "add", "side.txt")
    git(work, "commit", "-q", "-m", "side work")
    git(work, "checkout", "-q", "main")
    patch = git(work, "diff", "--", "README.md")
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "discard", "args": {"paths": ["README.md"]}},
        {"op": "patch", "args": {"patch": patch}},
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "readme again"}},
        {"op": "reset", "args": {"mode": "soft", "target": "HEAD~1"}},
        {"op": "commit", "args": {"message": "readme, recommitted"}},
        {"op": "merge", "args": {"source": "side"}},
    ]})
    steps = made["preview"]["steps"]
    assert made["risk"] == "high"  # discard
    assert steps[1]["files"] == ["README.md"] and steps[2]["files"] == ["README.md"]
    assert [c["subject"] for c in steps[4]["preview"]["commits_leaving"]] == ["readme again"]
    assert steps[6]["files"] == ["side.txt"] and steps[6]["preview"]["preflight"]["result"] == "clean"
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(work, "log", "--first-parent", "--format=%s", "-3").splitlines() == [
        "Merge side into main", "readme, recommitted", "add app"]
    assert (work / "README.md").read_text() == "edited\n" and (work / "side.txt").exists()

    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "branch", "args": {"name": "feature", "start_point": "side", "checkout": True}},
        {"op": "rebase", "args": {"onto": "topic"}}]})
    rebase = made["preview"]["steps"][1]
    assert rebase["preview"]["branch"] == "feature" and rebase["files"] == ["side.txt", "src/app.py"]
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(work, "log", "--format=%s", "-2", "feature").splitlines() == ["side work", "add app"]


def test_previewing_a_plan_runs_no_code_the_repository_defines(ops_fleet, tmp_path):
    work = ops_fleet["work"]
    marker = tmp_path / "ran"
    hook = work / ".git" / "hooks"
    hook.mkdir(exist_ok=True)
    for name in ("pre-commit", "post-commit", "post-checkout", "reference-transaction"):
        (hook / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        (hook / name).chmod(0o755)
    git(work, "config", "filter.evil.clean", f"sh -c 'echo clean >> {marker}; cat'")
    git(work, "config", "filter.evil.smudge", f"sh -c 'echo smudge >> {marker}; cat'")
    (work / ".gitattributes").write_text("* filter=evil\n")
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md", "notes.txt"]}},
        {"op": "commit", "args": {"message": "x"}},
        {"op": "branch", "args": {"name": "b2", "checkout": True}},
        {"op": "checkout", "args": {"ref": "main"}}]})
    assert made["preview"]["steps"][3]["preview"]["to"]["branch"] == "main"
    assert not marker.exists(), marker.read_text()


def test_a_step_known_only_at_run_time_is_policy_checked_when_it_runs(ops_fleet, tmp_path, monkeypatch):
    from fleet.ops import scratch

    monkeypatch.setattr(scratch, "MAX_FILES", 0)  # no scratch copy: steps 2.. are previewed when they run
    work = ops_fleet["work"]
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "m"}}]})
    step = made["preview"]["steps"][1]
    assert step["preview"] is None and "scratch copy" in step["previewed_when_it_runs"]
    assert made["status"] == "pending"
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\nop = "commit"\nref = "main"\naction = "deny"\n')
    monkeypatch.setenv("FLEETDECK_POLICY", str(policy))
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "POLICY_DENIED" in done["error"], done["error"]
    assert git(work, "log", "-1", "--format=%s").strip() == "add app"


def test_a_step_that_would_now_touch_other_paths_is_stale(ops_fleet):
    work = ops_fleet["work"]
    hook = work / ".git" / "hooks" / "post-index-change"  # runs for real after step 1 (never in the copy): stages more
    hook.write_text("#!/bin/sh\n[ -f .git/added ] || { touch .git/added; git add notes.txt; }\n")
    hook.chmod(0o755)
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "only the readme"}}]})
    assert made["preview"]["steps"][1]["files"] == ["README.md"]
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "step 2 (commit)" in done["error"] and "STALE" in done["error"]
    assert git(work, "log", "-1", "--format=%s").strip() == "add app"


def test_proposals_show_shows_what_runs(ops_fleet, capsys):
    """The CLI (`show`, and the approve prompt, which prints the same text) shows the message whole, each step
    with its arguments and files, the repo by its fleet path."""
    from fleet.cli import main as cli_main

    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md", "notes.txt"]}},
        {"op": "commit", "args": {"message": "subject\n\nbody line\x1b[31m"}}]})
    capsys.readouterr()
    assert cli_main(["--db", str(ops_fleet["db"]), "proposals", "show", made["proposal_id"]]) == 0
    out = capsys.readouterr().out
    assert "repo: fleet/work (" in out
    assert "step 1: stage: stage 2 files" in out and 'paths: ["README.md", "notes.txt"]' in out
    assert "step 2: commit: commit on main (2 files)" in out
    assert "  | subject\n" in out and "  | body line\\x1b[31m" in out  # whole, control characters visible
    assert "files it changes (2): README.md, notes.txt" in out


def test_the_scratch_copy_never_writes_through_a_link(ops_fleet, tmp_path):
    """A tracked symlink to a folder outside, replaced by a real folder: the copy would hold the link, and
    copying `d/f` into it would write outside. It is not made (the plan waits for a person instead)."""
    work = ops_fleet["work"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "d").symlink_to(outside)
    git(work, "add", "d")
    git(work, "commit", "-q", "-m", "a link")
    (work / "d").unlink()
    (work / "d").mkdir()
    (work / "d" / "f").write_text("mine\n")
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "m"}}]})
    assert made["preview"]["steps"][1]["preview"] is None and made["status"] == "pending"
    assert list(outside.iterdir()) == []


def test_the_scratch_copy_never_reads_through_a_folder_swapped_for_a_link(ops_fleet, tmp_path):
    """A tracked `keys/id_rsa` whose folder an agent swapped for a link to a folder outside the fleet: git
    sees the file deleted; the copy must not read what the link leads to (a later step's preview would show
    it)."""
    import json

    work = ops_fleet["work"]
    outside = tmp_path / "dot-ssh"
    outside.mkdir()
    (outside / "id_rsa").write_text("PRIVATE KEY\n")
    (work / "keys").mkdir()
    (work / "keys" / "id_rsa").write_text("placeholder\n")
    git(work, "add", "keys")
    git(work, "commit", "-q", "-m", "keys")
    (work / "keys" / "id_rsa").unlink()
    (work / "keys").rmdir()
    (work / "keys").symlink_to(outside)
    made = propose(ops_fleet, "plan", {"steps": [
        {"op": "stage", "args": {"paths": ["README.md"]}},
        {"op": "commit", "args": {"message": "m"}}]})
    assert "PRIVATE KEY" not in json.dumps(made)
    assert made["preview"]["steps"][1]["preview"] is not None     # the copy is faithful: keys is a link there
