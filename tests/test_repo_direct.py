"""fleet/repo logic called directly (not through MCP): the brief, target resolution and patch path checks,
each checked against what git (or the file system) says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.repo.brief import repo_brief
from fleet.repo.paths import resolve_in_repo, work_tree_root
from fleet.index.target import resolve_target
from tests.fleets import oracle
from tests.fleets.gitbuild import commit_file, git, init_repo, write


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A root with a dirty, a detached and an empty repo, indexed; plus a repo outside the root."""
    base = tmp_path_factory.mktemp("direct")
    root = base / "root"
    dirty = init_repo(root / "dirty", commits=3)
    commit_file(dirty, "src/app.py", "print('hi')\n")
    write(dirty / "src/app.py", "print('changed')\n")
    write(dirty / "notes.txt", "untracked\n")
    write(dirty / "staged.txt", "staged\n")
    git(dirty, "add", "staged.txt")
    detached = init_repo(root / "detached", commits=2)
    git(detached, "checkout", "-q", "--detach", "HEAD~1")
    empty = init_repo(root / "empty", commits=0)
    outside = init_repo(base / "outside", commits=1)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"root": root, "dirty": dirty, "detached": detached, "empty": empty, "outside": outside, "db": db}


@pytest.fixture
def index(fleet):
    with open_index(fleet["db"]) as idx:
        yield idx


@pytest.mark.parametrize("name", ["dirty", "detached", "empty"])
def test_brief_matches_git(index, fleet, name):
    repo = fleet[name]
    brief = repo_brief(resolve_target(index, str(repo)), commits=5)
    head = oracle.head_state(repo)
    assert brief["head"]["sha"] == (head["head"][:12] if head["head"] else None)
    assert brief["head"]["branch"] == head["branch"]
    assert brief["head"]["detached"] is head["detached"]
    assert brief["head"]["unborn"] is (head["head"] is None)
    counts = oracle.counts(repo)
    for key in ("staged", "unstaged", "untracked", "conflicted"):
        assert brief["working_tree"][key] == counts[key], key
    assert brief["working_tree"]["clean"] is not any(counts[k] for k in ("staged", "unstaged", "untracked",
                                                                          "conflicted"))
    expected = git(repo, "log", "-n5", "--format=%h", "--abbrev=12").split() if head["head"] else []
    assert [c["sha"] for c in brief["recent_commits"]] == expected


def test_brief_states_differ_as_git_says(index, fleet):
    """The three repos really are in three states (so the comparisons above cannot pass vacuously)."""
    dirty = repo_brief(resolve_target(index, str(fleet["dirty"])))
    detached = repo_brief(resolve_target(index, str(fleet["detached"])))
    empty = repo_brief(resolve_target(index, str(fleet["empty"])))
    assert dirty["working_tree"]["clean"] is False and dirty["head"]["branch"] == "main"
    assert detached["head"]["detached"] is True and detached["head"]["branch"] is None
    assert any("detached" in h for h in detached["hints"])
    assert empty["head"]["unborn"] is True and empty["head"]["branch"] == "main" and empty["recent_commits"] == []


def test_resolve_target_by_name_path_and_subfolder(index, fleet):
    real = os.path.realpath(fleet["dirty"])
    assert resolve_target(index, "dirty").path == real
    assert resolve_target(index, str(fleet["dirty"])).path == real
    assert resolve_target(index, str(fleet["dirty"] / "src")).path == real
    assert resolve_target(index, "detached").path == os.path.realpath(fleet["detached"])


@pytest.mark.parametrize("where", ["outside", "/etc", "no-such-name"])
def test_resolve_target_outside_the_roots_is_refused(index, fleet, where):
    target = str(fleet["outside"]) if where == "outside" else where
    with pytest.raises(FleetError) as err:
        resolve_target(index, target)
    assert err.value.code == "REPO_NOT_IN_FLEET", err.value.message


def test_resolve_target_folder_in_root_but_no_repo(index, fleet):
    (fleet["root"] / "plain").mkdir(exist_ok=True)
    with pytest.raises(FleetError) as err:
        resolve_target(index, str(fleet["root"] / "plain"))
    assert err.value.code == "REPO_NOT_IN_FLEET"


@pytest.mark.parametrize("bad", ["../escape.txt", "src/../../escape.txt", "/etc/passwd", "a\0b", ".git/config",
                                 "", "src//x"])
def test_patch_paths_refuse_escapes(fleet, bad):
    root = work_tree_root(fleet["dirty"])
    with pytest.raises(FleetError) as err:
        resolve_in_repo(root, bad)
    assert err.value.code == "BAD_PATH"


def test_patch_paths_refuse_symlinks_out_and_in(tmp_path, fleet):
    repo = init_repo(tmp_path / "links", commits=1)
    outside = tmp_path / "secret"
    outside.mkdir()
    (repo / "out").symlink_to(outside)
    (repo / "in").symlink_to(repo / "src-real")
    (repo / "src-real").mkdir()
    root = work_tree_root(repo)
    for name, where in (("out/x.txt", "outside"), ("in/x.txt", "inside")):
        with pytest.raises(FleetError) as err:
            resolve_in_repo(root, name)
        assert err.value.code == "BAD_PATH" and f"({where} the repository)" in err.value.message
    assert resolve_in_repo(root, "src-real/x.txt") == root / "src-real" / "x.txt"


