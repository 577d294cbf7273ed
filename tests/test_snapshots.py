"""The safety net's snapshots against real destructive git commands: each loss is seen as discarded work and
given back byte for byte (bytes, modes, links, untracked files, the staged state), and taking a snapshot
changes nothing in the repository, hostile ones included."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet.snapshot.objects import object_id
from fleet.snapshot.restore import restore
from fleet.snapshot.shadow import WorkTree, open_shadow, snapshots_root
from fleet.snapshot.take import take
from fleet.snapshot.timeline import diff, discarded_events, snapshots
from tests.fleets.cli import fleetdeck_env, run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo, write
from tests.fleets.hostile import age_git_dir, fired, hostile_repo
from tests.fleets.hostile import snapshot as disk_state
from tests.fleets.hostile import snapshot_diff


def tree_of(repo: Path) -> WorkTree:
    return WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))


def files_of(root: Path, skip: tuple[str, ...] = (".git",)) -> dict[str, tuple]:
    """Every file under a working tree (.git aside): type, exec bit, bytes or link target."""
    out = {}
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.relpath(os.path.join(top, d), root) not in skip]
        for name in names + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            full = os.path.join(top, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            else:
                out[rel] = ("file", bool(st.st_mode & 0o100), Path(full).read_bytes())
    return out


def staged_state(repo: Path) -> str:
    return git(repo, "ls-files", "--stage")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A repository with tracked, exec, link, binary and non-ASCII files, a staged edit, an unstaged edit,
    untracked files (a folder too) and an ignored file."""
    repo = init_repo(tmp_path / "app")
    write(repo / ".gitignore", "*.log\n")
    write(repo / "src" / "a.py", "a = 1\n")
    write(repo / "src" / "b.py", "b = 1\n")
    write(repo / "bin" / "run.sh", "#!/bin/sh\necho run\n")
    (repo / "bin" / "run.sh").chmod(0o755)
    os.symlink("src/a.py", repo / "link")
    write(repo / "data.bin", bytes(range(256)) * 4)
    write(repo / "ünï.txt", "ünï\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tree")
    write(repo / "src" / "a.py", "a = 2  # unstaged\n")
    write(repo / "src" / "b.py", "b = 2  # staged\n")
    git(repo, "add", "src/b.py")
    write(repo / "notes.txt", "untracked notes\n")
    write(repo / "build" / "out" / "x.txt", "untracked folder\n")
    write(repo / "data.bin", bytes(range(255, -1, -1)) * 4)
    (repo / "bin" / "run.sh").chmod(0o644)
    write(repo / "app.log", "ignored\n")
    return repo


def _destroy(repo: Path, how: str) -> None:
    if how == "reset_hard":
        git(repo, "reset", "-q", "--hard")
    elif how == "checkout_dot":
        git(repo, "checkout", "-q", "--", ".")
    elif how == "restore_dot":
        git(repo, "restore", ".")
    elif how == "clean_fd":
        git(repo, "clean", "-fdq")
    elif how == "rm_rf":
        shutil.rmtree(repo / "src")
    else:
        raise ValueError(how)


LOST = {"reset_hard": {"src/a.py", "src/b.py", "data.bin", "bin/run.sh"},
        "checkout_dot": {"src/a.py", "data.bin", "bin/run.sh"},
        "restore_dot": {"src/a.py", "data.bin", "bin/run.sh"},
        "clean_fd": {"notes.txt", "build/out/x.txt"},
        "rm_rf": {"src/a.py", "src/b.py"}}


