"""The executor on real repositories: every core op runs as approved, git confirms it, and undo brings back
exactly the state before (HEAD, branches, stashes, index and every file's bytes, untracked ones included)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from fleet.errors import FleetError
from fleet.ops import proposals, restorepoints, service
from tests.fleets.gitbuild import commit_file, git, write
from tests.fleets.ops_fleet import propose, run, state


def _prepare_stash(work):
    git(work, "stash", "push", "-q", "-m", "saved idea")


CASES = [
    ("stage", {"paths": ["README.md", "notes.txt"]}, None,
     lambda w: git(w, "diff", "--cached", "--name-only") == "README.md\nnotes.txt\n"),
    ("stage", {"all": True}, None, lambda w: "notes.txt" in git(w, "diff", "--cached", "--name-only")),
    ("unstage", {"paths": ["README.md"]}, lambda w: git(w, "add", "README.md"),
     lambda w: git(w, "diff", "--cached", "--name-only") == ""),
    ("commit", {"message": "docs: edit readme"}, lambda w: git(w, "add", "README.md"),
     lambda w: git(w, "log", "-1", "--format=%s|%an|%(trailers:key=Proposed-by,valueonly)").strip()
     == "docs: edit readme|Test Person|claude-code"),
    ("commit", {"message": "only readme", "paths": ["README.md"]}, None,
     lambda w: git(w, "show", "--name-only", "--format=", "HEAD") == "README.md\n"),
    ("commit", {"message": "amended", "amend": True}, None,
     lambda w: git(w, "log", "-1", "--format=%s").strip() == "amended"),
    ("branch", {"name": "feature/x", "start_point": "HEAD~1"}, None,
     lambda w: git(w, "rev-parse", "feature/x").strip() == git(w, "rev-parse", "HEAD~1").strip()),
    ("branch", {"name": "feature/y", "checkout": True}, None,
     lambda w: git(w, "symbolic-ref", "HEAD").strip() == "refs/heads/feature/y"),
    ("checkout", {"ref": "topic"}, lambda w: git(w, "checkout", "-q", "README.md"),
     lambda w: git(w, "symbolic-ref", "HEAD").strip() == "refs/heads/topic"),
    ("checkout", {"ref": "HEAD~1", "detach": True}, None,
     lambda w: git(w, "symbolic-ref", "-q", "HEAD", check=False) == ""),
    ("stash", {"message": "wip", "include_untracked": True}, None,
     lambda w: "wip" in git(w, "stash", "list") and git(w, "status", "--porcelain") == ""),
    ("stash_pop", {}, _prepare_stash, lambda w: git(w, "stash", "list") == ""),
    ("reset", {"mode": "soft", "target": "HEAD~1"}, None,
     lambda w: "src/app.py" in git(w, "diff", "--cached", "--name-only")),
    ("reset", {"mode": "mixed", "target": "HEAD~1"}, None,
     lambda w: git(w, "rev-parse", "HEAD").strip() == git(w, "rev-parse", "ORIG_HEAD~1").strip()),
    ("reset", {"mode": "hard", "target": "HEAD~2"}, None,
     lambda w: git(w, "status", "--porcelain") == "?? notes.txt\n"),
    ("discard", {"paths": ["README.md", "notes.txt"], "include_untracked": True}, None,
     lambda w: git(w, "status", "--porcelain") == ""),
]


@pytest.mark.parametrize("op,args,prepare,check", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_runs_and_undo_restores(ops_fleet, op, args, prepare, check):
    work = ops_fleet["work"]
    if prepare:
        prepare(work)
    before = state(work)
    done = run(ops_fleet, op, args)
    assert done["status"] == "completed", done["error"]
    assert check(work), git(work, "status")
    assert state(work) != before
    point = restorepoints.details(ops_fleet["index"], done["restore_point"])
    assert git(work, "rev-parse", f"refs/fleetdeck/restore/{done['id']}/HEAD").strip() == before["head"]
    assert point["undoable"]
    undone = service.undo(ops_fleet["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    after = state(work)
    assert after == before


def test_discard_keeps_exact_bytes_of_untracked_and_binary(ops_fleet):
    work = ops_fleet["work"]
    write(work / "blob.bin", bytes(range(256)) * 3)
    write(work / "deep" / "dir" / "x.txt", "x\r\nno newline at end")
    before = state(work)
    done = run(ops_fleet, "discard", {"paths": ["blob.bin", "deep", "README.md"], "include_untracked": True})
    assert done["status"] == "completed"
    assert not (work / "blob.bin").exists() and not (work / "deep" / "dir" / "x.txt").exists()
    saved = {f["path"] for f in restorepoints.details(ops_fleet["index"], done["id"])["files"]}
    assert {"blob.bin", "deep/dir/x.txt", "README.md"} <= saved
    service.undo(ops_fleet["index"], done["id"], "cli")
    assert state(work) == before


def test_moved_head_fails_and_touches_nothing(ops_fleet):
    work = ops_fleet["work"]
    git(work, "add", "README.md")
    made = propose(ops_fleet, "commit", {"message": "will be stale"})
    commit_file(work, "other.txt", "someone else\n", "a person committed meanwhile")
    before = state(work)
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE")
    assert "HEAD moved" in done["error"]
    assert state(work) == before
    assert done["restore_point"] is None


def test_target_ref_moved_fails(ops_fleet):
    work = ops_fleet["work"]
    made = propose(ops_fleet, "checkout", {"ref": "topic"})
    git(work, "branch", "-f", "topic", "HEAD~1")
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "refs/heads/topic moved" in done["error"]
    assert git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/main"


def test_file_edited_after_discard_preview_fails(ops_fleet):
    work = ops_fleet["work"]
    made = propose(ops_fleet, "discard", {"paths": ["README.md"]})
    write(work / "README.md", "edited again after the preview\n")
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "STALE" in done["error"]
    assert (work / "README.md").read_text() == "edited again after the preview\n"


def test_index_change_after_commit_preview_fails(ops_fleet):
    work = ops_fleet["work"]
    git(work, "add", "README.md")
    made = propose(ops_fleet, "commit", {"message": "readme"})
    git(work, "add", "notes.txt")  # something else would be committed now
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "index" in done["error"]
    assert git(work, "log", "-1", "--format=%s").strip() == "add app"


def test_undo_refuses_after_later_work(ops_fleet):
    work = ops_fleet["work"]
    done = run(ops_fleet, "stage", {"paths": ["README.md"]})
    write(work / "README.md", "later work\n")
    with pytest.raises(FleetError) as err:
        service.undo(ops_fleet["index"], done["id"], "cli")
    assert err.value.code == "STALE"
    assert (work / "README.md").read_text() == "later work\n"


def test_git_failure_is_recorded_and_undoable(ops_fleet):
    """A commit hook refuses: the proposal fails with git's message, and its restore point stays."""
    work = ops_fleet["work"]
    hook = work / ".git" / "hooks" / "pre-commit"
    write(hook, "#!/bin/sh\necho 'hook says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    git(work, "add", "README.md")
    done = run(ops_fleet, "commit", {"message": "refused"})
    assert done["status"] == "failed"
    assert "hook says no" in done["result"]["stderr"]
    assert done["restore_point"] == done["id"]


def test_hooks_run_for_approved_commits(ops_fleet):
    work = ops_fleet["work"]
    hook = work / ".git" / "hooks" / "commit-msg"
    write(hook, "#!/bin/sh\necho 'Hooked: yes' >> \"$1\"\n")
    hook.chmod(0o755)
    git(work, "add", "README.md")
    done = run(ops_fleet, "commit", {"message": "with hook"})
    assert done["status"] == "completed"
    assert "Hooked: yes" in git(work, "log", "-1", "--format=%B")


def test_index_refreshed_after_execution(ops_fleet):
    index = ops_fleet["index"]
    run(ops_fleet, "stage", {"all": True})
    row = index.conn.execute("select staged, unstaged, untracked from repos where path = ?",
                             (str(ops_fleet["work"]),)).fetchone()
    assert row == (2, 0, 0)


def test_restore_list_and_refs(ops_fleet):
    done = run(ops_fleet, "stage", {"paths": ["README.md"]})
    listed = restorepoints.list_points(ops_fleet["index"], str(ops_fleet["work"]))
    assert [p["restore_point"] for p in listed["restore_points"]] == [done["id"]]
    refs = git(ops_fleet["work"], "for-each-ref", "--format=%(refname)", f"refs/fleetdeck/restore/{done['id']}")
    assert f"refs/fleetdeck/restore/{done['id']}/HEAD" in refs
    assert f"refs/fleetdeck/restore/{done['id']}/files" in refs
    assert proposals.get(ops_fleet["index"], done["id"])["restore_point"] == done["id"]


def test_restore_points_are_pruned_only_on_purpose(ops_fleet, capsys):
    from fleet.cli import main as cli_main

    done = run(ops_fleet, "stage", {"paths": ["README.md"]})
    work = ops_fleet["work"]
    assert git(work, "for-each-ref", f"refs/fleetdeck/restore/{done['id']}/") != ""
    assert cli_main(["--db", str(ops_fleet["db"]), "restore-points", str(work), "--prune", "p-other"]) == 1
    assert cli_main(["--db", str(ops_fleet["db"]), "restore-points", str(work), "--prune", done["id"], "--json"]) == 0
    assert git(work, "for-each-ref", f"refs/fleetdeck/restore/{done['id']}/") == ""
    assert restorepoints.list_points(ops_fleet["index"], str(work))["restore_points"] == []
    with pytest.raises(FleetError) as err:
        service.undo(ops_fleet["index"], done["id"], "cli")
    assert err.value.code == "NOT_FOUND"


@pytest.mark.slow
def test_an_undone_proposal_is_undone_and_an_undone_undo_brings_it_back(ops_fleet):
    """Undo makes the proposal `undone` (never `completed` with a commit no longer on the branch); undoing
    that undo puts the commit back, and the proposal back to `completed` with its own result."""
    index, work = ops_fleet["index"], ops_fleet["work"]
    git(work, "add", "README.md")
    done = run(ops_fleet, "commit", {"message": "docs: edit readme"})
    landed = git(work, "rev-parse", "HEAD").strip()
    assert done["status"] == "completed" and done["result"]["head"] == landed
    undo = service.undo(index, done["id"], "cli")
    row = service.show(index, done["id"])
    assert (row["status"], row["undone_by"]) == ("undone", undo["id"]) and row["undone_at"]
    assert row["result"]["head"] == git(work, "rev-parse", "HEAD").strip() != landed
    with pytest.raises(FleetError) as err:  # no second undo of the same proposal
        service.undo(index, done["id"], "cli")
    assert "undone" in err.value.message
    assert [r["id"] for r in proposals.list_proposals(index, "undone")["proposals"]] == [done["id"]]
    redo = service.undo(index, undo["id"], "cli")
    assert git(work, "rev-parse", "HEAD").strip() == landed
    back = service.show(index, done["id"])
    assert (back["status"], back["undone_by"], back["result"]) == ("completed", None, done["result"])
    assert service.show(index, undo["id"])["undone_by"] == redo["id"]


def test_undo_writes_reflog_messages_the_timeline_reads(ops_fleet):
    """An undo's ref moves carry `fleetdeck: undo <id>` in the reflogs (git is the oracle), so the timeline
    shows a named reset, never a blank `other` row."""
    from fleet.index.scan import refresh_repo
    from fleet.views.detail import timeline

    index, work = ops_fleet["index"], ops_fleet["work"]
    git(work, "add", "README.md")
    done = run(ops_fleet, "commit", {"message": "docs: edit readme"})
    service.undo(index, done["id"], "cli")
    for ref in ("HEAD", "refs/heads/main"):
        assert git(work, "reflog", "-1", "--format=%gs", ref).strip() == f"fleetdeck: undo {done['id']}", ref
    refresh_repo(index, str(work))
    events = timeline(index, index.repo(str(work))["id"])
    mine = [e for e in events if e["message"] == f"fleetdeck: undo {done['id']}"]
    assert mine and {e["kind"] for e in mine} == {"reset"}
    assert not [e for e in events if e["kind"] == "other" and not e["message"]]


def _no_global_config(monkeypatch, tmp_path):
    """A machine with no ~/.gitconfig at all (and no XDG one), and no identity from the environment."""
    home = tmp_path / "bare-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for var in ("EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)
    return home


