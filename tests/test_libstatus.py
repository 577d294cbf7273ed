"""The in-process status (fleet/repo/libstatus.py) is git's, field for field, where it is used, and every
repository it cannot answer exactly goes to `git status`: one test per reason. Nothing runs, nothing is written.

The oracle tests of the whole record (tests/test_index_core.py) run with it on and off; here the Status
itself is compared with git's porcelain v2, entries in git's order."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pygit2
import pytest

from fleet.git.run import GitError
from fleet.git.status import read_status
from fleet.git.layout import Found
from fleet.repo import libstatus
from fleet.repo.libstatus import Ineligible, ineligible, inprocess_status, repo_status
from fleet.git import files as gitfiles
from fleet.git.config import read_config
from fleet.repo.record import _known as record_known, read_repo, read_stashes
from tests.fleets import oracle
from tests.fleets.every_state import IN_PROCESS, TO_GIT, build_fleet
from tests.fleets.gitbuild import commit_file, git, init_repo, write
from tests.fleets.hostile import age_git_dir, dirty_work_tree, fired, hostile_config, snapshot, snapshot_diff

def _dirs(repo: Path) -> tuple[str, str, str]:
    path = os.path.realpath(repo)
    return path, os.path.join(path, ".git"), os.path.join(path, ".git")


def _theirs(path: str, common: str | None = None):
    """git's own status of the working tree at `path` (a plain repository's, unless its common dir is given)."""
    return read_status(path, common or os.path.join(path, ".git"))


def _fields(status) -> tuple:
    return (status.oid, status.head, status.ahead, status.behind, status.stash,
            [(e.kind, e.xy, e.path) for e in status.entries])


def _goes_to_git(repo: Path, reason: str) -> None:
    """`reason` is why, the status used is git's, and the record's counts are what git says."""
    path, gitdir, common = _dirs(repo)
    with pytest.raises(Ineligible) as caught:
        inprocess_status(path, gitdir, common)
    assert caught.value.reason == reason
    status = repo_status(path, gitdir, common)
    assert status.source == "git"
    assert _fields(status) == _fields(_theirs(path))
    record = read_repo(Found(path, gitdir, common, False, os.path.dirname(path)), stored=False)
    expected = oracle.counts(repo)
    assert {k: record[k] for k in expected} == expected


def _raw_libgit2_counts(repo: Path) -> dict:
    """What libgit2 alone would count (no eligibility check): shows where it is not git's."""
    flags = list(pygit2.Repository(str(repo)).status(untracked_files="normal").values())
    F = pygit2.enums.FileStatus
    index = F.INDEX_NEW | F.INDEX_MODIFIED | F.INDEX_DELETED | F.INDEX_TYPECHANGE | F.INDEX_RENAMED
    work = F.WT_MODIFIED | F.WT_DELETED | F.WT_TYPECHANGE | F.WT_RENAMED
    return {"staged": sum(1 for f in flags if f & index and not f & F.CONFLICTED),
            "unstaged": sum(1 for f in flags if f & work and not f & F.CONFLICTED),
            "untracked": sum(1 for f in flags if f == F.WT_NEW),
            "conflicted": sum(1 for f in flags if f & F.CONFLICTED)}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("libstatus")
    return build_fleet(base / "root", base / "side")


@pytest.mark.parametrize("state", IN_PROCESS)
def test_an_eligible_repo_is_read_in_process_exactly_as_git_reads_it(fleet, state):
    path, gitdir, common = _dirs(fleet[state])
    ours = repo_status(path, gitdir, common)
    assert ours.source == "libgit2"
    assert _fields(ours) == _fields(_theirs(path))


@pytest.mark.parametrize("state", sorted(TO_GIT))
def test_an_ineligible_fixture_goes_to_git(fleet, state):
    if state == "broken":   # git cannot read it either: the record says so, as before
        path, gitdir, common = _dirs(fleet[state])
        with pytest.raises(Ineligible, match="libgit2_error"):
            inprocess_status(path, gitdir, common)
        return
    _goes_to_git(fleet[state], TO_GIT[state])


def test_entries_come_in_git_s_order_past_the_activity_window(tmp_path: Path):
    """Changed paths by byte order, then untracked ones: the record dates activity by the first 64."""
    repo = init_repo(tmp_path / "many", commits=1)
    for n in range(40):
        write(repo / f"t{n:02d}" / "Z.txt", "z\n")
        write(repo / f"t{n:02d}-x.txt", "x\n")
        write(repo / f"t{n:02d}.txt", ".\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")
    for n in range(0, 40, 2):
        write(repo / f"t{n:02d}" / "Z.txt", "changed\n")
        write(repo / f"t{n:02d}-x.txt", "changed\n")
        write(repo / f"u{n:02d}" / "new.txt", "new\n")
        write(repo / f"U{n:02d}.txt", "new\n")
    git(repo, "add", "t00-x.txt")
    path, gitdir, common = _dirs(repo)
    ours = inprocess_status(path, gitdir, common)
    assert len(ours.entries) > 64
    assert _fields(ours) == _fields(_theirs(path))


def test_ignore_rules_and_untracked_folders_match_git(tmp_path: Path):
    """.gitignore at two levels with negation, info/exclude, the person's global excludes, an untracked
    folder holding only ignored files, an empty one, a typechange, a staged deletion, a mode change."""
    repo = init_repo(tmp_path / "ign", commits=1)
    write(repo / ".gitignore", "*.log\nbuild/\n!keep.log\n")
    write(repo / "sub" / ".gitignore", "*.tmp\n")
    write(repo / "sub" / "a.txt", "a\n")
    write(repo / "tool.sh", "echo\n")
    write(repo / "gone.txt", "bye\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ignores")
    write(repo / ".git" / "info" / "exclude", "secret*\n")
    home_ignore = Path(os.environ["XDG_CONFIG_HOME"]) / "git" / "ignore"
    write(home_ignore, "*.swp\n")
    try:
        for name in ("x.log", "keep.log", "build/out.o", "sub/b.tmp", "sub/c.txt", "secret.txt", "a.swp",
                     "only-ignored/z.log", "deep/er/file.txt"):
            write(repo / name, "u\n")
        (repo / "empty-dir").mkdir()
        os.chmod(repo / "tool.sh", 0o755)
        (repo / "README.md").unlink()
        os.symlink("tool.sh", repo / "README.md")
        git(repo, "rm", "-q", "--cached", "gone.txt")
        (repo / "gone.txt").unlink()
        path, gitdir, common = _dirs(repo)
        ours = inprocess_status(path, gitdir, common)
        assert _fields(ours) == _fields(_theirs(path))
        assert ours.untracked == oracle.counts(repo)["untracked"] == 3  # deep/, keep.log, sub/c.txt
    finally:
        home_ignore.unlink()


def test_upstream_ahead_behind_through_a_second_remote_and_a_local_upstream(tmp_path: Path):
    repo = init_repo(tmp_path / "up", commits=3)
    git(repo, "branch", "base", "HEAD~2")
    git(repo, "branch", "--set-upstream-to=base")   # remote "." : a local branch upstream
    path, gitdir, common = _dirs(repo)
    ours = inprocess_status(path, gitdir, common)
    assert (ours.ahead, ours.behind) == (2, 0) and ours.upstream == "base"
    assert _fields(ours) == _fields(_theirs(path))


