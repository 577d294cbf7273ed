"""Every field of every repo record equals what the git CLI says, on a fleet with every state."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from fleet.index.store import open_index
from fleet.index.scan import scan
from fleet.repo import libmerge, libstatus
from tests.fleets import oracle
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.every_state import IN_PROCESS, build_fleet
from tests.fleets.gitbuild import commit_file, git, init_repo

NON_BARE = ["clean", "dirty", "ahead", "behind", "diverged", "predict", "branches", "detached", "empty",
            "stashes", "worktrees", "super", "merging", "rebasing", "picking", "bisecting", "history",
            "outer", "nested", "locked"]


@pytest.fixture(scope="module", params=["libgit2", "git"])
def fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Scanned twice: with the in-process status and merge verdict on (every eligible repo read through
    libgit2, the others through git: tests/test_libstatus.py and tests/test_libmerge.py pin which is which)
    and switched off (git for every repo)."""
    base = tmp_path_factory.mktemp("fleet")
    repos = build_fleet(base / "root", base / "side")
    index = open_index(base / "fleet.db")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "git":
            patch.setenv(libstatus.SWITCH, "git")
            patch.setenv(libmerge.SWITCH, "git")
            summary = scan(index, [str(base / "root")])
        else:
            patch.delenv(libstatus.SWITCH, raising=False)
            patch.delenv(libmerge.SWITCH, raising=False)
            # the CLI's own process, one thread: the scan forks its workers, whose main threads read in-process
            # (this test process may hold other tests' threads, and threads get git)
            done = subprocess.run(fleetdeck_argv("--db", str(base / "fleet.db"), "scan", str(base / "root"), "--json"),
                                  env=fleetdeck_env(), capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            summary = json.loads(done.stdout)
        sources = {state: libstatus.repo_status(*_dirs(path)).source for state, path in repos.items()
                   if state in NON_BARE}
    records = {r["path"]: r for r in index.repos()}
    yield {"repos": repos, "index": index, "summary": summary, "records": records, "root": base / "root",
           "status": request.param, "sources": sources}
    index.close()


def _dirs(repo: Path) -> tuple[str, str, str]:
    path = os.path.realpath(repo)
    return path, os.path.join(path, ".git"), os.path.join(path, ".git")


def test_the_status_source_is_the_one_asked_for(fleet):
    """On: every eligible fixture in-process, the rest git. Off: git everywhere."""
    expected = {s: "libgit2" if fleet["status"] == "libgit2" and s in IN_PROCESS else "git" for s in NON_BARE}
    assert fleet["sources"] == expected


def record_of(fleet: dict, state: str) -> dict:
    return fleet["records"][os.path.realpath(fleet["repos"][state])]


def test_discovery_finds_each_repo_once_and_skips_node_modules(fleet):
    paths = set(fleet["records"])
    expected = {os.path.realpath(p) for p in fleet["repos"].values()}
    assert paths == expected
    assert not any("node_modules" in p for p in paths)
    # the linked worktree inside the root belongs to its owner, it is not a repo of its own
    assert os.path.realpath(fleet["root"] / "worktrees-linked") not in paths
    # submodules are attached to the superproject, not counted again
    assert not any("/libs/" in p for p in paths)
    assert fleet["summary"]["repos"] == len(expected)


@pytest.mark.parametrize("state", NON_BARE)
def test_head_branch_upstream_match_git(fleet, state):
    repo, rec = fleet["repos"][state], record_of(fleet, state)
    head = oracle.head_state(repo)
    assert rec["head"] == head["head"]
    assert rec["detached"] == head["detached"]
    expected_branch = head["branch"] if head["head"] is not None else head["branch"]
    if head["head"] is None:
        assert rec["branch"] == expected_branch  # unborn: git names the branch HEAD points to
    else:
        assert rec["branch"] == head["branch"]
    up = oracle.upstream_state(repo, head["branch"])
    assert (rec["upstream"], rec["ahead"], rec["behind"], rec["upstream_gone"]) == (
        up["upstream"], up["ahead"], up["behind"], up["upstream_gone"])


@pytest.mark.parametrize("state", NON_BARE)
def test_working_tree_counts_match_git(fleet, state):
    repo, rec = fleet["repos"][state], record_of(fleet, state)
    expected = oracle.counts(repo)
    assert {k: rec[k] for k in expected} == expected
    assert rec["stashes"] == oracle.stash_count(repo)


@pytest.mark.parametrize("state", NON_BARE)
def test_operation_matches_git(fleet, state):
    assert record_of(fleet, state)["operation"] == oracle.operation(fleet["repos"][state])


@pytest.mark.parametrize("state", ["branches", "worktrees", "diverged", "history", "bare"])
def test_every_branch_matches_git(fleet, state):
    rec = record_of(fleet, state)
    ours = [{k: b[k] for k in ("name", "head", "upstream", "ahead", "behind", "upstream_gone")}
            for b in rec["branches"]]
    assert ours == oracle.branches(fleet["repos"][state])


def test_dirty_repo_states(fleet):
    rec = record_of(fleet, "dirty")
    assert rec["staged"] == 2  # the rename and the new file
    assert rec["unstaged"] == 1
    assert rec["untracked"] == 3  # a file, a folder (git lists the folder), a binary file


def test_rebase_detaches_and_names_the_branch(fleet):
    rec = record_of(fleet, "rebasing")
    assert rec["branch"] is None and rec["detached"]
    assert rec["operation_detail"]["branch"] == "topic"
    assert rec["conflicted"] == 1
    assert rec["reasons"][0]["code"] == "conflict"


def test_merge_conflict_and_cherry_pick(fleet):
    assert record_of(fleet, "merging")["operation_detail"]["merge_head"] == \
        git(fleet["repos"]["merging"], "rev-parse", "topic").strip()
    assert record_of(fleet, "picking")["operation"] == "cherry-pick"


def test_predicted_conflict_only_when_diverged(fleet):
    def pair(name: str) -> dict:  # the two commits a prediction was made for, as git names them
        repo = fleet["repos"][name]
        return {"ours": git(repo, "rev-parse", "HEAD").strip(), "theirs": git(repo, "rev-parse", "@{u}").strip()}

    rec = record_of(fleet, "predict")
    assert rec["predicted_conflicts"] == {"clean": False, "paths": ["shared.txt"], **pair("predict")}
    assert rec["reasons"][0]["code"] == "predicted_conflict"
    clean_div = record_of(fleet, "diverged")
    assert clean_div["predicted_conflicts"] == {"clean": True, "paths": [], **pair("diverged")}
    assert record_of(fleet, "ahead")["predicted_conflicts"] is None


def test_worktrees_match_git(fleet):
    rec = record_of(fleet, "worktrees")
    expected = oracle.worktrees(fleet["repos"]["worktrees"])
    ours = sorted(rec["worktrees"], key=lambda w: w["path"])
    expected = sorted(expected, key=lambda w: w["path"])
    assert [w["path"] for w in ours] == [w["path"] for w in expected]
    for mine, theirs in zip(ours, expected):
        assert mine["locked"] == theirs["locked"]
        assert mine["prunable"] == theirs["prunable"]
        assert mine["branch"] == theirs["branch"]
        if not mine["prunable"]:
            assert mine["head"] == theirs["head"]
        if theirs["locked"]:
            assert mine["lock_reason"] == theirs["lock_reason"] == "on a usb disk"
    linked = next(w for w in ours if w["path"].endswith("worktrees-linked"))
    assert linked["untracked"] == oracle.counts(Path(linked["path"]))["untracked"] == 1


def test_submodules_match_git(fleet):
    rec = record_of(fleet, "super")
    expected = {s["path"]: s for s in oracle.submodules(fleet["repos"]["super"])}
    ours = {s["path"]: s for s in rec["submodules"]}
    assert set(ours) == set(expected)
    for path, sub in ours.items():
        assert sub["state"] == expected[path]["state"]
    assert ours["libs/drifted"]["checked_out"] == expected["libs/drifted"]["sha"]
    assert ours["libs/drifted"]["recorded"] == git(fleet["repos"]["super"], "rev-parse", "HEAD:libs/drifted").strip()
    assert ours["libs/uninit"]["checked_out"] is None


def test_bare_repo_has_refs_but_no_working_tree_counts(fleet):
    rec = record_of(fleet, "bare")
    assert rec["bare"] is True
    assert rec["head"] == git(fleet["repos"]["bare"], "rev-parse", "HEAD").strip()
    assert rec["branch"] == "main"
    assert all(rec[k] is None for k in ("staged", "unstaged", "untracked", "conflicted"))


def test_broken_and_locked_repos_get_an_error_not_a_failed_scan(fleet):
    assert "HEAD" in record_of(fleet, "broken")["error"]
    locked = record_of(fleet, "locked")
    assert "index.lock" in locked["error"]
    assert locked["head"] == git(fleet["repos"]["locked"], "rev-parse", "HEAD").strip()
    assert fleet["summary"]["error_count"] == 2


def test_reflogs_are_indexed_line_for_line(fleet):
    index = fleet["index"]
    for state in ("history", "worktrees", "clean", "rebasing"):
        rec = record_of(fleet, state)
        rows = index.conn.execute("select count(*) from reflog where repo_id = ? and ref = 'HEAD'",
                                     (rec["id"],)).fetchone()[0]
        assert rows == oracle.reflog_count(fleet["repos"][state], "HEAD"), state
    hist = record_of(fleet, "history")
    kinds = {r[0] for r in index.conn.execute("select kind from reflog where repo_id = ?", (hist["id"],))}
    assert {"commit", "amend", "reset"} <= kinds
    # the message-less line written by update-ref is kept, with an empty message
    assert index.conn.execute("select count(*) from reflog where repo_id = ? and ref = ? and message = ''",
                                 (hist["id"], "refs/heads/no-message")).fetchone()[0] == 1
    wt = record_of(fleet, "worktrees")
    wt_refs = {r[0] for r in index.conn.execute("select distinct ref from reflog where repo_id = ?", (wt["id"],))}
    assert any(ref.startswith("worktrees/") and ref.endswith("/HEAD") for ref in wt_refs)


def test_last_activity_is_iso(fleet):
    for rec in fleet["records"].values():
        if rec["error"] is None and rec["head"]:
            assert rec["last_activity"].endswith("Z")


def _snapshot(root: Path) -> dict[str, str]:
    snap = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            with open(full, "rb") as fh:
                digest = hashlib.sha1(fh.read()).hexdigest()
            snap[full] = f"{st.st_mtime_ns}:{st.st_size}:{digest}"
        snap[dirpath] = "dir"
    return snap


@pytest.mark.slow
def test_scan_never_modifies_a_repository(tmp_path: Path):
    repos = build_fleet(tmp_path / "root", tmp_path / "side")
    # stat drift: a tracked file touched without content change would make a locking `git status` rewrite the index
    os.utime(repos["clean"] / "README.md", (1, 1))
    before = _snapshot(tmp_path / "root")
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(tmp_path / "root")])
    scan(index)
    after = _snapshot(tmp_path / "root")
    assert before == after
    index.close()


