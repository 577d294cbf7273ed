"""The re-check's quick path: a repo whose watch mark has not moved has only its working trees read again.

Every kind of change made while nobody watched is picked up (git is the oracle, and the stored record is what
a full read says now), the repos whose git dirs did not change go the quick path and only those (so the test
fails when the mark comparison is skipped: a new branch, a stash or a new remote leave `git status` as it
was), and an index stored without marks (an older fleetdeck) is read in full once, which stores them.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from fleet.git import files as gitfiles
from fleet.index.recheck import recheck_chunk
from fleet.index.scan import scan
from fleet.git.layout import found_at
from fleet.index.store import Index, open_index
from fleet.repo.record import read_repo, reflog_stats
from fleet.git.mark import MAX_DEPTH, walked, watch_mark
from tests.fleets import oracle, template
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream, write

FIELDS = ("branch", "detached", "head", "head_ref", "upstream", "upstream_gone", "ahead", "behind", "staged",
          "unstaged", "untracked", "conflicted", "stashes", "operation", "operation_detail",
          "predicted_conflicts", "last_activity", "error")
CHILDREN = ("branches", "worktrees", "submodules", "stash_list", "remotes")


def _conflicting_branch(repo: Path, name: str) -> None:
    """A branch `name` whose README.md conflicts with the current branch's next commit."""
    git(repo, "checkout", "-q", "-b", name)
    commit_file(repo, "README.md", f"{name}'s version\n")
    git(repo, "checkout", "-q", "-")
    commit_file(repo, "README.md", "main's version\n")


def _bump_mtime(path: Path) -> None:
    later = time.time() + 60
    os.utime(path, (later, later))


SETUP = {  # before the scan: the state each repo is indexed in
    "branch-delete": lambda r: git(r, "branch", "old"),
    "checkout": lambda r: git(r, "branch", "other", "HEAD~1"),
    "merge-start": lambda r: _conflicting_branch(r, "theirs"),
    "rebase-start": lambda r: _conflicting_branch(r, "onto"),
    "dirty-edit-again": lambda r: write(r / "README.md", "edited before the scan\n"),
    # a legal branch name ending like a temporary file, with no reflog (nothing but the ref itself moves)
    "branch-dot-new": lambda r: (git(r, "branch", "rel.new"), (r / ".git/logs/refs/heads/rel.new").unlink()),
}

CHANGES = {  # after the scan, while nobody watched
    "commit": lambda r, _t: commit_file(r, "new.txt", "a commit\n"),
    "reset": lambda r, _t: git(r, "reset", "-q", "--hard", "HEAD~1"),
    "branch-dot-new": lambda r, _t: git(r, "-c", "core.logAllRefUpdates=false", "branch", "-f", "rel.new",
                                        "HEAD~1"),
    "branch-create": lambda r, _t: git(r, "branch", "extra"),
    "branch-delete": lambda r, _t: git(r, "branch", "-q", "-D", "old"),
    "stash": lambda r, _t: (write(r / "README.md", "stashed\n"), git(r, "stash", "-q")),
    "worktree-add": lambda r, t: git(r, "worktree", "add", "-q", str(t / "side-worktree"), "-b", "side"),
    "checkout": lambda r, _t: git(r, "checkout", "-q", "other"),
    "remote-add": lambda r, t: git(r, "remote", "add", "mirror", str(t / "nowhere.git")),
    "config-upstream": lambda r, _t: git(r, "branch", "-q", "--unset-upstream"),
    "fetch": lambda r, t: (commit_file(t / "src" / "fetch-seed", "upstream.txt", "moved on\n"),
                           git(t / "src" / "fetch-seed", "push", "-q", "origin", "main"), git(r, "fetch", "-q")),
    "pack-refs": lambda r, _t: git(r, "pack-refs", "--all"),
    "tracked-edit": lambda r, _t: write(r / "README.md", "edited while nobody watched\n"),
    "untracked-new": lambda r, _t: write(r / "untracked.txt", "new\n"),
    "reflog-only": lambda r, _t: git(r, "reset", "-q", "--soft", "HEAD"),
    "merge-start": lambda r, _t: git(r, "merge", "-q", "theirs", check=False),
    "rebase-start": lambda r, _t: git(r, "rebase", "-q", "onto", check=False),
    "dirty-edit-again": lambda r, _t: (write(r / "README.md", "edited again\n"), _bump_mtime(r / "README.md")),
    "linked-worktree-edit": lambda r, t: write(t / "wt-of-linked" / "README.md", "edited in the worktree\n"),
}
QUIET = ("quiet", "quiet-with-worktree")
# Changes git makes in the repo's git dirs (its mark moves); the others only touch its working trees.
IN_GIT_DIRS = {n for n in CHANGES if n not in ("tracked-edit", "untracked-new", "dirty-edit-again",
                                               "linked-worktree-edit")}