def _record_known(repo: Path) -> libstatus.Known:
    """What the record reads first (fleet.repo.record: HEAD, refs, config, stashes) for the status."""
    _, gitdir, common = _dirs(repo)
    refs = gitfiles.read_refs(common)
    return record_known(gitfiles.read_head(gitdir, refs), refs, read_config(common), read_stashes(common))


def _as_the_record_reads(repo: Path) -> tuple:
    """`repo_status` given what the record reads first."""
    path, gitdir, common = _dirs(repo)
    return path, repo_status(path, gitdir, common, _record_known(repo))


@pytest.mark.parametrize("state", IN_PROCESS)
def test_with_what_the_record_read_first_an_eligible_repo_is_still_git_s(fleet, state):
    path, ours = _as_the_record_reads(fleet[state])
    assert ours.source == "libgit2"
    assert _fields(ours) == _fields(_theirs(path)) and ours.upstream == _theirs(path).upstream


def test_a_symbolic_branch_over_a_stale_packed_one_is_read_as_git_resolves_it(tmp_path: Path):
    """refs/heads/main packed at one commit, then made a loose symbolic ref to another branch: the files'
    reader keeps the packed sha (it follows no symbolic ref), git and libgit2 resolve the link."""
    repo = init_repo(tmp_path / "sym", commits=3)
    git(repo, "branch", "other")
    git(repo, "pack-refs", "--all")
    commit_file(repo, "more.txt", "x\n")   # main moves on: its packed entry is now stale...
    git(repo, "update-ref", "refs/heads/other", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "pack-refs", "--all")
    git(repo, "symbolic-ref", "refs/heads/main", "refs/heads/other")   # ...and main a link to other
    path, ours = _as_the_record_reads(repo)
    assert _fields(ours) == _fields(_theirs(path))
    _goes_to_git(repo, "head")   # git names the branch at the link's end (libgit2 named the link)


def test_an_upstream_mapped_by_the_person_s_global_refspec_is_git_s(tmp_path: Path):
    """A fetch refspec for `origin` in the global config maps the branch to another tracking ref first (the
    repository's config alone says origin/main): git, and libgit2 reading every config, count against it."""
    origin = init_repo(tmp_path / "origin", commits=3)
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(repo))
    git(repo, "update-ref", "refs/remotes/mirror/main", "HEAD~2")
    git(repo, "config", "--global", "--add", "remote.origin.fetch", "+refs/heads/*:refs/remotes/mirror/*")
    try:
        path, ours = _as_the_record_reads(repo)
        theirs = _theirs(path)
        assert (theirs.upstream, theirs.ahead, theirs.behind) == ("mirror/main", 2, 0)
        assert ours.source == "libgit2" and _fields(ours) == _fields(theirs) and ours.upstream == theirs.upstream
    finally:
        git(repo, "config", "--global", "--unset-all", "remote.origin.fetch")


# --- every reason a repository goes to git, each with a repository that has it -----------------------


def _plain(tmp_path: Path, name: str = "r") -> Path:
    repo = init_repo(tmp_path / name, commits=2)
    write(repo / "README.md", "edited\n")
    write(repo / "new.txt", "new\n")
    return repo


def test_switched_off(tmp_path: Path, monkeypatch):
    repo = _plain(tmp_path)
    monkeypatch.setenv(libstatus.SWITCH, "git")
    _goes_to_git(repo, "switched_off")


def test_another_thread_than_the_main_one_gets_git(tmp_path: Path):
    """The deadline is a SIGALRM, which only the main thread receives."""
    repo = _plain(tmp_path)
    path, gitdir, common = _dirs(repo)
    seen = {}

    def run() -> None:
        seen["reason"] = ineligible(path, gitdir, common)
        seen["source"] = repo_status(path, gitdir, common).source

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == {"reason": "not_main_thread", "source": "git"}


def test_a_gitfile_repo_is_layout_where_a_linked_worktree_is_not(tmp_path: Path, monkeypatch):
    """A `--separate-git-dir` repository (a `.git` file, no `commondir`) goes to git; a linked worktree, whose
    `.git` file and `commondir` git wrote, does not (the linked worktrees' tests below)."""
    repo = _plain(tmp_path)
    git(repo, "worktree", "add", "-q", "-b", "wt", str(tmp_path / "linked"))
    assert ineligible(*_git_dirs(tmp_path / "linked")) is None
    git(tmp_path, "init", "-q", "--separate-git-dir", str(tmp_path / "sep.git"), str(tmp_path / "sep"))
    commit_file(tmp_path / "sep", "a.txt", "a\n")
    write(tmp_path / "sep" / "a.txt", "b\n")
    _wt_goes_to_git(tmp_path / "sep", "layout", monkeypatch)


def test_sha256_and_other_extensions(tmp_path: Path):
    repo = tmp_path / "sha"
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(repo))
    commit_file(repo, "a.txt", "a\n")
    write(repo / "a.txt", "b\n")
    with pytest.raises(Exception, match="sha256"):
        pygit2.Repository(str(repo)).status()   # libgit2 cannot read it at all
    _goes_to_git(repo, "extensions")


def test_shallow_clone(tmp_path: Path):
    origin = init_repo(tmp_path / "origin", commits=3)
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(tmp_path / "shallow"))
    _goes_to_git(tmp_path / "shallow", "shallow")