def test_work_tree_root_wants_the_top(fleet):
    assert work_tree_root(fleet["dirty"]) == Path(fleet["dirty"]).resolve()
    for bad, code in ((fleet["dirty"] / "src", "BAD_PATH"), (Path("relative"), "BAD_PATH"),
                      (fleet["root"] / "missing", "NOT_FOUND")):
        with pytest.raises(FleetError) as err:
            work_tree_root(bad)
        assert err.value.code == code, bad


def _brief(tmp_path: Path, repo: Path) -> dict:
    db = tmp_path / f"{repo.name}.db"
    with open_index(db) as index:
        scan(index, [str(repo)])
        return repo_brief(resolve_target(index, str(repo)), commits=10)


def _rules_oracle(repo: Path) -> dict:
    subjects = git(repo, "log", "--no-merges", "-n50", "--format=%s").splitlines()
    return {"sampled": len(subjects), "max": max(map(len, subjects)),
            "conventional": round(sum(s.startswith(("feat: ", "fix: ")) for s in subjects) / len(subjects), 2)}


@pytest.mark.slow
def test_brief_reads_recent_commits_and_house_rules_as_git_log_does_around_merges(tmp_path):
    """The brief reads its recent commits and the house rules' sample from one `git log` of 50 commits. Merges
    among them are recent commits but not part of the sample: with history beyond the 50 the sample is read
    again without them (`long`), with all history inside the 50 it is complete as it is (`short`). Both
    must equal git's own `log -n10` and `log --no-merges -n50` (the counts differ between the two repos, so
    neither check passes by accident); the short repo's merge is its newest commit."""
    long = init_repo(tmp_path / "long", commits=0)
    for i in range(70):
        git(long, "commit", "-q", "--allow-empty", "-m", f"{'feat: ' if i % 3 else ''}step {i}" + "x" * (i % 7))
        if i % 10 == 9:
            git(long, "checkout", "-q", "-b", f"side{i}")
            git(long, "commit", "-q", "--allow-empty", "-m", f"feat: side work {i} with a longer subject")
            git(long, "checkout", "-q", "main")
            git(long, "merge", "-q", "--no-ff", "-m", f"Merge side{i}", f"side{i}")
    short = init_repo(tmp_path / "short", commits=0)
    for i in range(6):
        git(short, "commit", "-q", "--allow-empty", "-m", f"feat: small {i}")
    git(short, "checkout", "-q", "-b", "topic")
    git(short, "commit", "-q", "--allow-empty", "-m", "fix: topic")
    git(short, "checkout", "-q", "main")
    git(short, "merge", "-q", "--no-ff", "-m", "Merge topic", "topic")
    seen = set()
    for repo in (long, short):
        brief = _brief(tmp_path, repo)
        assert [c["sha"] for c in brief["recent_commits"]] == git(repo, "log", "-n10", "--format=%h",
                                                                  "--abbrev=12").split()
        assert [c["subject"] for c in brief["recent_commits"]] == git(repo, "log", "-n10",
                                                                      "--format=%s").splitlines()
        rules, oracle_rules = brief["conventions"], _rules_oracle(repo)
        assert rules["sampled"] == oracle_rules["sampled"]
        assert rules["subject_length"]["max"] == oracle_rules["max"]
        assert rules["conventional_ratio"] == oracle_rules["conventional"]
        seen.add(rules["sampled"])
    assert seen == {50, 7}
    assert _brief(tmp_path, short)["recent_commits"][0]["subject"] == "Merge topic"


def test_brief_with_messages_over_the_logs_bound_still_lists_recent_commits(tmp_path):
    """A commit message of 5 MB puts the 50 commits' log over its bound: the recent commits are still read (a
    log of their subjects alone, the huge one among them), and the house rules say nothing rather than guess
    from part of the sample."""
    repo = init_repo(tmp_path / "huge", commits=12)
    message = write(tmp_path / "message.txt", "feat: a huge message\n\n" + "body line\n" * 500_000)
    git(repo, "commit", "-q", "--allow-empty", "-F", str(message))
    for i in range(3):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"fix: after {i}")
    brief = _brief(tmp_path, repo)
    assert [c["sha"] for c in brief["recent_commits"]] == git(repo, "log", "-n10", "--format=%h",
                                                              "--abbrev=12").split()
    assert brief["recent_commits"][3]["subject"] == "feat: a huge message"   # among them: its subject alone
    assert brief["conventions"] is None