# Changes no stored field shows (the full read finds the record as it was: not stored again).
NOT_STORED = {"pack-refs"}


def _scanned(base: Path) -> dict:
    """The fleet in its SETUP states, scanned (its marks stored): what each test changes afterwards."""
    src, root = base / "src", base / "fleet"
    root.mkdir()
    repos: dict[str, Path] = {}
    for name in [*CHANGES, *QUIET]:
        made = with_upstream(src, name, ahead=1)
        repos[name] = Path(shutil.move(str(made), str(root / name))).resolve()
        if name in SETUP:
            SETUP[name](repos[name])
    for name, folder in (("linked-worktree-edit", "wt-of-linked"), ("quiet-with-worktree", "wt-of-quiet")):
        git(repos[name], "worktree", "add", "-q", str(base / folder), "-b", folder)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"root": root, "db": db, "repos": repos}


@pytest.fixture
def fleet(tmp_path: Path) -> dict:
    """A copy of the scanned fleet (tests/fleets/template.py: marks taken again at the copy, as its scan
    would have stored them), then every change made while nobody watched."""
    built = template.shared().copy("recheck-marks", _scanned, tmp_path)
    time.sleep(0.01)  # a file written now has an mtime after the stored marks' (coarse kernel clocks)
    for name, change in CHANGES.items():
        change(built["repos"][name], tmp_path)
    return built


def _rows(rows: list[dict], keys: list[str]) -> list[tuple]:
    return sorted(tuple(int(v) if isinstance(v, bool) else v for v in (row.get(k) for k in keys)) for row in rows)


def assert_as_a_full_read_and_git_say(index: Index, repo: Path, root: Path) -> None:
    stored = index.repo(str(repo))
    fresh = read_repo(found_at(str(repo), str(root)))
    assert {k: stored[k] for k in FIELDS} == {k: fresh[k] for k in FIELDS}, repo.name
    for key in CHILDREN:
        keys = list(stored[key][0]) if stored[key] else []
        assert _rows(stored[key], keys) == _rows(fresh[key], keys), (repo.name, key)
    head = oracle.head_state(repo)
    assert (stored["head"], stored["branch"]) == (head["head"], head["branch"]), repo.name
    assert {k: stored[k] for k in ("staged", "unstaged", "untracked", "conflicted")} == oracle.counts(repo), repo.name
    assert sorted(b["name"] for b in stored["branches"]) == sorted(b["name"] for b in oracle.branches(repo))
    assert stored["stashes"] == oracle.stash_count(repo), repo.name
    assert stored["operation"] == oracle.operation(repo), repo.name
    assert sorted(w["path"] for w in stored["worktrees"]) == sorted(w["path"] for w in oracle.worktrees(repo))
    assert sorted(r["name"] for r in stored["remotes"]) == git(repo, "remote").split(), repo.name