def test_submodules_with_or_without_gitmodules(tmp_path: Path):
    repo = _plain(tmp_path)
    lib = init_repo(tmp_path / "lib", commits=1)
    sha = git(lib, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendored")   # a gitlink, no .gitmodules
    _goes_to_git(repo, "submodules")


def test_attributes_tracked_in_info_global_or_untracked(tmp_path: Path):
    """Attributes select filters (a trusted global git-lfs included), text/eol and ident conversions: git's."""
    tracked = _plain(tmp_path, "tracked")
    commit_file(tracked, "sub/.gitattributes", "*.txt text eol=crlf\n")
    _goes_to_git(tracked, "attributes")
    info = _plain(tmp_path, "info")
    write(info / ".git" / "info" / "attributes", "*.txt -text\n")
    _goes_to_git(info, "attributes")
    untracked = _plain(tmp_path, "untracked")
    write(untracked / ".gitattributes", "*.md filter=lfs\n")
    _goes_to_git(untracked, "attributes")
    home = Path(os.environ["XDG_CONFIG_HOME"]) / "git" / "attributes"
    write(home, "*.md filter=lfs\n")
    try:
        _goes_to_git(_plain(tmp_path, "global"), "attributes")
    finally:
        home.unlink()


def test_intent_to_add_and_skip_worktree_entries_are_index_version(tmp_path: Path):
    ita = _plain(tmp_path, "ita")
    git(ita, "add", "-N", "new.txt")
    assert _raw_libgit2_counts(ita) != oracle.counts(ita)   # libgit2 alone: staged where git says not
    _goes_to_git(ita, "index_version")
    skip = _plain(tmp_path, "skip")
    git(skip, "update-index", "--skip-worktree", "README.md")
    (skip / "README.md").unlink()
    assert _raw_libgit2_counts(skip) != oracle.counts(skip)  # libgit2 alone: a deletion git hides
    _goes_to_git(skip, "index_version")


def test_sparse_checkout_is_git_s(tmp_path: Path):
    repo = _plain(tmp_path)
    commit_file(repo, "far/away.txt", "x\n")
    git(repo, "sparse-checkout", "set", "--no-cone", "/README.md", "/new.txt")
    assert _raw_libgit2_counts(repo) != oracle.counts(repo)
    _goes_to_git(repo, "sparse_checkout")


def test_a_fifo_stash_log_is_refused_before_git_status_would_block_on_it(tmp_path: Path):
    """An ineligible repository goes to `git status --show-stash`, which opens the stash log with a blocking
    open: a FIFO there is refused at once, as the in-process path refuses it, not waited on until git's 30 s
    timeout."""
    repo = _plain(tmp_path)
    git(repo, "sparse-checkout", "set", "--no-cone", "/README.md")
    os.mkfifo(repo / ".git" / "logs" / "refs" / "stash")
    path, gitdir, common = _dirs(repo)
    assert ineligible(path, gitdir, common) == "sparse_checkout"
    started = time.monotonic()
    with pytest.raises(gitfiles.BrokenRepo, match="the stash log is not a regular file"):
        repo_status(path, gitdir, common)
    assert time.monotonic() - started < 5


def test_split_index(tmp_path: Path):
    repo = _plain(tmp_path)
    git(repo, "update-index", "--split-index")
    _goes_to_git(repo, "index_extension")


def test_a_large_index_goes_to_git(tmp_path: Path, monkeypatch):
    repo = _plain(tmp_path)
    monkeypatch.setattr(libstatus, "MAX_ENTRIES", 0)
    _goes_to_git(repo, "too_large")


def test_a_symlinked_gitignore_is_git_s(tmp_path: Path):
    """git does not follow a .gitignore symlink inside the work tree; libgit2 would."""
    repo = _plain(tmp_path)
    write(tmp_path / "elsewhere", "*.txt\n")
    os.symlink(str(tmp_path / "elsewhere"), repo / ".gitignore")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "a symlinked ignore file")
    assert _raw_libgit2_counts(repo) != oracle.counts(repo)
    _goes_to_git(repo, "ignore_file")


@pytest.mark.parametrize(("key", "value", "where"), [
    ("status.showUntrackedFiles", "no", "repo"), ("status.showUntrackedFiles", "all", "global"),
    ("core.autocrlf", "true", "global"), ("core.sparseCheckout", "true", "repo"), ("core.ignoreCase", "true", "repo"), ("core.fileMode", "false", "repo"),
    ("status.renames", "copies", "repo"), ("core.worktree", "..", "repo")])
def test_a_setting_that_changes_the_status_is_git_s(tmp_path: Path, key: str, value: str, where: str):
    repo = _plain(tmp_path)
    if where == "global":
        git(repo, "config", "--global", key, value)
    else:
        git(repo, "config", key, value)
    try:
        _goes_to_git(repo, f"config:{key.lower()}")
    finally:
        if where == "global":
            git(repo, "config", "--global", "--unset", key)


@pytest.mark.parametrize(("settings", "where", "reason"), [
    ([("status.showUntrackedFiles", "no")], "repo", "config:status.showuntrackedfiles"),
    ([("core.autocrlf", "true")], "repo", "config:core.autocrlf"),
    ([("core.fileMode", "false"), ("core.ignoreCase", "true")], "repo", "config:core.filemode"),
    ([("diff.renames", "copies")], "repo", "config:diff.renames"),
    ([("core.autocrlf", "true"), ("core.autocrlf", "false")], "repo", None),   # the last one wins
    ([("core.autocrlf", "true")], "global", "config:core.autocrlf"),
    ([("status.showUntrackedFiles", "all")], "global+repo normal", None),      # the repo's over the person's
    ([("core.ignoreCase", "true")], "global+repo false", None)])
def test_a_clone_s_config_is_checked_from_the_record_s_read(tmp_path: Path, settings: list, where: str,
                                                           reason: str | None):
    """A clone's config has remote and branch sections, so the record parses it, plain: the check takes that
    file's entries from the record's read instead of libgit2's walk (fleet.git.config.Config.plain), after
    the person's own, and decides as from libgit2's entries alone (no Known)."""
    origin = init_repo(tmp_path / "origin", commits=2)
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(repo))
    write(repo / "new.txt", "new\n")
    path, gitdir, common = _dirs(repo)
    scope = "--global" if where.startswith("global") else "--local"
    for key, value in settings:
        git(repo, "config", scope, "--add", key, value)
    if where.endswith("normal"):
        git(repo, "config", "status.showUntrackedFiles", "normal")
    if where.endswith("false"):
        git(repo, "config", "core.ignoreCase", "false")
    try:
        assert _record_known(repo).config is not None
        for known in (None, _record_known(repo)):
            if reason is None:
                ours = inprocess_status(path, gitdir, common, known)
                assert _fields(ours) == _fields(_theirs(path))
            else:
                with pytest.raises(Ineligible) as caught:
                    inprocess_status(path, gitdir, common, known)
                assert caught.value.reason == reason
    finally:
        for key, _ in settings if scope == "--global" else ():
            git(repo, "config", "--global", "--unset-all", key)


def test_a_subsection_that_is_not_utf8_goes_to_git_from_the_record_s_read_too(tmp_path: Path):
    """pygit2 names libgit2's entries strictly: such a name was libgit2_error; the record's plain read of
    the same file is named alike."""
    origin = init_repo(tmp_path / "origin", commits=2)
    repo = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(repo))
    with open(repo / ".git" / "config", "ab") as fh:
        fh.write(b'[branch "caf\xe9"]\n\tremote = origin\n')
    path, gitdir, common = _dirs(repo)
    assert _record_known(repo).config is not None
    for known in (None, _record_known(repo)):
        with pytest.raises(Ineligible) as caught:
            inprocess_status(path, gitdir, common, known)
        assert caught.value.reason == "libgit2_error"
    assert repo_status(path, gitdir, common, _record_known(repo)).source == "git"


# Config lines a repository may hold to make the record's read and libgit2's disagree on a setting that changes
# the status: case, spacing, comments, quotes, continuations, bare keys, empty values, old-style subsections,
# repeated sections, a CR, a BOM, extensions.
HOSTILE_CONFIG_LINES = [
    b"[Core]\n\tAutoCRLF = true\n", b"[core]autocrlf=true\n", b"[core]\n\tautocrlf = true ; c\n",
    b"[core]\n\tautocrlf = true # c\n", b'[core]\n\tautocrlf = "true"\n', b"[core]\n\tautocrlf = tr\\\nue\n",
    b"[core]\n\tautocrlf\n", b"[core]\n\tautocrlf =\n", b"[core.x]\n\tautocrlf = true\n[core]\n\tfilemode\n",
    b"[status]\nshowuntrackedfiles=No\n", b"[core]\n\tignorecase = yes\n", b"[core]\n\tignorecase = on\n",
    b"[core]\n  ignorecase  =  true  \n", b"[core]\n\tignorecase = true\r\n", b"[core] ignorecase = true\n",
    b"[Extensions]\n\tobjectformat = sha1\n", b"[core]\n\tautocrlf = false\n[core]\n\tautocrlf = input\n",
    b"\xef\xbb\xbf[core]\n\tautocrlf = true\n", b"[status]\n\trenames = copies\n", b"[core]\n\tcheckstat = minimal\n",
]