@pytest.mark.slow
def test_rescan_updates_in_place_and_keeps_history(tmp_path: Path):
    repos = build_fleet(tmp_path / "root", tmp_path / "side")
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(tmp_path / "root")])
    ids = {r["path"]: r["id"] for r in index.repos()}
    events = index.conn.execute("select count(*) from reflog").fetchone()[0]
    scan(index)
    assert {r["path"]: r["id"] for r in index.repos()} == ids
    assert index.conn.execute("select count(*) from reflog").fetchone()[0] == events  # no duplicates

    history = repos["history"]
    commit_file(history, "later.txt", "x\n", "later work")
    git(history, "reflog", "expire", "--expire=now", "--all")
    scan(index)
    rec = index.repo(str(history))
    assert rec["head"] == git(history, "rev-parse", "HEAD").strip()
    kept = index.conn.execute("select count(*) from reflog where repo_id = ?", (rec["id"],)).fetchone()[0]
    assert kept >= 6  # the expired lines stay in the index
    assert oracle.reflog_count(history, "HEAD") == 0

    import shutil
    shutil.rmtree(repos["clean"])
    summary = scan(index)
    assert os.path.realpath(repos["clean"]) in summary["gone"]
    assert os.path.realpath(repos["clean"]) not in {r["path"] for r in index.repos()}
    gone = index.repo(str(repos["clean"]))
    assert gone["gone"] is True
    index.close()


