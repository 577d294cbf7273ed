"""merge and rebase proposals on real repositories: previews (conflict preflight, the first conflicting commit
of a rebase), runs checked with git, conflicts aborted cleanly, and undo."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.ops import service
from fleet.ops.catalog import OPS as CATALOG
from tests.fleets.gitbuild import commit_file, git
from tests.fleets.ops_fleet import propose, run, state


def _diverge(work, conflict: bool = False):
    """topic gets two commits (the second touching README.md when `conflict`), main one of its own."""
    git(work, "checkout", "-q", "README.md")
    git(work, "checkout", "-q", "topic")
    commit_file(work, "topic.txt", "topic one\n", "topic one")
    commit_file(work, "README.md" if conflict else "topic2.txt", "topic two\n", "topic two")
    git(work, "checkout", "-q", "main")
    commit_file(work, "README.md" if conflict else "main.txt", "main side\n", "main change")


def test_every_op_in_the_catalog_has_its_preview_and_run():
    """One registry: once the executor is loaded, every op's class holds the preview and run its module bound."""
    assert service.OPS is CATALOG
    for op, spec in CATALOG.items():
        assert "preview" in spec.__dict__ and "run" in spec.__dict__, op


@pytest.mark.parametrize("mode", ["merge", "squash"])
def test_merge_runs_and_undoes(ops_fleet, mode):
    work = ops_fleet["work"]
    _diverge(work)
    before = state(work)
    made = propose(ops_fleet, "merge", {"source": "topic", "mode": mode})
    assert made["preview"]["preflight"]["result"] == "clean"
    assert [c["subject"] for c in made["preview"]["commits_arriving"]] == ["topic two", "topic one"]
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    parents = git(work, "log", "-1", "--format=%P").split()
    assert len(parents) == (2 if mode == "merge" else 1)
    assert "Proposed-by: claude-code" in git(work, "log", "-1", "--format=%B")
    assert (work / "topic2.txt").exists()
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert state(work) == before


def test_merge_ff_only(ops_fleet):
    work = ops_fleet["work"]
    git(work, "checkout", "-q", "README.md")
    git(work, "checkout", "-q", "topic")
    commit_file(work, "ff.txt", "ff\n", "ahead")
    git(work, "checkout", "-q", "main")
    done = run(ops_fleet, "merge", {"source": "topic", "mode": "ff_only"})
    assert done["status"] == "completed"
    assert git(work, "rev-parse", "main").strip() == git(work, "rev-parse", "topic").strip()


def test_conflicting_merge_is_previewed_and_aborted(ops_fleet):
    work = ops_fleet["work"]
    _diverge(work, conflict=True)
    before = state(work)
    made = propose(ops_fleet, "merge", {"source": "topic"})
    assert made["preview"]["preflight"]["result"] == "conflicts"
    assert made["preview"]["preflight"]["conflicted_paths"] == ["README.md"]
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "README.md" in done["error"] and "aborted" in done["error"]
    assert state(work) == before
    assert not (work / ".git" / "MERGE_HEAD").exists()


@pytest.mark.slow
def test_rebase_runs_and_undoes(ops_fleet):
    work = ops_fleet["work"]
    _diverge(work)
    git(work, "checkout", "-q", "topic")
    before = state(work)
    made = propose(ops_fleet, "rebase", {"onto": "main"})
    assert made["preview"]["preflight"] == {"result": "clean", "first_conflict": None, "replayed": 2}
    assert made["risk"] == "high" and made["preview"]["rewrites_history"] is True
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert git(work, "merge-base", "--is-ancestor", "main", "topic", check=False) == ""
    assert git(work, "log", "--format=%s", "-3").splitlines() == ["topic two", "topic one", "main change"]
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert state(work) == before


def test_rebase_preflight_names_the_first_conflicting_commit(ops_fleet):
    work = ops_fleet["work"]
    _diverge(work, conflict=True)
    git(work, "checkout", "-q", "topic")
    second = git(work, "rev-parse", "HEAD").strip()
    before = state(work)
    objects = git(work, "count-objects", "-v")
    made = propose(ops_fleet, "rebase", {"onto": "main"})
    first = made["preview"]["preflight"]["first_conflict"]
    assert (first["sha"], first["subject"], first["paths"]) == (second, "topic two", ["README.md"])
    assert made["preview"]["preflight"]["replayed"] == 1
    assert git(work, "count-objects", "-v") == objects  # the preflight wrote nothing into the repo
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "aborted" in done["error"]
    assert state(work) == before


@pytest.mark.parametrize("op,args,code", [
    ("merge", {"source": "--no-verify"}, "BAD_REF"),
    ("merge", {"source": "topic", "mode": "octopus"}, "BAD_ARGUMENT"),
    ("merge", {"source": "HEAD~1"}, "BAD_ARGUMENT"),  # already merged
    ("rebase", {"onto": "-i"}, "BAD_REF"),
    ("rebase", {"onto": "HEAD~1"}, "BAD_ARGUMENT"),  # nothing to rebase
])
def test_bad_merge_and_rebase_arguments(ops_fleet, op, args, code):
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, op, args)
    assert err.value.code == code