@pytest.mark.parametrize("lines", HOSTILE_CONFIG_LINES)
@pytest.mark.parametrize("first", [False, True])
def test_a_hostile_config_decides_as_libgit2_reads_it_from_the_record_s_read_too(tmp_path: Path, lines: bytes,
                                                                                  first: bool, a_clone: Path):
    """The attack on the check taking the record's plain read of the config (`Known.config`): lines shaped so
    that a parser other than libgit2's reads a setting that changes the status otherwise. Whatever the record's
    read makes of them, the check decides as from libgit2's own entries (no Known): ineligible for the same
    reason, or in process with git's fields."""
    repo = tmp_path / "clone"
    shutil.copytree(a_clone, repo, symlinks=True)
    config = repo / ".git" / "config"
    config.write_bytes(lines + config.read_bytes() if first else config.read_bytes() + lines)
    path, gitdir, common = _dirs(repo)
    outcomes = []
    for known in (None, *_known_if_readable(repo)):
        try:
            outcomes.append(_fields(inprocess_status(path, gitdir, common, known)))
        except Ineligible as refused:
            outcomes.append(refused.reason)
    assert all(outcome == outcomes[0] for outcome in outcomes), outcomes
    if not isinstance(outcomes[0], str):
        assert outcomes[0] == _fields(_theirs(path))


@pytest.fixture(scope="module")
def a_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone with a change, built once and copied per test (its config has remote and branch sections: the
    record parses it). Its origin is referred to by path, so it stays where it was built."""
    base = tmp_path_factory.mktemp("hostile-config")
    origin = init_repo(base / "origin", commits=2)
    repo = base / "clone"
    git(base, "clone", "-q", str(origin), str(repo))
    write(repo / "new.txt", "new\n")
    return repo


def _known_if_readable(repo: Path) -> list[libstatus.Known]:
    """What the record hands the check, unless its read refuses the config (then no in-process status)."""
    try:
        return [_record_known(repo)]
    except gitfiles.BrokenRepo:
        return []


def test_show_untracked_no_really_differs(tmp_path: Path):
    repo = _plain(tmp_path)
    git(repo, "config", "status.showUntrackedFiles", "no")
    assert _raw_libgit2_counts(repo)["untracked"] == 1 and oracle.counts(repo)["untracked"] == 0


def test_conflicts_and_staged_renames(tmp_path: Path):
    renamed = _plain(tmp_path, "renamed")
    git(renamed, "mv", "README.md", "READ.md")
    _goes_to_git(renamed, "renames")


def test_a_staged_deletion_left_in_the_tree_is_also_untracked_as_git_lists_it(tmp_path: Path):
    """`git rm --cached`: libgit2 gives the path one entry (staged deletion and new in the tree), git two
    (`1 D.` and `? path`)."""
    repo = _plain(tmp_path)
    commit_file(repo, ".gitignore", "*.log\n")
    git(repo, "rm", "-q", "--cached", "README.md", ".gitignore")
    path, gitdir, common = _dirs(repo)
    ours = inprocess_status(path, gitdir, common)
    assert [(e.kind, e.xy) for e in ours.entries if e.path == "README.md"] == [("1", "D."), ("?", "??")]
    assert _fields(ours) == _fields(_theirs(path))
    assert (ours.staged, ours.untracked) == (2, 3) == (oracle.counts(repo)["staged"], oracle.counts(repo)["untracked"])
    attributes = _plain(tmp_path, "attributes")   # a .gitattributes so left in the tree is read by git
    commit_file(attributes, ".gitattributes", "*.md text\n")
    git(attributes, "rm", "-q", "--cached", ".gitattributes")
    _goes_to_git(attributes, "attributes")


def test_a_folder_where_the_index_has_a_file_is_git_s(tmp_path: Path):
    """git lists no untracked folder named as an index entry (dir.c, index_name_is_other); libgit2 does."""
    repo = _plain(tmp_path)
    (repo / "README.md").unlink()
    write(repo / "README.md" / "inside.txt", "x\n")
    assert _raw_libgit2_counts(repo)["untracked"] == oracle.counts(repo)["untracked"] + 1
    _goes_to_git(repo, "file_became_dir")


def test_a_path_that_is_not_utf8(tmp_path: Path):
    repo = _plain(tmp_path)
    (repo / os.fsdecode(b"caf\xe9.txt")).write_text("x\n")
    _goes_to_git(repo, "path_encoding")


def test_head_on_a_ref_that_is_no_branch(tmp_path: Path):
    repo = _plain(tmp_path)
    git(repo, "update-ref", "refs/other/x", "HEAD")
    git(repo, "symbolic-ref", "HEAD", "refs/other/x")
    _goes_to_git(repo, "head")


def test_an_index_that_is_no_index_is_unreadable_and_git_says_so(tmp_path: Path):
    repo = _plain(tmp_path)
    (repo / ".git" / "index").write_bytes(b"not an index at all")
    path, gitdir, common = _dirs(repo)
    assert ineligible(path, gitdir, common) == "unreadable"
    with pytest.raises(GitError) as ours:
        repo_status(path, gitdir, common)
    with pytest.raises(GitError) as theirs:
        _theirs(path)
    assert ours.value.message == theirs.value.message


@pytest.mark.slow
def test_a_fifo_gitignore_times_out_into_git(tmp_path: Path, monkeypatch):
    """libgit2 blocks opening it as git does; the deadline frees this process (git then has its own)."""
    repo = _plain(tmp_path)
    (repo / "d").mkdir()
    os.mkfifo(repo / "d" / ".gitignore")
    monkeypatch.setattr(libstatus, "TIMEOUT", 0.5)
    path, gitdir, common = _dirs(repo)
    with pytest.raises(Ineligible, match="timeout"):
        inprocess_status(path, gitdir, common)


def test_someone_else_s_alarm_is_left_alone(tmp_path: Path):
    import signal

    repo = _plain(tmp_path)
    path, gitdir, common = _dirs(repo)
    previous = signal.signal(signal.SIGALRM, lambda *a: None)
    try:
        with pytest.raises(Ineligible, match="alarm_in_use"):
            inprocess_status(path, gitdir, common)
    finally:
        signal.signal(signal.SIGALRM, previous)


# --- hostile repositories: nothing runs, nothing is written ---------------------------------------------


def _hostile_files(tmp_path: Path) -> Path:
    """The hostile tests' repository: files the hostile config's filters and attributes would name."""
    repo = init_repo(tmp_path / "hostile", commits=2)
    for name in ("shared.txt", "data.txt", "proc.p"):
        commit_file(repo, name, f"{name}\n")
    return repo


def _armed(repo: Path, tmp_path: Path) -> Path:
    """`repo`'s config given every command key git could run, each aimed at the returned marker folder."""
    marker = tmp_path / "marker"
    marker.mkdir()
    with open(repo / ".git" / "config", "a") as fh:
        fh.write(hostile_config(repo, marker))
    return marker