def test_schema_is_versioned_and_reopens(tmp_path: Path):
    index = open_index(tmp_path / "f.db")
    version = index.schema_version
    assert version >= 1
    index.close()
    again = open_index(tmp_path / "f.db")
    assert again.schema_version == version
    assert again.conn.execute("pragma journal_mode").fetchone()[0] == "wal"
    again.close()


def test_a_repo_vanishing_mid_scan_yields_an_error_record(tmp_path: Path):
    import shutil

    from fleet.index.discovery import discover
    from fleet.repo.record import read_repo

    repo = init_repo(tmp_path / "root" / "short-lived", commits=1)
    found = discover(tmp_path / "root")[0]
    shutil.rmtree(repo)
    record = read_repo(found)
    assert record["vanished"] is True and "vanished" in record["error"]


def test_remote_credentials_never_reach_the_index(tmp_path: Path):
    repo = init_repo(tmp_path / "root" / "secret", commits=1)
    git(repo, "remote", "add", "origin", "https://me:hunter2-token@example.com/x.git")
    index = open_index(tmp_path / "f.db")
    scan(index, [str(tmp_path / "root")])
    assert index.repo("secret")["remotes"] == [{"name": "origin", "url": "https://***:***@example.com/x.git"}]
    files = [p for p in tmp_path.iterdir() if p.name.startswith("f.db")]
    assert b"hunter2" not in b"".join(p.read_bytes() for p in files)
    index.close()