@pytest.mark.slow
def test_every_change_made_while_nobody_watched_is_picked_up_and_only_quiet_repos_go_the_quick_way(fleet) -> None:
    repos, root = fleet["repos"], fleet["root"]
    with open_index(fleet["db"]) as index:
        before = {r["path"]: r["generation"] for r in index.summaries()}
        checked = recheck_chunk(index, index.known_paths())
        quick = {Path(p).name for p in checked.quick}
        assert quick == set(QUIET), quick  # every repo whose git dirs or working trees changed was read in full
        stored_again = {Path(p).name for p in before if index.repo(p)["id"] in checked.changed}
        assert stored_again == set(CHANGES) - NOT_STORED
        after = {r["path"]: r["generation"] for r in index.summaries()}
        assert all(after[str(repos[n])] == before[str(repos[n])] for n in (*QUIET, *NOT_STORED))
        # Each repo's stored mark is now the one taken before its last read: a second pass is all quick.
        again = recheck_chunk(index, index.known_paths())
        assert again.changed == [] and len(again.quick) == len(repos)
        for repo in repos.values():  # (the oracle's own `git status` refreshes each index file: marks move)
            assert_as_a_full_read_and_git_say(index, repo, root)


@pytest.mark.slow
def test_the_operations_under_way_are_the_ones_git_reports(fleet) -> None:
    with open_index(fleet["db"]) as index:
        recheck_chunk(index, index.known_paths())
        assert index.repo(str(fleet["repos"]["merge-start"]))["operation"] == "merge"
        assert index.repo(str(fleet["repos"]["rebase-start"]))["operation"] == "rebase"


@pytest.mark.slow
def test_an_index_without_marks_is_read_in_full_once(fleet) -> None:
    with open_index(fleet["db"]) as index:
        recheck_chunk(index, index.known_paths())
        with index.write() as conn:
            conn.execute("delete from repo_marks")
        first = recheck_chunk(index, index.known_paths())
        assert first.quick == [] and first.changed == []
        second = recheck_chunk(index, index.known_paths())
        assert len(second.quick) == len(fleet["repos"])


@pytest.mark.slow
def test_a_mark_moves_with_what_the_record_reads_during_an_operation(fleet) -> None:
    """The merge message and the rebase's progress are record fields git rewrites in place or beside
    HEAD: the mark moves with them."""
    merging = fleet["repos"]["merge-start"]
    mark = watch_mark(str(merging / ".git"))
    write(merging / ".git" / "MERGE_MSG", "a message edited while nobody watched\n")
    assert watch_mark(str(merging / ".git")) != mark
    rebasing = fleet["repos"]["rebase-start"]
    mark = watch_mark(str(rebasing / ".git"))
    write(rebasing / ".git" / "rebase-merge" / "msgnum", "2\n")
    assert watch_mark(str(rebasing / ".git")) != mark


@pytest.mark.slow
def test_a_repo_stored_by_another_writer_after_the_comparison_keeps_that_writer_s_mark(fleet) -> None:
    """mark_read vouches for the record it compared, not for one another process stored meanwhile (from an
    older state, say): a row whose generation moved keeps its own scanned_at and mark."""
    repo = fleet["repos"]["quiet"]
    with open_index(fleet["db"]) as index:
        [stored] = index.rows("path = ?", (str(repo),))
        [marked] = index.watch_marks([stored["id"]]).values()
        found = found_at(str(repo), stored["root"])
        from fleet.index.scan import ingest
        ingest(index, [(found, read_repo(found, mark=b"another writer's mark"))])   # stored meanwhile
        [again] = index.rows("path = ?", (str(repo),))
        assert again["generation"] != stored["generation"]
        index.mark_read([("2099-01-01T00:00:00Z", stored["id"], stored["generation"], marked)])
        assert index.watch_marks([stored["id"]]) == {stored["id"]: b"another writer's mark"}
        assert index.rows("path = ?", (str(repo),))[0]["scanned_at"] == again["scanned_at"]
        index.mark_read([("2099-01-01T00:00:00Z", stored["id"], again["generation"], marked)])
        assert index.watch_marks([stored["id"]]) == {stored["id"]: marked}
        assert index.rows("path = ?", (str(repo),))[0]["scanned_at"] == "2099-01-01T00:00:00Z"