def test_a_hostile_config_runs_nothing_and_the_repository_is_not_written(tmp_path: Path):
    """Every command key git could run (fsmonitor, hooks, filters, pager, ...) in the repo's config, a
    stat-dirty work tree a locking `git status` would rewrite the index for: the in-process read runs none
    and changes no byte or mtime under the repository. Plain `git status` on a copy does both."""
    repo = _hostile_files(tmp_path)
    marker = _armed(repo, tmp_path)
    dirty_work_tree(repo)
    os.utime(repo / "README.md", (1, 1))
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    age_git_dir(repo)
    before = snapshot(repo)
    path, gitdir, common = _dirs(repo)
    status = repo_status(path, gitdir, common)
    assert status.source == "libgit2"
    assert fired(marker) == []
    assert snapshot_diff(before, snapshot(repo)) == []
    assert _fields(status) == _fields(_theirs(path))
    # the attack, on plain git: its fsmonitor runs and the index is rewritten
    age_git_dir(copy)
    index_before = (copy / ".git" / "index").stat().st_mtime_ns
    subprocess.run(["git", "-C", str(copy), "status", "--porcelain"], capture_output=True, check=False)
    assert "fsmonitor" in fired(marker)
    assert (copy / ".git" / "index").stat().st_mtime_ns != index_before


# --- linked worktrees: read in-process where git finds exactly their git dir and common dir -------------


def _git_dirs(wt: Path) -> tuple[str, str, str]:
    """The working tree, git dir and common dir git itself finds from `wt` (the oracle of the layout)."""
    path = os.path.realpath(wt)
    gitdir = git(wt, "rev-parse", "--absolute-git-dir").strip()
    common = os.path.realpath(os.path.join(path, git(wt, "rev-parse", "--git-common-dir").strip()))
    return path, gitdir, common


def _status_fields(status) -> tuple:
    return (*_fields(status), status.upstream)


def _wt_known(wt: Path) -> libstatus.Known:
    """What the record reads of a linked worktree before its status (fleet.repo.record.linked_worktrees):
    its own HEAD, the repository's refs, config and stashes."""
    _, gitdir, common = _git_dirs(wt)
    refs = gitfiles.read_refs(common)
    return record_known(gitfiles.read_head(gitdir, refs), refs, read_config(common), read_stashes(common))


class _StatusProcesses:
    """Counts the `git status` processes started through the one runner every status reader uses."""

    def __init__(self, monkeypatch) -> None:
        import fleet.git.status as gitstatus

        self.calls: list[str] = []
        real = gitstatus.run_git

        def counted(cwd, args, *rest, **kw):
            if args[:1] == ["status"]:
                self.calls.append(os.fspath(cwd))
            return real(cwd, args, *rest, **kw)

        monkeypatch.setattr(gitstatus, "run_git", counted)


WT_STATES = ["clean", "dirty", "staged", "untracked", "detached", "ahead_behind", "even", "locked",
             "non_ascii", "stashed", "excluded"]


@pytest.fixture(scope="module")
def worktrees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A clone (origin/main two commits ahead of where it forked) with a linked worktree in each state."""
    base = tmp_path_factory.mktemp("linked")
    origin = init_repo(base / "origin", commits=2)
    main = base / "main"
    git(base, "clone", "-q", str(origin), str(main))
    commit_file(origin, "upstream.txt", "u\n")
    commit_file(origin, "upstream2.txt", "u2\n")
    git(main, "fetch", "-q")
    wts: dict[str, Path] = {"main": main}

    def add(state: str, *args: str, start: str = "HEAD", folder: str | None = None) -> Path:
        wts[state] = base / (folder or f"wt-{state}")
        git(main, "worktree", "add", "-q", *args, str(wts[state]), start)
        return wts[state]

    add("clean", "-b", "clean-branch")
    wt = add("dirty", "-b", "dirty-branch")
    write(wt / "README.md", "edited\n")
    commit_file(wt, "gone.txt", "bye\n")
    (wt / "gone.txt").unlink()
    commit_file(wt, "tool.sh", "echo\n")
    os.chmod(wt / "tool.sh", 0o755)
    wt = add("staged", "-b", "staged-branch")
    write(wt / "new.txt", "new\n")
    write(wt / "README.md", "staged edit\n")
    git(wt, "add", "new.txt", "README.md")
    write(wt / "README.md", "and again\n")
    wt = add("untracked", "-b", "untracked-branch")
    write(wt / "a" / "b.txt", "u\n")
    write(wt / "c.txt", "u\n")
    add("detached", "--detach", start="HEAD~1")
    wt = add("ahead_behind", "-b", "tracking", "--track", start="origin/main")
    git(wt, "reset", "-q", "--hard", "origin/main~2")
    commit_file(wt, "mine.txt", "m\n")
    commit_file(wt, "mine2.txt", "m2\n")
    commit_file(wt, "mine3.txt", "m3\n")
    add("even", "-b", "even", "--track", start="origin/main")
    wt = add("locked", "-b", "locked-branch")
    git(main, "worktree", "lock", "--reason", "on a usb disk", str(wt))
    write(wt / "README.md", "locked edit\n")
    wt = add("non_ascii", "-b", "zweig-ü", folder="wörk trée")
    write(wt / "fïlé ü.txt", "x\n")
    commit_file(wt, "dàtá.txt", "d\n")
    write(wt / "dàtá.txt", "d2\n")
    wt = add("stashed", "-b", "stash-branch")
    write(wt / "README.md", "stash me\n")
    git(wt, "stash", "push", "-q", "-m", "from a worktree")   # refs/stash is shared: main counts it too
    write(wt / "README.md", "after the stash\n")
    wt = add("excluded", "-b", "excluded-branch")
    write(main / ".git" / "info" / "exclude", "*.secret\n")   # info/ is shared: it applies here
    gitdir = Path(_git_dirs(wt)[1])
    write(gitdir / "info" / "exclude", "*.txt\n")   # a worktree's own info/: neither git nor libgit2 reads it
    write(wt / "key.secret", "s\n")
    write(wt / "notes.txt", "n\n")
    return wts


@pytest.mark.parametrize("state", WT_STATES)
def test_a_linked_worktree_is_read_in_process_exactly_as_git_reads_it(worktrees, state):
    path, gitdir, common = _git_dirs(worktrees[state])
    assert gitdir != common and ineligible(path, gitdir, common) is None
    theirs = _theirs(path, common)
    for known in (None, _wt_known(worktrees[state])):
        ours = repo_status(path, gitdir, common, known)
        assert ours.source == "libgit2"
        assert _status_fields(ours) == _status_fields(theirs)


def test_the_linked_worktrees_states_are_the_ones_meant(worktrees):
    """The fixture's worktrees really are in those states (a test that cannot fail is a defect)."""
    st = {state: _theirs(*_git_dirs(worktrees[state])[::2]) for state in WT_STATES}
    assert (st["ahead_behind"].upstream, st["ahead_behind"].ahead, st["ahead_behind"].behind) == ("origin/main", 3, 2)
    assert (st["even"].ahead, st["even"].behind) == (0, 0)
    assert st["detached"].head is None and st["detached"].oid
    assert st["non_ascii"].head == "zweig-ü" and {e.path for e in st["non_ascii"].entries} == {"dàtá.txt", "fïlé ü.txt"}
    assert st["stashed"].stash == 1 and st["dirty"].unstaged == 3 and (st["staged"].staged, st["staged"].unstaged) == (2, 1)
    assert [e.path for e in st["excluded"].entries] == ["notes.txt"]
    assert "locked" in git(worktrees["main"], "worktree", "list", "--porcelain")