def test_schema_version_constant_matches_the_migrations(tmp_path: Path):
    from fleet.index.store import SCHEMA_VERSION
    from fleet.index.schema import migrations

    index = open_index(tmp_path / "f.db")
    assert index.schema_version == SCHEMA_VERSION == len(migrations.applied(index.db))
    assert migrations.pending(index.db) == []
    index.close()


def test_a_remote_s_head_symref_log_is_not_an_event_source(tmp_path: Path):
    from tests.fleets.gitbuild import with_upstream

    repo = with_upstream(tmp_path / "side", "cloned", behind=1)  # the fetch writes origin/main's log
    assert (repo / ".git" / "logs" / "refs" / "remotes" / "origin" / "HEAD").is_file()
    index = open_index(tmp_path / "f.db")
    scan(index, [str(repo)])
    refs = {r[0] for r in index.conn.execute("select distinct ref from reflog")}
    assert "refs/remotes/origin/main" in refs and "refs/remotes/origin/HEAD" not in refs
    index.close()


def test_storage_only_stores_and_ingest_scores_and_records_events(tmp_path: Path):
    """`store_repos` writes what it is given (no scoring, no events: those need git); `ingest` does the rest."""
    from fleet.index.scan import ingest
    from fleet.git.layout import found_at
    from fleet.repo.record import read_repo
    from fleet.attention import attention

    repo = init_repo(tmp_path / "root" / "r", commits=2)
    (repo / "dirty.txt").write_text("x\n")
    found = found_at(os.path.realpath(repo), os.path.realpath(tmp_path / "root"))
    record = read_repo(found)
    with open_index(tmp_path / "f.db") as index:
        [rid] = index.store_repos([(found, record, [])])
        stored = index.repo(rid)
        assert stored["head"] == git(repo, "rev-parse", "HEAD").strip() and stored["reasons"] == []
        assert stored["score"] == 0
        reflog_lines = index.conn.execute("select count(*) from reflog where repo_id = ?", (rid,)).fetchone()[0]
        assert reflog_lines == sum(len(git(repo, "reflog", "show", "--format=%H", ref, "--").split())
                                   for ref in ("HEAD", "refs/heads/main"))
        assert index.conn.execute("select count(*) from events").fetchone()[0] == 0
        assert ingest(index, [(found, record)]) == [rid]
        again = index.repo(rid)
        assert again["reasons"] == attention(record) and again["score"] == attention(record)[0]["score"]
        assert [m for (m,) in index.conn.execute("select message from events where repo_id = ? order by at, id",
                                                 (rid,))] == list(reversed(
            git(repo, "reflog", "show", "--format=%gs", "refs/heads/main", "--").splitlines()))


def test_a_repo_stored_twice_in_one_write_ends_as_its_last_read(tmp_path: Path):
    """A write queues its rows and inserts them at its end: a known repo given twice in one write still ends
    with the branches and remotes of its last read alone (the first's deleted with the old ones)."""
    from fleet.git.layout import found_at
    from fleet.repo.record import read_repo

    repo = init_repo(tmp_path / "root" / "r", commits=2)
    found = found_at(os.path.realpath(repo), os.path.realpath(tmp_path / "root"))
    with open_index(tmp_path / "f.db") as index:
        [rid] = index.store_repos([(found, read_repo(found), [])])
        git(repo, "branch", "topic")
        git(repo, "remote", "add", "origin", str(tmp_path / "elsewhere"))
        first = read_repo(found)
        git(repo, "branch", "-D", "topic")
        git(repo, "branch", "other")
        last = read_repo(found)
        assert index.store_repos([(found, first, []), (found, last, [])]) == [rid, rid]
        branches = [name for (name,) in index.conn.execute("select name from branches where repo_id = ? order by"
                                                           " name", (rid,))]
        assert branches == sorted(b["name"] for b in last["branches"]) == ["main", "other"]
        assert index.conn.execute("select name from remotes where repo_id = ?", (rid,)).fetchall() == [("origin",)]