def test_brief_default_branch_follows_origins_head_as_git_names_it(tmp_path):
    """origin's HEAD is read from its symbolic-ref file: checked against `git symbolic-ref` as it moves to a
    branch the clone has, to one only the remote has, after `pack-refs --all` (a symbolic ref stays loose),
    with a tag named like the branch (git's short names turn ambiguous; the brief still names the branch), at
    a tag (named as `git symbolic-ref --short` names it), and once origin's HEAD is a plain ref (not symbolic:
    the repo's `init.defaultBranch` decides)."""
    from tests.fleets.gitbuild import bare_remote, clone

    remote = bare_remote(tmp_path / "remote.git")
    seed = init_repo(tmp_path / "seed", commits=2)
    git(seed, "branch", "dev")
    git(seed, "push", "-q", str(remote), "main", "dev")
    repo = clone(remote, tmp_path / "clone")

    def target() -> str:
        return git(repo, "symbolic-ref", "refs/remotes/origin/HEAD").strip()

    assert target() == "refs/remotes/origin/main"
    assert _brief(tmp_path, repo)["default_branch"] == "main"
    git(repo, "remote", "set-head", "origin", "dev")
    assert target() == "refs/remotes/origin/dev" and "dev" not in git(repo, "branch", "--format=%(refname:short)")
    assert _brief(tmp_path, repo)["default_branch"] == "origin/dev"
    git(repo, "branch", "-q", "dev", "origin/dev")
    git(repo, "pack-refs", "--all")
    assert target() == "refs/remotes/origin/dev"
    assert _brief(tmp_path, repo)["default_branch"] == "dev"
    git(repo, "tag", "dev")
    assert git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/dev").strip() == "heads/dev"
    assert _brief(tmp_path, repo)["default_branch"] == "dev"
    git(repo, "tag", "v1")
    git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/tags/v1")
    assert git(repo, "symbolic-ref", "--short", "refs/remotes/origin/HEAD").strip() == "v1"
    assert _brief(tmp_path, repo)["default_branch"] == "v1"
    git(repo, "update-ref", "--no-deref", "refs/remotes/origin/HEAD", git(repo, "rev-parse", "HEAD").strip())
    assert git(repo, "symbolic-ref", "-q", "refs/remotes/origin/HEAD", check=False).strip() == ""
    git(repo, "branch", "-q", "trunk")
    git(repo, "config", "init.defaultBranch", "trunk")
    assert _brief(tmp_path, repo)["default_branch"] == "trunk"


def test_an_origin_head_that_is_no_ref_file_is_not_opened_by_git_either(tmp_path):
    """A hostile repository can make `refs/remotes/origin/HEAD` a FIFO (a git that opens it waits forever), a
    link to a file outside, a pointer to a name git refuses, or a pointer after a blank (not a symbolic ref to
    git): the brief answers at once (checked from another thread, so a hang fails instead of stalling the
    suite), taking none of them as origin's HEAD (the usual name decides). git refuses the last two too; the
    link it would follow (legacy symlink refs), fleetdeck deliberately does not."""
    import threading

    repo = init_repo(tmp_path / "hostile", commits=1)
    git(repo, "branch", "elsewhere")
    head = repo / ".git" / "refs" / "remotes" / "origin" / "HEAD"
    head.parent.mkdir(parents=True)
    outside = write(tmp_path / "outside.txt", "ref: refs/remotes/origin/elsewhere\n")   # followed: "elsewhere"
    for make in (lambda: os.mkfifo(head), lambda: os.symlink(outside, head),
                 lambda: head.write_text("ref: refs/remotes/origin/a..b\n"),
                 lambda: head.write_text(" ref: refs/remotes/origin/elsewhere\n")):
        if os.path.lexists(head):
            os.unlink(head)
        make()
        answers: list[dict] = []
        reader = threading.Thread(target=lambda: answers.append(_brief(tmp_path, repo)), daemon=True)
        reader.start()
        reader.join(20)
        assert not reader.is_alive() and answers, "the brief hung on origin's HEAD"
        assert answers[0]["default_branch"] == "main" and answers[0]["error"] is None
        if not head.is_symlink() and head.is_file():
            assert git(repo, "symbolic-ref", "-q", "refs/remotes/origin/HEAD", check=False).strip() == ""


def test_a_default_branch_that_is_a_symbolic_alias_is_found_as_git_lists_it(tmp_path):
    """A branch can be a symbolic ref to another (`main` an alias of `master`): the record read from the ref
    files does not list it, git's `for-each-ref` does. origin's HEAD names `main`: the brief must name the
    local `main` as git's list has it, not fall back to `origin/main`."""
    from tests.fleets.gitbuild import bare_remote, clone

    remote = bare_remote(tmp_path / "remote.git")
    seed = init_repo(tmp_path / "seed", commits=2)
    git(seed, "push", "-q", str(remote), "main")
    repo = clone(remote, tmp_path / "alias")
    git(repo, "branch", "-q", "-m", "main", "master")
    git(repo, "symbolic-ref", "refs/heads/main", "refs/heads/master")
    listed = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    assert listed == ["main", "master"]
    assert git(repo, "symbolic-ref", "refs/remotes/origin/HEAD").strip() == "refs/remotes/origin/main"
    assert _brief(tmp_path, repo)["default_branch"] == "main"