def test_a_symlinked_git_file_never_lets_the_mark_vouch(tmp_path: Path) -> None:
    """git follows a symlinked config or refs folder (git-new-workdir); the mark does not look through it, so
    such a repo's mark differs at every take and it is always read in full."""
    repo = tmp_path / "linked"
    git(tmp_path, "init", "-q", str(repo))
    config = repo / ".git" / "config"
    shutil.move(str(config), str(tmp_path / "real-config"))
    config.symlink_to(tmp_path / "real-config")
    assert watch_mark(str(repo / ".git")) != watch_mark(str(repo / ".git"))


def test_a_read_listing_from_the_marks_walk_lists_and_stats_what_it_would_itself(tmp_path: Path) -> None:
    """The read right behind a mark takes the loose refs, the reflogs and their stats from the mark's walk
    (`fleet.git.mark.Walked`): it finds exactly what its own walk finds, where the mark's walk skips or stops
    too (a `.lock` name, a symlinked reflog, a folder nested past MAX_DEPTH, a linked worktree's HEAD log)."""
    repo = init_repo(tmp_path / "repo", commits=2)
    git(repo, "branch", "topic")
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "topic")
    logs = repo / ".git" / "logs" / "refs" / "heads"
    write(logs / "stale.lock", (logs / "main").read_bytes())            # the mark skips .lock names
    os.symlink(logs / "main", logs / "linked")                          # never followed by either
    deep = logs.joinpath(*(f"d{n}" for n in range(MAX_DEPTH + 2)))       # past the mark's depth
    write(deep / "tip", (logs / "main").read_bytes())
    refs = repo / ".git" / "refs" / "heads"
    write(refs.joinpath(*(f"d{n}" for n in range(MAX_DEPTH + 2))) / "tip", (refs / "main").read_text())
    write(refs / "held.lock", (refs / "main").read_text())
    for gitdir in (repo / ".git", repo / ".git" / "worktrees" / "wt"):
        gitdir, common = str(gitdir), str(repo / ".git")
        seen = walked()
        watch_mark(gitdir, common, seen)
        assert seen.folders and seen.files
        assert reflog_stats(gitdir, common, seen) == reflog_stats(gitdir, common)
        assert gitfiles.read_refs(common, seen) == gitfiles.read_refs(common)
        listed = {ref for ref, *_ in reflog_stats(gitdir, common, seen)}
        assert {"refs/heads/stale.lock", "refs/heads/" + "/".join(f"d{n}" for n in range(MAX_DEPTH + 2)) + "/tip",
                "refs/heads/main", "refs/heads/topic"} <= listed and "refs/heads/linked" not in listed
        assert ("worktrees/wt/HEAD" in listed) == (gitdir == common)


def test_a_read_behind_the_marks_walk_skips_what_it_did_not_list_and_the_mark_then_moves(tmp_path: Path) -> None:
    """The read right behind the mark does not look for the operation markers or `worktrees/` the mark's walk
    did not list (`fleet.git.files.absent`): one made in between is in the next read, because it moves the
    mark; an index.lock, which the mark skips, is always looked for."""
    repo = init_repo(tmp_path / "r")
    _conflicting_branch(repo, "other")
    found = found_at(str(repo), str(tmp_path))
    seen = walked()
    mark = watch_mark(found.gitdir, found.commondir, seen)
    git(repo, "merge", "-q", "other", check=False)
    (repo / ".git" / "index.lock").write_text("")
    try:
        record = read_repo(found, mark=mark, seen_by=seen)
        assert record["operation"] is None and "index.lock" in record["error"]
        assert watch_mark(found.gitdir, found.commondir) != mark
        assert read_repo(found)["operation"] == "merge"
    finally:
        (repo / ".git" / "index.lock").unlink()