def test_a_repository_s_worktree_rows_are_counted_in_process_as_git_counts_them(worktrees, monkeypatch):
    """The record of the repository that owns them: every row's counts and HEAD are git's, with no `git status`
    started (the main worktree's own status in-process too)."""
    main = os.path.realpath(worktrees["main"])
    processes = _StatusProcesses(monkeypatch)
    record = read_repo(Found(main, f"{main}/.git", f"{main}/.git", False, os.path.dirname(main)), stored=False)
    assert processes.calls == []
    rows = {row["path"]: row for row in record["worktrees"]}
    assert set(rows) == {os.path.realpath(worktrees[s]) for s in WT_STATES}
    for state in WT_STATES:
        row = rows[os.path.realpath(worktrees[state])]
        expected = oracle.counts(worktrees[state])
        assert {k: row[k] for k in expected} == expected, state
        assert row["head"] == git(worktrees[state], "rev-parse", "HEAD").strip()
    assert record["stashes"] == 1


def test_a_missing_or_prunable_worktree_folder_starts_no_status(tmp_path: Path, monkeypatch):
    repo = _plain(tmp_path)
    git(repo, "worktree", "add", "-q", "-b", "gone", str(tmp_path / "gone"))
    shutil.rmtree(tmp_path / "gone")
    git(repo, "worktree", "add", "-q", "-b", "away", str(tmp_path / "away"))
    git(repo, "worktree", "lock", str(tmp_path / "away"))
    shutil.rmtree(tmp_path / "away")
    path, gitdir, common = _dirs(repo)
    processes = _StatusProcesses(monkeypatch)
    record = read_repo(Found(path, gitdir, common, False, os.path.dirname(path)), stored=False)
    assert processes.calls == []
    assert [(row["prunable"], row["locked"], row["staged"]) for row in record["worktrees"]] == \
        [(False, True, None), (True, False, None)]


def _wt_goes_to_git(wt: Path, reason: str, monkeypatch, dirs: tuple[str, str, str] | None = None) -> None:
    """`reason` is why, and the status is git's own, from one `git status` process."""
    path, gitdir, common = dirs or _git_dirs(wt)
    with pytest.raises(Ineligible) as caught:
        inprocess_status(path, gitdir, common)
    assert caught.value.reason == reason
    processes = _StatusProcesses(monkeypatch)
    ours = repo_status(path, gitdir, common)
    assert ours.source == "git" and processes.calls == [path]
    assert _status_fields(ours) == _status_fields(_theirs(path, common))


def _linked_pair(tmp_path: Path, name: str = "r") -> tuple[Path, Path]:
    repo = _plain(tmp_path, name)
    wt = tmp_path / f"{name}-wt"
    git(repo, "worktree", "add", "-q", "-b", f"{name}-wt", str(wt))
    write(wt / "README.md", "worktree edit\n")
    write(wt / "untracked.txt", "u\n")
    return repo, wt


def test_a_worktree_with_its_own_sparse_checkout_is_git_s(tmp_path: Path, monkeypatch):
    repo, wt = _linked_pair(tmp_path)
    commit_file(wt, "far/away.txt", "x\n")
    git(wt, "sparse-checkout", "set", "--no-cone", "/README.md", "/untracked.txt")
    assert _raw_libgit2_counts(wt) != oracle.counts(wt)   # libgit2 alone: the files outside it deleted
    assert "worktreeconfig" in (Path(_git_dirs(wt)[2]) / "config").read_text().lower()   # git's own config for it
    _wt_goes_to_git(wt, "sparse_checkout", monkeypatch)
    repo, wt = _linked_pair(tmp_path, "s")
    write(Path(_git_dirs(wt)[1]) / "info" / "sparse-checkout", "/README.md\n")   # the worktree's own file
    _wt_goes_to_git(wt, "sparse_checkout", monkeypatch)


def test_a_worktree_of_a_repository_with_submodules_is_git_s(tmp_path: Path, monkeypatch):
    lib = init_repo(tmp_path / "lib", commits=1)
    sup = init_repo(tmp_path / "super", commits=1)
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "libs/lib")
    git(sup, "commit", "-q", "-m", "a submodule")
    git(sup, "worktree", "add", "-q", "-b", "wt", str(tmp_path / "super-wt"))
    _wt_goes_to_git(tmp_path / "super-wt", "submodules", monkeypatch)


def test_a_worktree_config_and_a_shallow_file_are_git_s(tmp_path: Path, monkeypatch):
    repo, wt = _linked_pair(tmp_path, "cfg")
    git(repo, "config", "extensions.worktreeConfig", "true")
    git(wt, "config", "--worktree", "status.showUntrackedFiles", "no")
    _wt_goes_to_git(wt, "extensions", monkeypatch)
    repo, wt = _linked_pair(tmp_path, "shallow")
    sha = git(repo, "rev-parse", "HEAD").strip()
    write(Path(_git_dirs(wt)[1]) / "shallow", sha + "\n")   # libgit2 would read it there, git does not
    _wt_goes_to_git(wt, "shallow", monkeypatch)


def test_a_worktree_of_a_bare_repository_is_git_s(tmp_path: Path, monkeypatch):
    origin = init_repo(tmp_path / "origin", commits=2)
    git(tmp_path, "clone", "-q", "--bare", str(origin), str(tmp_path / "bare.git"))
    git(tmp_path / "bare.git", "worktree", "add", "-q", "-b", "wt", str(tmp_path / "bare-wt"))
    write(tmp_path / "bare-wt" / "README.md", "edit\n")
    _wt_goes_to_git(tmp_path / "bare-wt", "config:core.bare", monkeypatch)


@pytest.mark.parametrize("pointer", ["relative", "crlf", "spaces", "no_space", "elsewhere", "folder"])
def test_a_dot_git_file_git_may_read_otherwise_is_git_s(tmp_path: Path, monkeypatch, pointer: str):
    """The worktree's `.git` file in forms git and libgit2 read apart (git strips only line ends, libgit2
    any trailing space) or naming another git dir: the in-process status is not tried."""
    repo, wt = _linked_pair(tmp_path)
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "other", str(other))
    dirs = _git_dirs(wt)
    gitdir = dirs[1]
    dotgit = wt / ".git"
    if pointer == "relative":
        dotgit.write_text(f"gitdir: {os.path.relpath(gitdir, os.path.realpath(wt))}\n")
    elif pointer == "crlf":
        dotgit.write_bytes(f"gitdir: {gitdir}\r\n".encode())
    elif pointer == "spaces":
        dotgit.write_text(f"gitdir: {gitdir}  \n")
    elif pointer == "no_space":
        dotgit.write_text(f"gitdir:{gitdir}\n")
    elif pointer == "elsewhere":
        dotgit.write_text(f"gitdir: {_git_dirs(other)[1]}\n")
    else:
        dotgit.unlink()
        shutil.copytree(gitdir, dotgit)
    if pointer in ("relative", "crlf"):
        assert _git_dirs(wt) == dirs   # git reads these as the plain form
    if pointer in ("spaces", "no_space", "folder"):
        with pytest.raises(Ineligible, match="layout"):
            inprocess_status(*dirs)
        return   # git reads another git dir, or none: the record's own discovery decides what it reads
    _wt_goes_to_git(wt, "layout", monkeypatch, dirs if pointer != "elsewhere" else None)
    if pointer == "elsewhere":
        with pytest.raises(Ineligible, match="layout"):
            inprocess_status(*dirs)