@pytest.mark.parametrize("how", sorted(LOST))
def test_destructive_command_is_seen_and_restored_byte_for_byte(work: Path, db_path: Path, how: str,
                                                                tmp_path: Path) -> None:
    before_files, before_index = files_of(work), staged_state(work)
    copy = tmp_path / "copy"
    shutil.copytree(work, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    first = take(tree_of(work), db_path, "manual")
    _destroy(work, how)
    assert files_of(work) != before_files
    after = take(tree_of(work), db_path, "manual")
    assert after["discarded"] is not None
    assert set(after["discarded"]["files"]) == LOST[how]
    assert after["discarded"]["bytes"] > 0
    events = discarded_events(tree_of(work), db_path)
    assert [e["restore_from"] for e in events] == [first["id"]]
    done = restore(tree_of(work), db_path, first["id"], index=True)
    assert files_of(work) == before_files            # bytes, exec bits, links, untracked files
    assert staged_state(work) == before_index        # the staged state
    assert git(work, "diff", "--cached") != ""
    assert done["snapshot_before"] == after["id"]     # the present was kept (unchanged since `after`)
    for path in LOST[how]:
        assert subprocess.run(["cmp", "--", str(copy / path), str(work / path)]).returncode == 0


def test_ignored_files_are_never_stored_and_never_touched(work: Path, db_path: Path) -> None:
    first = take(tree_of(work), db_path, "manual")
    shadow = open_shadow(snapshots_root(db_path), str(work), str(work / ".git" / "objects"), create=False)
    listing = shadow.git(["ls-tree", "-r", "--name-only", first["tree"]]).stdout.decode()
    assert "app.log" not in listing.split("\n") and "notes.txt" in listing.split("\n")
    (work / "app.log").write_text("changed ignored\n")
    git(work, "reset", "-q", "--hard")
    restore(tree_of(work), db_path, first["id"])
    assert (work / "app.log").read_text() == "changed ignored\n"


def test_stash_then_drop_is_discarded_only_at_the_drop(work: Path, db_path: Path) -> None:
    before = files_of(work)
    take(tree_of(work), db_path, "manual")
    git(work, "stash", "-q", "--include-untracked")
    stashed = take(tree_of(work), db_path, "manual")
    assert stashed["discarded"] is None               # the work moved into the stash: nothing lost yet
    git(work, "stash", "drop", "-q")
    dropped = take(tree_of(work), db_path, "manual")
    assert dropped["discarded"] is not None and dropped["discarded"]["stashes_dropped"] == stashed["stash"]
    event = discarded_events(tree_of(work), db_path)[0]
    git(work, "gc", "-q", "--prune=now")              # git forgets the dropped stash's objects
    restore(tree_of(work), db_path, event["restore_from"])
    restored = files_of(work)
    # the snapshot before the drop is the stashed (clean) tree; the stash itself is kept in the shadow store
    shadow = open_shadow(snapshots_root(db_path), str(work), str(work / ".git" / "objects"), create=False)
    tip = stashed["stash"][0]
    assert shadow.git(["cat-file", "-p", f"{tip}:src/a.py"]).stdout == before["src/a.py"][2]
    assert restored["src/a.py"][2] == b"a = 1\n"


def test_stash_pop_is_not_discarded(work: Path, db_path: Path) -> None:
    take(tree_of(work), db_path, "manual")
    git(work, "stash", "-q")
    take(tree_of(work), db_path, "manual")
    git(work, "stash", "pop", "-q")
    popped = take(tree_of(work), db_path, "manual")
    assert popped["discarded"] is None


def test_a_file_edited_three_times_each_version_restorable(work: Path, db_path: Path) -> None:
    ids = []
    for version in ("one\n", "two\n", "three\n"):
        write(work / "src" / "a.py", version)
        ids.append(take(tree_of(work), db_path, "manual")["id"])
    listed = snapshots(tree_of(work), db_path, path="src/a.py")
    assert [s["id"] for s in listed] == ids[::-1]
    assert all(not s["discarded"] for s in listed)    # editing is not discarding
    for snapshot_id, version in zip(ids, ("one\n", "two\n", "three\n")):
        restore(tree_of(work), db_path, snapshot_id, paths=["src/a.py"])
        assert (work / "src" / "a.py").read_text() == version
    text = diff(tree_of(work), db_path, ids[0], ids[1], "src/a.py")
    assert "-one" in text and "+two" in text


def test_unchanged_snapshot_is_not_kept(work: Path, db_path: Path) -> None:
    first = take(tree_of(work), db_path, "manual")
    again = take(tree_of(work), db_path, "sweep")
    assert again["unchanged"] and again["id"] == first["id"]
    assert len(snapshots(tree_of(work), db_path)) == 1


def test_dirty_linked_worktree_removed_by_force_comes_back(work: Path, db_path: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(work, "worktree", "add", "-q", "-b", "feature", str(linked))
    write(linked / "feature.txt", "feature work\n")
    write(linked / "src" / "a.py", "a = 'feature'\n")
    tree = WorkTree(str(linked), str(work / ".git" / "worktrees" / "linked"), str(work / ".git"))
    saved = take(tree, db_path, "manual")
    expected = files_of(linked, skip=())
    git(work, "worktree", "remove", "--force", str(linked))
    assert not linked.exists()
    git(work, "worktree", "add", "-q", str(linked), "feature")
    restore(tree, db_path, saved["id"])
    assert {k: v for k, v in files_of(linked, skip=()).items() if k != ".git"} == \
        {k: v for k, v in expected.items() if k != ".git"}


@pytest.mark.slow
def test_a_snapshot_changes_nothing_and_runs_nothing_in_a_hostile_repo(tmp_path: Path, db_path: Path) -> None:
    marker = tmp_path / "marker"
    repo = hostile_repo(tmp_path, "evil", marker)
    os.mkfifo(repo / "pipe")
    with open(repo / "sparse.bin", "wb") as fh:
        fh.truncate(1024 ** 3)
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("secret\n")
    os.symlink(outside, repo / "escape")
    age_git_dir(repo)
    before = disk_state(repo)
    started = time.monotonic()
    made = take(tree_of(repo), db_path, "manual")
    assert time.monotonic() - started < 20
    assert snapshot_diff(before, disk_state(repo)) == []
    assert fired(marker) == []
    reasons = {s["path"]: s["reason"] for s in made["skipped"]}
    assert "sparse.bin" in reasons and "max_file_bytes" in reasons["sparse.bin"]
    shadow = open_shadow(snapshots_root(db_path), str(repo), str(repo / ".git" / "objects"), create=False)
    entry = shadow.git(["ls-tree", made["tree"], "escape"]).stdout.decode()
    assert entry.startswith("120000 ")
    assert shadow.git(["cat-file", "-p", f"{made['tree']}:escape"]).stdout == str(outside).encode()
    assert stat.S_IMODE(os.stat(snapshots_root(db_path)).st_mode) == 0o700


def test_restore_refuses_paths_into_git_or_out_of_the_tree(work: Path, db_path: Path) -> None:
    from fleet.errors import FleetError

    first = take(tree_of(work), db_path, "manual")
    for bad in (".git/config", "../elsewhere", "/etc/passwd", "src/../../x"):
        with pytest.raises(FleetError) as caught:
            restore(tree_of(work), db_path, first["id"], paths=[bad])
        assert caught.value.code == "BAD_PATH"


def test_restore_never_writes_through_a_link_swapped_in_for_a_folder(work: Path, db_path: Path,
                                                                      tmp_path: Path) -> None:
    from fleet.errors import FleetError

    first = take(tree_of(work), db_path, "manual")
    shutil.rmtree(work / "src")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, work / "src")
    with pytest.raises(FleetError) as caught:                # a file under the link: refused, not written
        restore(tree_of(work), db_path, first["id"], paths=["src/a.py"])
    assert caught.value.code == "BAD_PATH" and list(elsewhere.iterdir()) == []
    restore(tree_of(work), db_path, first["id"], paths=["src"])   # the folder itself: the link is replaced
    assert list(elsewhere.iterdir()) == [] and not (work / "src").is_symlink()
    assert (work / "src" / "a.py").read_text() == "a = 2  # unstaged\n"


@pytest.mark.slow
def test_killed_mid_snapshot_leaves_no_half_snapshot(tmp_path: Path, db_path: Path) -> None:
    repo = init_repo(tmp_path / "big")
    for i in range(300):
        write(repo / "files" / f"f{i}.txt", f"{i}\n" * 200)
    tree = f"WorkTree({str(repo)!r}, {str(repo / '.git')!r}, {str(repo / '.git')!r})"
    script = ("import os, pathlib; from fleet.snapshot.shadow import WorkTree; from fleet.snapshot.take import take\n"
              "for i in range(10_000):\n"
              f"    for n in range(0, 300, 7): pathlib.Path({str(repo)!r}, 'files', f'f{{n}}.txt').write_text(f'{{os.getpid()}}-{{i}}')\n"
              f"    take({tree}, {str(db_path)!r}, 'manual')\n"
              f"    print(i, flush=True)\n")
    for delay in (1.3, 1.7, 2.1):
        proc = subprocess.Popen([sys.executable, "-c", script], env=fleetdeck_env(), stdout=subprocess.PIPE)
        assert proc.stdout.readline()                     # one snapshot done: the next is under way
        time.sleep(delay % 0.4)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    shadow = open_shadow(snapshots_root(db_path), str(repo), str(repo / ".git" / "objects"), create=False)
    listed = shadow.entries()
    assert len(listed) >= 3
    for meta in listed:                                   # every listed snapshot is whole
        shadow.git(["cat-file", "-e", meta["id"]])
        assert shadow.git(["ls-tree", "-r", meta["tree"]]).stdout.count(b"\n") == 301
    write(repo / "files" / "f0.txt", "after\n")
    last = take(tree_of(repo), db_path, "manual")
    assert shadow.git(["cat-file", "-p", f"{last['tree']}:files/f0.txt"]).stdout == b"after\n"


def test_two_processes_snapshot_one_repository_at_once(work: Path, db_path: Path) -> None:
    script = ("from fleet.snapshot.shadow import WorkTree; from fleet.snapshot.take import take; import json; "
              f"print(json.dumps(take(WorkTree({str(work)!r}, {str(work / '.git')!r}, {str(work / '.git')!r}), "
              f"{str(db_path)!r}, 'manual')['id']))")
    procs = [subprocess.Popen([sys.executable, "-c", script], env=fleetdeck_env(), stdout=subprocess.PIPE)
             for _ in range(2)]
    ids = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert ids[0] == ids[1]                           # the second found nothing new: one snapshot kept
    assert len(snapshots(tree_of(work), db_path)) == 1


@pytest.mark.slow
def test_cli_contracts(work: Path, db_path: Path) -> None:
    def cli(*args: str, ok: int = 0) -> subprocess.CompletedProcess:
        done = run_cli(*args, db=db_path, cwd=work)
        assert done.returncode == ok, done.stderr
        assert "Traceback" not in done.stderr
        return done

    cli("scan", str(work.parent))
    made = json.loads(cli("snapshot", "--json").stdout)["snapshots"]
    assert made[0]["repo"] == "app" and made[0]["trigger"] == "manual" and not made[0]["unchanged"]
    assert set(made[0]) == {"id", "repo", "worktree", "at", "trigger", "files", "bytes_added", "skipped",
                            "unchanged"}
    git(work, "reset", "-q", "--hard")
    cli("snapshot", "app")
    listed = json.loads(cli("snapshots", "app", "--json").stdout)
    assert listed["repo"] == "app" and listed["snapshots"][0]["discarded"] is True
    assert set(listed["snapshots"][0]) >= {"id", "at", "trigger", "agents", "changed_files", "discarded"}
    text = cli("snapshots", "diff", "app", made[0]["id"][:10]).stdout
    assert "-a = 2  # unstaged" in text
    dry = json.loads(cli("restore", "app", made[0]["id"][:10], "--dry-run", "--json").stdout)
    assert dry["dry_run"] is True and "src/a.py" in dry["restored"]
    assert (work / "src" / "a.py").read_text() == "a = 1\n"
    refused = cli("restore", "app", made[0]["id"][:10], ok=1)
    assert "--yes" in refused.stderr
    done = json.loads(cli("restore", "app", made[0]["id"][:10], "--yes", "--json").stdout)
    assert done["dry_run"] is False and (work / "src" / "a.py").read_text() == "a = 2  # unstaged\n"
    bad = cli("restore", "app", "zzzz", "--yes", ok=1)
    assert "[BAD_ARGUMENT]" in bad.stderr


def test_a_dropped_stash_of_untracked_files_only_is_discarded_work(work: Path, db_path: Path) -> None:
    """`git stash -u` of new files alone leaves the stash's own tree equal to its base: the drop must still
    be seen (its untracked part is the work)."""
    git(work, "stash", "-q")                          # the tracked edits out of the way
    git(work, "stash", "drop", "-q")
    take(tree_of(work), db_path, "manual")
    git(work, "stash", "-q", "--include-untracked")   # only notes.txt and build/out/x.txt
    stashed = take(tree_of(work), db_path, "manual")
    assert stashed["discarded"] is None and len(stashed["stash"]) == 1
    git(work, "stash", "drop", "-q")
    dropped = take(tree_of(work), db_path, "manual")
    assert dropped["discarded"] is not None
    assert dropped["discarded"]["stashes_dropped"] == stashed["stash"]


def test_a_popped_stash_of_untracked_files_only_is_not_discarded(work: Path, db_path: Path) -> None:
    git(work, "stash", "-q")
    git(work, "stash", "drop", "-q")
    take(tree_of(work), db_path, "manual")
    git(work, "stash", "-q", "--include-untracked")
    take(tree_of(work), db_path, "manual")
    git(work, "stash", "pop", "-q")
    assert take(tree_of(work), db_path, "manual")["discarded"] is None


def test_a_modified_file_moved_elsewhere_is_not_discarded(work: Path, db_path: Path) -> None:
    take(tree_of(work), db_path, "manual")
    os.rename(work / "src" / "a.py", work / "src" / "renamed.py")
    moved = take(tree_of(work), db_path, "manual")
    assert moved["discarded"] is None                 # the bytes are all still in the working tree


def test_restore_never_overwrites_a_file_the_present_snapshot_could_not_keep(work: Path, db_path: Path,
                                                                              tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The present is snapshotted first so a restore can be undone; a file that snapshot skipped (over
    max_file_bytes) would be lost for good: it is refused, by name."""
    from fleet.errors import FleetError

    (tmp_path / "settings.toml").write_text("[snapshots]\nmax_file_bytes = 2000\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(tmp_path / "settings.toml"))
    first = take(tree_of(work), db_path, "manual")
    big = bytes(range(256)) * 20                      # 5120 bytes: over the limit, so never snapshotted
    write(work / "data.bin", big)
    with pytest.raises(FleetError) as caught:
        restore(tree_of(work), db_path, first["id"])
    assert caught.value.code == "BAD_PATH" and "data.bin" in caught.value.message
    assert (work / "data.bin").read_bytes() == big
    write(work / "src" / "a.py", "changed again\n")
    restore(tree_of(work), db_path, first["id"], paths=["src"])   # other paths still restore
    assert (work / "src" / "a.py").read_text() == "a = 2  # unstaged\n"


def test_thinning_a_store_changes_nothing_in_the_repository(tmp_path: Path, db_path: Path) -> None:
    """Pruning runs `git gc` in the shadow store with the repository's objects as an alternate: the
    repository's `.git` (objects, packs, every mtime) stays as it was, hostile config and all."""
    from fleet.snapshot.retention import prune_store
    from fleet.snapshot.shadow import store_for

    marker = tmp_path / "marker"
    repo = hostile_repo(tmp_path, "evil", marker)
    git(repo, "gc", "-q")                              # a pack in the repository too (its hooks fire: not ours)
    shutil.rmtree(marker, ignore_errors=True)
    tree = tree_of(repo)
    for i in range(6):
        write(repo / "work.txt", f"version {i}\n")
        take(tree, db_path, "manual", now=1_700_000_000 + i)
    age_git_dir(repo)
    before = disk_state(repo)
    thin = {"keep_all_hours": 0, "hourly_days": 0, "daily_days": 0, "repo_budget_bytes": 1 << 40}
    assert prune_store(store_for(tree, db_path), thin, 1_800_000_000)["dropped"] == 5
    assert snapshot_diff(before, disk_state(repo)) == []
    assert fired(marker) == []


@pytest.mark.parametrize("untracked", ["all", "no"])
def test_a_tracked_folder_swapped_for_a_link_out_of_the_tree_is_never_read(tmp_path: Path, db_path: Path,
                                                                           untracked: str) -> None:
    """A sandboxed agent that may write its repository but not read ~/.ssh commits `keys/id_rsa`, swaps
    `keys` for a link to ~/.ssh and asks for a snapshot and its diff: git sees `keys/id_rsa` deleted (a link
    on its way); the snapshot must not read the file the link leads to."""
    secret_dir = tmp_path / "dot-ssh"
    secret_dir.mkdir()
    (secret_dir / "id_rsa").write_text("PRIVATE KEY\n")
    repo = init_repo(tmp_path / "app")
    write(repo / "keys" / "id_rsa", "placeholder\n")
    if untracked == "no":                             # a dotfiles-style repository: untracked files not listed
        git(repo, "config", "status.showUntrackedFiles", "no")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "keys")
    first = take(tree_of(repo), db_path, "manual")
    shutil.rmtree(repo / "keys")
    os.symlink(secret_dir, repo / "keys")
    made = take(tree_of(repo), db_path, "manual")
    text = diff(tree_of(repo), db_path, first["id"], made["id"])
    assert "PRIVATE KEY" not in text
    shadow = open_shadow(snapshots_root(db_path), str(repo), str(repo / ".git" / "objects"), create=False)
    secret = object_id(b"blob", b"PRIVATE KEY\n")
    assert not (shadow.objects / secret[:2] / secret[2:]).exists()


def test_a_dirty_linked_worktree_removed_by_force_is_discarded_work(work: Path, db_path: Path,
                                                                    tmp_path: Path) -> None:
    """`git worktree remove --force` of a worktree with uncommitted files: there is no tree left to
    snapshot, so the sweep's last snapshot of nothing is what sees the work gone."""
    from fleet.snapshot.take import take_vanished

    linked = tmp_path / "linked"
    git(work, "worktree", "add", "-q", "-b", "feature", str(linked))
    write(linked / "feature.txt", "feature work\n")
    tree = WorkTree(str(linked), str(work / ".git" / "worktrees" / "linked"), str(work / ".git"))
    saved = take(tree, db_path, "manual")
    assert take_vanished(tree, db_path) is None               # still there: nothing to say
    git(work, "worktree", "remove", "--force", str(linked))
    gone = take_vanished(tree, db_path)
    assert gone is not None and gone["discarded"]["files"] == ["feature.txt"]
    assert [e["restore_from"] for e in discarded_events(tree, db_path)] == [saved["id"]]
    assert take_vanished(tree, db_path) is None               # said once
