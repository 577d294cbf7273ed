"""Giving work back as a proposal (`restore_snapshot`), and the executor's snapshot before every approved
proposal: real repositories, real git, real SQLite; git and `cmp`-style byte comparison are the oracle."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.ops import proposals, service
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from fleet.snapshot.timeline import snapshots
from tests.fleets.gitbuild import git, write
from tests.fleets.ops_fleet import propose, run, state


def _tree(fleet: dict) -> WorkTree:
    work = str(fleet["work"])
    return WorkTree(work, f"{work}/.git", f"{work}/.git")


@pytest.fixture
def lost(ops_fleet) -> dict:
    """README.md edited and notes.txt untracked, snapshotted, then thrown away by `git reset --hard` + clean."""
    work = ops_fleet["work"]
    write(work / "README.md", "precious edit\n")
    kept = take(_tree(ops_fleet), ops_fleet["db"], "manual")
    git(work, "reset", "-q", "--hard")
    git(work, "clean", "-q", "-f")
    ops_fleet["kept"] = kept
    return ops_fleet


def test_the_executor_snapshots_before_every_approved_proposal(ops_fleet) -> None:
    done = run(ops_fleet, "stage", {"paths": ["README.md"]})
    assert done["status"] == "completed"
    [snap] = [s for s in snapshots(_tree(ops_fleet), ops_fleet["db"]) if s["trigger"].startswith("proposal:")]
    assert snap["trigger"] == f"proposal:{done['id']}"
    # taken before the op ran: README.md is not staged in the snapshot's index tree, the edit is in its tree
    assert git(ops_fleet["work"], "diff", "--cached", "--name-only") == "README.md\n"


def test_a_failing_snapshot_never_blocks_the_op(ops_fleet, tmp_path, monkeypatch) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text("[snapshots]\nenabled = false\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    done = run(ops_fleet, "stage", {"paths": ["README.md"]})
    assert done["status"] == "completed"
    assert snapshots(_tree(ops_fleet), ops_fleet["db"]) == []


def test_restore_snapshot_previews_changes_nothing_then_gives_the_bytes_back(lost) -> None:
    work, kept = lost["work"], lost["kept"]
    before = state(work)
    made = propose(lost, "restore_snapshot", {"snapshot": kept["id"][:12]})
    assert made["status"] == "pending" and made["risk"] == "medium"
    preview = made["preview"]
    assert preview["snapshot"] == kept["id"] and preview["undoable"] is True
    assert {f["path"]: f["kind"] for f in preview["files"]} == {"README.md": "restore", "notes.txt": "restore"}
    assert "+precious edit" in preview["diff"]
    assert state(work) == before                       # a preview writes nothing into the repository
    done = service.approve(lost["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert (work / "README.md").read_bytes() == b"precious edit\n"
    assert (work / "notes.txt").read_bytes() == b"untracked notes\n"
    assert git(work, "status", "--porcelain", "-uall") == " M README.md\n?? notes.txt\n"
    assert done["result"]["snapshot_before"] and sorted(done["result"]["restored"]) == ["README.md", "notes.txt"]
    # the undo (the restore point holds every path it wrote) brings the discarded state back exactly
    undone = service.undo(lost["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    assert state(work) == before
    assert proposals.get(lost["index"], done["id"])["status"] == "undone"


def test_restore_snapshot_of_one_path_leaves_the_rest(lost) -> None:
    work = lost["work"]
    done = run(lost, "restore_snapshot", {"snapshot": lost["kept"]["id"], "paths": ["notes.txt"]})
    assert done["status"] == "completed", done["error"]
    assert (work / "notes.txt").exists() and git(work, "diff", "--name-only") == ""


def test_a_file_changed_after_the_preview_is_not_overwritten(lost) -> None:
    """The newer work the person never saw must survive: the preview pins every path it would write."""
    work = lost["work"]
    made = propose(lost, "restore_snapshot", {"snapshot": lost["kept"]["id"]})
    write(work / "README.md", "written after the preview\n")
    done = service.approve(lost["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE")
    assert (work / "README.md").read_bytes() == b"written after the preview\n"


def test_restore_snapshot_is_policy_checked_and_refuses_bad_arguments(lost, tmp_path, monkeypatch) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\nop = "restore_snapshot"\naction = "deny"\nnote = "not here"\n')
    monkeypatch.setenv("FLEETDECK_POLICY", str(policy))
    with pytest.raises(FleetError) as err:
        propose(lost, "restore_snapshot", {"snapshot": lost["kept"]["id"]})
    assert err.value.code == "POLICY_DENIED"
    monkeypatch.delenv("FLEETDECK_POLICY")
    for args, code in (({"snapshot": "zz"}, "BAD_ARGUMENT"), ({"snapshot": "0" * 40}, "NOT_FOUND"),
                       ({"snapshot": lost["kept"]["id"], "paths": [".git/config"]}, "BAD_PATH"),
                       ({"snapshot": lost["kept"]["id"], "paths": ["../x"]}, "BAD_PATH"),
                       ({"snapshot": lost["kept"]["id"], "force": True}, "BAD_ARGUMENT")):
        with pytest.raises(FleetError) as err:
            propose(lost, "restore_snapshot", args)
        assert err.value.code == code, args
    take(_tree(lost), lost["db"], "manual")
    git(lost["work"], "status")
    with pytest.raises(FleetError) as err:   # nothing differs from the newest snapshot: nothing to propose
        propose(lost, "restore_snapshot", {"snapshot": snapshots(_tree(lost), lost["db"])[0]["id"]})
    assert err.value.code == "BAD_ARGUMENT"