@pytest.mark.parametrize("common", ["missing", "absolute", "another_repo", "trailing_space"])
def test_a_commondir_file_git_may_read_otherwise_is_git_s(tmp_path: Path, monkeypatch, common: str):
    repo, wt = _linked_pair(tmp_path)
    path, gitdir, commondir = _git_dirs(wt)
    pointer = Path(gitdir) / "commondir"
    if common == "missing":
        pointer.unlink()
    elif common == "absolute":
        pointer.write_text(commondir + "\n")
    elif common == "another_repo":
        pointer.write_text(os.path.join(os.path.realpath(init_repo(tmp_path / "stranger", commits=1)), ".git") + "\n")
    else:
        pointer.write_text("../..  \n")
    if common == "absolute":   # the plain absolute form: git and libgit2 find the same common dir
        assert _git_dirs(wt) == (path, gitdir, commondir)
        assert repo_status(path, gitdir, commondir).source == "libgit2"
        return
    with pytest.raises(Ineligible, match="layout"):
        inprocess_status(path, gitdir, commondir)
    if common == "another_repo":
        _wt_goes_to_git(wt, "layout", monkeypatch, (path, gitdir, commondir))


def test_a_back_pointer_to_another_folder_is_git_s(tmp_path: Path, monkeypatch):
    """libgit2 takes a linked worktree's folder from its git dir's `gitdir` file, git from where it found the
    `.git` file: when they differ, libgit2 would read another tree."""
    repo, wt = _linked_pair(tmp_path)
    path, gitdir, common = _git_dirs(wt)
    decoy = tmp_path / "decoy"
    shutil.copytree(wt, decoy)
    write(decoy / "only-in-the-decoy.txt", "d\n")
    (Path(gitdir) / "gitdir").write_text(f"{os.path.realpath(decoy)}/.git\n")
    _wt_goes_to_git(wt, "layout", monkeypatch, (path, gitdir, common))


def test_a_hostile_repository_s_linked_worktree_runs_nothing_and_nothing_is_written(tmp_path: Path):
    """The hostile config (every command key aimed at a marker folder) in the common dir a linked worktree
    shares, its tree stat-dirty: read in-process, nothing runs and no byte or mtime changes under the
    repository (its `.git/worktrees/` included) or the worktree."""
    repo = _hostile_files(tmp_path)
    wt = tmp_path / "hostile-wt"
    git(repo, "worktree", "add", "-q", "-b", "wt", str(wt))   # before the config is armed: no hook runs
    path, gitdir, common = _git_dirs(wt)
    marker = _armed(repo, tmp_path)
    dirty_work_tree(wt)
    os.utime(wt / "README.md", (1, 1))
    age_git_dir(repo)
    before = snapshot(repo), snapshot(wt)
    status = repo_status(path, gitdir, common)
    assert status.source == "libgit2"
    assert fired(marker) == []
    assert [snapshot_diff(b, a) for b, a in zip(before, (snapshot(repo), snapshot(wt)))] == [[], []]
    assert _fields(status) == _fields(_theirs(path, common))


# --- unmerged paths: each kind's XY from the index's stages, as git's wt-status.c gives it ---------------


def _forked(repo: Path, ours: dict, theirs: dict, base: dict | None = None, topic: str = "topic") -> None:
    """`base` committed on main, then `theirs` on a new branch `topic` and `ours` on main (a value: the
    file's new text, None: deleted, a str starting with "mv:": renamed there). HEAD ends on main."""
    def apply(changes: dict) -> None:
        for name, text in changes.items():
            if text is None:
                git(repo, "rm", "-q", "--", name)
            elif text.startswith("mv:"):
                git(repo, "mv", "--", name, text[3:])
            else:
                write(repo / name, text)
                git(repo, "add", "--", name)
        git(repo, "commit", "-q", "--allow-empty", "-m", "changes")

    apply(base or {})
    git(repo, "checkout", "-q", "-b", topic)
    apply(theirs)
    git(repo, "checkout", "-q", "main")
    apply(ours)


SEVEN = {"uu.txt": "base\n", "du.txt": "base\n", "ud.txt": "base\n", "ren.txt": "rename me\n" * 5,
         "ünï cödé.txt": "base\n"}
SEVEN_OURS = {"uu.txt": "main\n", "aa.txt": "main aa\n", "du.txt": None, "ud.txt": "main changed\n",
              "ren.txt": "mv:our-name.txt", "ünï cödé.txt": "main\n"}
SEVEN_THEIRS = {"uu.txt": "topic\n", "aa.txt": "topic aa\n", "du.txt": "topic changed\n", "ud.txt": None,
                "ren.txt": "mv:theirs-name.txt", "ünï cödé.txt": "topic\n"}