def test_a_commit_without_a_git_identity_warns_in_its_preview(ops_fleet, monkeypatch, tmp_path):
    work = ops_fleet["work"]
    git(work, "add", "README.md")
    _no_global_config(monkeypatch, tmp_path)
    probe = subprocess.run(["git", "-C", str(work), "var", "GIT_AUTHOR_IDENT"], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")})
    if probe.returncode == 0:
        pytest.skip(f"git finds an identity on this machine without any config: {probe.stdout.strip()}")
    made = propose(ops_fleet, "commit", {"message": "docs: edit readme"})
    warning = made["preview"]["warning"]
    assert "no identity" in warning and "git config --global user.email" in warning
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "Author identity unknown" in done["result"]["stderr"]  # as warned


def test_a_commit_with_an_identity_has_no_warning(ops_fleet):
    git(ops_fleet["work"], "add", "README.md")
    assert "warning" not in propose(ops_fleet, "commit", {"message": "fine"})["preview"]


def test_no_gitconfig_at_all_is_an_empty_one_for_a_repo_with_filters(ops_fleet, monkeypatch, tmp_path):
    """A repository defining a filter makes fleetdeck read the person's trusted config; a missing
    ~/.gitconfig is an empty config, never GIT_FAILED `unable to read config file`."""
    work = ops_fleet["work"]
    git(work, "config", "user.name", "Repo Person")
    git(work, "config", "user.email", "repo@example.com")
    git(work, "config", "filter.upper.clean", "tr a-z A-Z")
    write(work / ".gitattributes", "*.up filter=upper\n")
    write(work / "x.up", "shout\n")
    home = _no_global_config(monkeypatch, tmp_path)
    assert not (home / ".gitconfig").exists()
    done = run(ops_fleet, "stage", {"paths": [".gitattributes", "x.up"]})
    assert done["status"] == "completed", done["error"]
    assert git(work, "diff", "--cached", "--name-only").split() == [".gitattributes", "x.up"]


def test_history_is_ordered_by_the_last_decision_not_by_creation(ops_fleet):
    index = ops_fleet["index"]
    first = propose(ops_fleet, "branch", {"name": "made-first"})
    second = propose(ops_fleet, "branch", {"name": "made-second"})
    service.reject(index, second["proposal_id"], "cli", "no")
    time.sleep(0.01)
    service.reject(index, first["proposal_id"], "cli", "no either")  # decided last, though made first
    history = [r["id"] for r in proposals.list_proposals(index)["proposals"] if r["status"] != "pending"]
    assert history[:2] == [first["proposal_id"], second["proposal_id"]]
