"""Undo never loses a byte: the attacks of issue 23 part 4, with real git.

Each op below changes, deletes or overwrites a file that `git status` does not list as changed (untracked,
ignored by .gitignore, excluded by .git/info/exclude), and the undo must bring back its exact bytes, mode
and type; an undo that would overwrite a file changed since the op (even one git status hides) is STALE.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from fleet.errors import FleetError
from fleet.ops import service
from tests.fleets.gitbuild import git, write
from tests.fleets.ops_fleet import run
from tests.fleets.treesnap import exact


def _envy(work) -> None:
    """Branch `envy` tracks `.env` and `u.txt`; main ignores `.env` and holds a private one (mode 0600)."""
    git(work, "checkout", "-q", "-b", "envy")
    write(work / ".env", "SECRET=from-envy\n")
    write(work / "u.txt", "u from envy\n")
    git(work, "add", "-f", ".env", "u.txt")
    git(work, "commit", "-q", "-m", "envy tracks .env")
    git(work, "checkout", "-q", "main")
    write(work / ".gitignore", ".env\n")
    git(work, "add", ".gitignore")
    git(work, "commit", "-q", "-m", "ignore .env")
    write(work / ".env", "SECRET=the person's own\n")
    os.chmod(work / ".env", 0o600)


def _exclude(work, name: str) -> None:
    with open(work / ".git" / "info" / "exclude", "a") as fh:
        fh.write(name + "\n")


def _undo_restores(ops_fleet, op: str, args: dict, changed: str, *, before=None) -> None:
    work = ops_fleet["work"]
    before = before or exact(work)
    done = run(ops_fleet, op, args)
    assert done["status"] in ("completed", "failed"), done["error"]
    assert exact(work)["files"].get(changed) != before["files"].get(changed), "the op did not touch it"
    undone = service.undo(ops_fleet["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    assert exact(work) == before


def test_patch_deleting_an_untracked_file_is_undone(ops_fleet):
    patch = ("diff --git a/notes.txt b/notes.txt\ndeleted file mode 100644\n--- a/notes.txt\n+++ /dev/null\n"
             "@@ -1 +0,0 @@\n-untracked notes\n")
    _undo_restores(ops_fleet, "patch", {"patch": patch}, "notes.txt")


def test_patch_editing_an_excluded_file_is_undone(ops_fleet):
    work = ops_fleet["work"]
    write(work / "local.cfg", "mine\n")
    os.chmod(work / "local.cfg", 0o640)
    _exclude(work, "local.cfg")
    patch = "--- a/local.cfg\n+++ b/local.cfg\n@@ -1 +1 @@\n-mine\n+theirs\n"
    _undo_restores(ops_fleet, "patch", {"patch": patch}, "local.cfg")


def test_checkout_overwriting_an_ignored_env_is_undone(ops_fleet):
    _envy(ops_fleet["work"])
    _undo_restores(ops_fleet, "checkout", {"ref": "envy"}, ".env")


def test_branch_checkout_overwriting_an_ignored_env_is_undone(ops_fleet):
    _envy(ops_fleet["work"])
    _undo_restores(ops_fleet, "branch", {"name": "side", "start_point": "envy", "checkout": True}, ".env")


def test_checkout_overwriting_an_excluded_symlink_is_undone(ops_fleet):
    work = ops_fleet["work"]
    _envy(work)
    os.unlink(work / ".env")
    os.symlink("../elsewhere/.env", work / ".env")
    _undo_restores(ops_fleet, "checkout", {"ref": "envy"}, ".env")


def test_merge_overwriting_an_ignored_env_is_undone(ops_fleet):
    _envy(ops_fleet["work"])
    _undo_restores(ops_fleet, "merge", {"source": "envy"}, ".env")


@pytest.mark.parametrize("mode", ["hard", "keep", "merge"])
def test_reset_overwriting_an_ignored_env_is_undone(ops_fleet, mode):
    work = ops_fleet["work"]
    _envy(work)
    if mode != "hard":
        git(work, "checkout", "-q", "--", "README.md")
    _undo_restores(ops_fleet, "reset", {"mode": mode, "target": "envy"}, ".env")


def test_hard_reset_overwriting_an_untracked_file_is_undone(ops_fleet):
    work = ops_fleet["work"]
    _envy(work)
    write(work / "u.txt", "the person's untracked u\n")
    os.chmod(work / "u.txt", 0o755)
    _undo_restores(ops_fleet, "reset", {"mode": "hard", "target": "envy"}, "u.txt")


def test_rebase_overwriting_an_ignored_env_is_undone(ops_fleet):
    work = ops_fleet["work"]
    _envy(work)
    git(work, "checkout", "-q", "--", "README.md")
    _undo_restores(ops_fleet, "rebase", {"onto": "envy"}, ".env")


def test_undo_refuses_to_overwrite_a_newer_excluded_file(ops_fleet):
    """The discarded untracked file is made again and hidden from git status: the undo is STALE, not a
    silent overwrite."""
    work = ops_fleet["work"]
    done = run(ops_fleet, "discard", {"paths": ["notes.txt"], "include_untracked": True})
    assert done["status"] == "completed" and not (work / "notes.txt").exists()
    write(work / "notes.txt", "newer notes, hidden from status\n")
    _exclude(work, "notes.txt")
    with pytest.raises(FleetError) as err:
        service.undo(ops_fleet["index"], done["id"], "cli")
    assert err.value.code == "STALE" and "notes.txt" in err.value.message
    assert (work / "notes.txt").read_text() == "newer notes, hidden from status\n"


def test_undo_refuses_to_overwrite_a_newer_ignored_file_a_reset_deleted(ops_fleet):
    work = ops_fleet["work"]
    done = run(ops_fleet, "reset", {"mode": "hard", "target": "HEAD~1"})
    assert done["status"] == "completed" and not (work / "src" / "app.py").exists()
    write(work / "src" / "app.py", "print('the person wrote this since')\n")
    write(work / ".gitignore", "src/\n")
    _exclude(work, ".gitignore")
    with pytest.raises(FleetError) as err:
        service.undo(ops_fleet["index"], done["id"], "cli")
    assert err.value.code == "STALE" and "src/app.py" in err.value.message
    assert (work / "src" / "app.py").read_text() == "print('the person wrote this since')\n"


def test_undo_refuses_when_an_overwritten_ignored_file_changed_since(ops_fleet):
    work = ops_fleet["work"]
    _envy(work)
    done = run(ops_fleet, "checkout", {"ref": "envy"})
    git(work, "update-index", "--assume-unchanged", ".env")
    write(work / ".env", "SECRET=edited after the checkout\n")
    with pytest.raises(FleetError) as err:
        service.undo(ops_fleet["index"], done["id"], "cli")
    assert err.value.code == "STALE" and ".env" in err.value.message


def test_previews_mark_the_untracked_and_ignored_files_git_would_overwrite(ops_fleet, capsys):
    from fleet.cli import main as cli_main

    work = ops_fleet["work"]
    _envy(work)
    write(work / "u.txt", "the person's untracked u\n")
    for op, args in (("checkout", {"ref": "envy"}), ("reset", {"mode": "hard", "target": "envy"}),
                     ("merge", {"source": "envy"}), ("branch", {"name": "b", "start_point": "envy", "checkout": True})):
        preview = service.propose(ops_fleet["index"], "claude-code", op, str(work), args, "t", dry_run=True)["preview"]
        marks = {f["path"]: (f["change"], f["overwrites"]) for f in preview["changes_files"]}
        assert marks[".env"] == ("added", "ignored") and marks["u.txt"] == ("added", "untracked"), op
        assert preview["changes_files_count"] == 3 and preview["changes_overwrite_count"] == 2
    made = service.propose(ops_fleet["index"], "claude-code", "checkout", str(work), {"ref": "envy"}, "t")
    capsys.readouterr()
    assert cli_main(["--db", str(ops_fleet["db"]), "proposals", "show", made["proposal_id"]]) == 0
    shown = capsys.readouterr().out
    assert "files it writes: 3 (2 overwrite a file git does not track)" in shown
    assert "added        .env  OVERWRITES IGNORED FILE" in shown
    assert "added        u.txt  OVERWRITES UNTRACKED FILE" in shown


def test_a_restore_point_never_reads_through_a_folder_swapped_for_a_link(ops_fleet, tmp_path):
    """Attack: branch `keys` tracks `lib/id_rsa`; on main the agent makes `lib` a link to a folder outside
    the fleet it may not read, then proposes the checkout. The restore point must save the link, never the
    file behind it (it would land in the repository's objects, readable with `git cat-file`)."""
    work = ops_fleet["work"]
    outside = tmp_path / "dot-ssh"
    outside.mkdir()
    (outside / "id_rsa").write_text("PRIVATE KEY\n")
    git(work, "checkout", "-q", "-b", "keys")
    write(work / "lib" / "id_rsa", "placeholder\n")
    git(work, "add", "lib")
    git(work, "commit", "-q", "-m", "keys")
    git(work, "checkout", "-q", "main")
    os.symlink(outside, work / "lib")
    secret = git(work, "hash-object", "--no-filters", str(outside / "id_rsa")).strip()
    done = run(ops_fleet, "checkout", {"ref": "keys"})
    assert done["status"] in ("completed", "failed"), done["error"]
    probe = subprocess.run(["git", "-C", str(work), "cat-file", "-e", secret])
    assert probe.returncode != 0                      # the outside file never entered the repository
    undone = service.undo(ops_fleet["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    assert os.readlink(work / "lib") == str(outside)   # the link back, as it was
    assert (outside / "id_rsa").read_text() == "PRIVATE KEY\n"


def test_a_repo_whose_index_has_stale_stat_data_can_be_changed_and_undone(ops_fleet):
    """A tracked file touched (same bytes, new mtime) leaves the index's stat data stale, as any editor's save
    or a build does. The restore point's `git stash create` ran without optional locks, could not refresh the
    index, and exited 1: every approval there failed (GIT_FAILED) until the person ran `git update-index
    --refresh`. The restore point now refreshes the index (stat data only) before it saves anything."""
    work = ops_fleet["work"]
    git(work, "checkout", "-q", "--", ".")                      # no change to stash: only stale stat data
    tracked = next(p for p in git(work, "ls-files").splitlines() if (work / p).is_file())
    stamp = os.stat(work / tracked).st_mtime + 5
    os.utime(work / tracked, (stamp, stamp))
    assert git(work, "--no-optional-locks", "diff-files", "--name-only").strip() == tracked  # stat differs
    before = exact(work)
    done = run(ops_fleet, "branch", {"name": "side", "checkout": True})
    assert done["status"] == "completed", done["error"]
    assert git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/side"
    undone = service.undo(ops_fleet["index"], done["id"], "cli")
    assert undone["status"] == "completed", undone["error"]
    assert exact(work) == before