def _conflict_repos(base: Path) -> dict[str, Path]:
    repos: dict[str, Path] = {}

    # one merge, all seven kinds: UU, AA, DU, UD, and a rename/rename's DD, AU, UA
    repo = repos["merge"] = init_repo(base / "merge", commits=1)
    _forked(repo, SEVEN_OURS, SEVEN_THEIRS, SEVEN)
    git(repo, "merge", "topic", check=False)

    # the same merge, then worked on: one resolved and staged, one edited, one removed from the tree, one
    # staged `git rm`, a clean merged change staged, an unrelated edit and untracked files
    repo = repos["merge_worked_on"] = init_repo(base / "merge_worked_on", commits=1)
    _forked(repo, {**SEVEN_OURS, "README.md": "ours readme\n"},
            {**SEVEN_THEIRS, "clean.txt": "merged cleanly\n"}, {**SEVEN, "clean.txt": "base\n"})
    git(repo, "merge", "topic", check=False)
    write(repo / "uu.txt", "resolved\n")
    git(repo, "add", "uu.txt")
    write(repo / "aa.txt", "edited in the conflict\n")
    (repo / "ünï cödé.txt").unlink()
    git(repo, "rm", "-q", "--cached", "ud.txt")   # staged deleted, and untracked again
    write(repo / "README.md", "unstaged edit\n")
    write(repo / "new" / "untracked.txt", "u\n")
    write(repo / "ud.txt~", "u\n")

    # cherry-pick: UU, DU (we deleted what the picked commit changes), AA
    repo = repos["cherry_pick"] = init_repo(base / "cherry_pick", commits=1)
    _forked(repo, {"uu.txt": "main\n", "du.txt": None, "aa.txt": "main\n"},
            {"uu.txt": "topic\n", "du.txt": "topic\n", "aa.txt": "topic\n"}, {"uu.txt": "b\n", "du.txt": "b\n"})
    git(repo, "cherry-pick", "topic", check=False)

    # rebase of topic onto main: HEAD is main's side (stage 2), the replayed commit theirs (stage 3): UD, UU
    repo = repos["rebase"] = init_repo(base / "rebase", commits=1)
    _forked(repo, {"uu.txt": "main\n", "ud.txt": "main changed\n"}, {"uu.txt": "topic\n", "ud.txt": None},
            {"uu.txt": "b\n", "ud.txt": "b\n"})
    git(repo, "checkout", "-q", "topic")
    git(repo, "rebase", "main", check=False)

    # rebase with renames on both sides: DD, AU, UA
    repo = repos["rebase_renames"] = init_repo(base / "rebase_renames", commits=1)
    _forked(repo, {"ren.txt": "mv:main-name.txt"}, {"ren.txt": "mv:topic-name.txt"}, {"ren.txt": "r\n" * 5})
    git(repo, "checkout", "-q", "topic")
    git(repo, "rebase", "main", check=False)

    # stash pop onto a HEAD that changed the file (UU) and deleted another the stash changed (DU)
    repo = repos["stash_pop"] = init_repo(base / "stash_pop", commits=1)
    commit_file(repo, "s.txt", "base\n")
    commit_file(repo, "gone.txt", "base\n")
    write(repo / "s.txt", "stashed\n")
    write(repo / "gone.txt", "stashed\n")
    git(repo, "stash", "push", "-q")
    commit_file(repo, "s.txt", "committed\n")
    git(repo, "rm", "-q", "gone.txt")
    git(repo, "commit", "-q", "-m", "gone")
    git(repo, "stash", "pop", check=False)

    # revert of an older change a later commit edited again: UU
    repo = repos["revert"] = init_repo(base / "revert", commits=1)
    commit_file(repo, "r.txt", "one\n")
    commit_file(repo, "r.txt", "two\n")
    commit_file(repo, "r.txt", "three\n")
    git(repo, "revert", "--no-edit", "HEAD~1", check=False)

    # a merge of an unborn-side add/add and a merge in progress in a linked worktree
    repo = init_repo(base / "owner", commits=1)
    _forked(repo, {"w.txt": "main\n"}, {"w.txt": "topic\n"}, {"w.txt": "b\n"})
    git(repo, "branch", "side", "main")
    wt = repos["worktree_merge"] = base / "worktree_merge"
    git(repo, "worktree", "add", "-q", str(wt), "side")
    git(wt, "merge", "topic", check=False)
    return repos


KINDS = {"merge": {"UU", "AA", "DU", "UD", "DD", "AU", "UA"}, "cherry_pick": {"UU", "DU", "AA"},
         "rebase": {"UU", "UD"}, "rebase_renames": {"DD", "AU", "UA"}, "stash_pop": {"UU", "DU"},
         "revert": {"UU"}, "worktree_merge": {"UU"}, "merge_worked_on": {"AA", "DU", "DD", "AU", "UA", "UU"}}


@pytest.fixture(scope="module")
def conflicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _conflict_repos(tmp_path_factory.mktemp("conflicts"))


@pytest.mark.parametrize("state", sorted(KINDS))
def test_unmerged_paths_are_read_in_process_exactly_as_git_reads_them(conflicts, state):
    path, gitdir, common = _git_dirs(conflicts[state])
    theirs = _theirs(path, common)
    assert {e.xy for e in theirs.entries if e.kind == "u"} == KINDS[state]   # the kinds this state is for
    for known in (None, _wt_known(conflicts[state])):
        ours = repo_status(path, gitdir, common, known)
        assert ours.source == "libgit2"
        assert [(e.kind, e.xy, e.path, e.orig_path, e.submodule) for e in ours.entries] == \
            [(e.kind, e.xy, e.path, e.orig_path, e.submodule) for e in theirs.entries]
        assert _status_fields(ours) == _status_fields(theirs)


@pytest.mark.parametrize("state", sorted(KINDS))
def test_a_conflicted_repository_s_record_counts_are_git_s_with_no_git_status(conflicts, state, monkeypatch):
    path, gitdir, common = _git_dirs(conflicts[state])
    processes = _StatusProcesses(monkeypatch)
    record = read_repo(Found(path, gitdir, common, False, os.path.dirname(os.path.dirname(path))), stored=False)
    assert processes.calls == []
    expected = oracle.counts(conflicts[state])
    assert expected["conflicted"] and {k: record[k] for k in expected} == expected


def test_a_conflict_beside_a_staged_rename_or_on_a_gitlink_is_git_s(tmp_path: Path, monkeypatch):
    """A merge that renames a file cleanly stages an addition and a deletion git pairs (renames); a
    conflicted submodule leaves gitlinks in the index's stages (submodules)."""
    repo = init_repo(tmp_path / "renamed", commits=1)
    _forked(repo, {"uu.txt": "main\n"}, {"uu.txt": "topic\n", "ren.txt": "mv:moved.txt"},
            {"uu.txt": "b\n", "ren.txt": "rename me\n" * 5})
    git(repo, "merge", "topic", check=False)
    assert {e.kind for e in _theirs(*_git_dirs(repo)[::2]).entries} == {"u", "2"}
    _wt_goes_to_git(repo, "renames", monkeypatch)
    lib = init_repo(tmp_path / "lib", commits=3)
    sup = init_repo(tmp_path / "super", commits=1)
    shas = git(lib, "rev-list", "HEAD").split()
    git(sup, "update-index", "--add", "--cacheinfo", f"160000,{shas[2]},vendored")
    git(sup, "commit", "-q", "-m", "gitlink")
    git(sup, "checkout", "-q", "-b", "topic")
    git(sup, "update-index", "--cacheinfo", f"160000,{shas[1]},vendored")
    git(sup, "commit", "-q", "-m", "theirs")
    git(sup, "checkout", "-q", "main")
    git(sup, "update-index", "--cacheinfo", f"160000,{shas[0]},vendored")
    git(sup, "commit", "-q", "-m", "ours")
    git(sup, "merge", "topic", check=False)
    assert [e.xy for e in _theirs(*_git_dirs(sup)[::2]).entries if e.kind == "u"] == ["UU"]
    _wt_goes_to_git(sup, "submodules", monkeypatch)


def test_a_folder_where_an_unmerged_file_was_is_git_s(conflicts, tmp_path: Path, monkeypatch):
    """git lists no untracked folder named as an unmerged path either; libgit2 does."""
    repo = tmp_path / "merge"
    shutil.copytree(conflicts["merge"], repo, symlinks=True)
    (repo / "our-name.txt").unlink()
    write(repo / "our-name.txt" / "x.txt", "x\n")
    assert _raw_libgit2_counts(repo)["untracked"] == oracle.counts(repo)["untracked"] + 1
    _wt_goes_to_git(repo, "file_became_dir", monkeypatch)


def test_unmerged_paths_other_than_the_index_s_are_git_s(conflicts):
    """The guard behind the `u` entries: libgit2's conflicted paths must be exactly the index's unmerged ones."""
    index = pygit2.Repository(str(conflicts["revert"])).index
    assert [(e.kind, e.xy, e.path) for e in libstatus._unmerged(["r.txt"], index)] == [("u", "UU", "r.txt")]
    for paths in (["other.txt"], ["r.txt", "other.txt"], []):
        with pytest.raises(Ineligible, match="conflicts"):
            libstatus._unmerged(paths, index)
