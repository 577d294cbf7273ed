"""History paging, commit details, diffs between refs, patch text, reflogs and refs, against the git CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.git.revs import found_of
from fleet.repo.diffs import diff_refs, diff_text
from fleet.errors import FleetError
from fleet.repo.history import commit_details, repo_history
from fleet.repo.jsonbudget import ENVELOPE, json_size
from fleet.git.files import redact_url
from fleet.git.layout import found_at
from fleet.repo.refs import repo_reflog, repo_refs
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream, write
from tests.fleets.oracle import paged_shas
from tests.fleets.repo_states import rich_repo


def _code(fn, *args, **kwargs) -> str:
    with pytest.raises(FleetError) as info:
        fn(*args, **kwargs)
    return info.value.code


@pytest.fixture(scope="module")
def rich(tmp_path_factory) -> Path:
    return rich_repo(tmp_path_factory.mktemp("hist") / "rich")


def test_history_pages_equal_git_log(rich: Path):
    assert paged_shas(rich) == git(rich, "log", "--format=%H").split()
    assert paged_shas(rich, include_merges=False) == git(rich, "log", "--no-merges", "--format=%H").split()
    assert paged_shas(rich, path_filter="src") == git(rich, "log", "--format=%H", "--", "src").split()
    assert paged_shas(rich, ref="side") == git(rich, "log", "--format=%H", "side").split()
    first = repo_history(str(rich), limit=3)
    total = len(git(rich, "log", "--format=%H").split())
    assert first["truncated"] is True and first["has_more"] is True
    assert first["omitted_count"] is None and first["omitted_count_at_least"] == 1   # not counted by default
    counted = repo_history(str(rich), limit=3, count_omitted=True)
    assert counted["omitted_count"] == counted["omitted_count_at_least"] == total - 3
    second = repo_history(str(rich), limit=3, count_omitted=True, cursor=counted["next_cursor"])
    assert second["omitted_count"] == total - 6
    last = repo_history(str(rich), limit=200)
    assert last["has_more"] is False and last["omitted_count"] == 0 and last["omitted_count_at_least"] == 0
    merge = next(c for c in repo_history(str(rich), limit=200)["commits"] if c["is_merge"])
    assert merge["parents"] == git(rich, "rev-parse", "HEAD^1", "HEAD^2").split()
    root = repo_history(str(rich), limit=200)["commits"][-1]
    assert root["parents"] == [] and root["subject"] == "commit 0"
    stamp = int(git(rich, "log", "-1", "--format=%ct", "HEAD~2"))
    assert [c["sha"] for c in repo_history(str(rich), until=f"@{stamp}", limit=200)["commits"]] == \
        git(rich, "log", "--format=%H", f"--until=@{stamp}").split()
    assert [c["sha"] for c in repo_history(str(rich), since=f"@{stamp}", limit=200)["commits"]] == \
        git(rich, "log", "--format=%H", f"--since=@{stamp}").split()


def test_cursor_is_stable_and_bound_to_filters(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=5)
    first = repo_history(str(repo), limit=2)
    commit_file(repo, "later.txt", "new\n")            # lands between page 1 and page 2
    second = repo_history(str(repo), limit=2, cursor=first["next_cursor"])
    want = git(repo, "log", "--format=%H", "HEAD~1").split()
    assert [c["sha"] for c in first["commits"] + second["commits"]] == want[:4]
    assert _code(repo_history, str(repo), cursor=first["next_cursor"], path_filter="README.md") == "BAD_ARGUMENT"
    assert _code(repo_history, str(repo), cursor="bm9wZQ") == "BAD_ARGUMENT"
    assert _code(repo_history, str(repo), limit=0) == "BAD_ARGUMENT"
    assert _code(repo_history, str(repo), limit=201) == "BAD_ARGUMENT"
    assert _code(repo_history, str(repo), ref="nope") == "BAD_REF"
    assert _code(repo_history, str(repo), since="x\ny") == "BAD_ARGUMENT"


def test_history_of_empty_repo(tmp_path: Path):
    repo = tmp_path / "e"
    repo.mkdir()
    git(repo, "init", "-q")
    page = repo_history(str(repo))
    assert page["commits"] == [] and page["next_cursor"] is None


def test_commit_details_root_merge_and_body(rich: Path):
    root_sha = git(rich, "rev-list", "--max-parents=0", "HEAD").strip()
    root = commit_details(str(rich), root_sha)
    assert root["is_root"] and root["diff_against"] == "empty_tree"
    assert [(c["path"], c["status"]) for c in root["changes"]] == [("README.md", "added")]
    merge = commit_details(str(rich), "HEAD")
    assert merge["is_merge"] and merge["diff_against"] == "first_parent" and "first parent" in merge["note"]
    names = git(rich, "diff", "--name-status", "HEAD^1", "HEAD").split()
    assert [(c["status"][0].upper(), c["path"]) for c in merge["changes"]] == list(zip(names[::2], names[1::2]))
    body = commit_details(str(rich), "HEAD~3")
    assert body["message"] == git(rich, "log", "-1", "--format=%B", "HEAD~3").rstrip("\n")
    assert body["subject"] == "add files" and "Another body line." in body["message"]
    renamed = commit_details(str(rich), "HEAD~2", unified=0)
    main_py = next(c for c in renamed["changes"] if c["path"] == "src/main.py")
    assert main_py["old_path"] == "src/app.py" and main_py["hunks"][0]["lines"] == ["-line 5", "+LINE 5"]
    small = commit_details(str(rich), "HEAD~3", max_bytes=1024)
    assert small["file_count"] == len(git(rich, "diff-tree", "-r", "-z", "--name-only", "--no-commit-id",
                                          "HEAD~3").split("\0")[:-1])
    big = commit_details(str(rich), "HEAD~3")
    assert big["truncated"] is False
    assert _code(commit_details, str(rich), "HEAD", unified=21) == "BAD_ARGUMENT"
    assert _code(commit_details, str(rich), "no-such") == "BAD_REF"


def test_commit_details_byte_budget(tmp_path: Path):
    repo = init_repo(tmp_path / "b")
    for n in range(3):
        write(repo / f"f{n}.txt", "".join(f"{n} line {i}\n" for i in range(100)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "big")
    result = commit_details(str(repo), "HEAD", max_bytes=2000, max_files=2)
    assert json_size(result) <= 2000 + ENVELOPE
    assert result["truncated"] and result["file_count"] == 3
    assert len(result["changes"]) + result["omitted_count"] == 3 and result["omitted_count"] >= 1
    first = result["changes"][0]
    assert first["truncated"] and len(first["hunks"]) + first["omitted_count"] == 1
    hunk = first["hunks"][0]
    assert hunk["truncated"] and 0 < len(hunk["lines"]) < 100 and len(hunk["lines"]) + hunk["omitted_count"] == 100
    assert result["lines_omitted_count"] >= hunk["omitted_count"]
    roomy = commit_details(str(repo), "HEAD", max_bytes=20000)
    assert not roomy["truncated"] and all(len(c["hunks"][0]["lines"]) == 100 for c in roomy["changes"])


def test_diff_refs_ranges(rich: Path):
    two_dot = diff_refs(found_of(str(rich)), "HEAD~3..HEAD~2")
    assert two_dot["base_sha"] == git(rich, "rev-parse", "HEAD~3").strip()
    assert {c["path"] for c in two_dot["changes"]} == set(
        git(rich, "diff", "--name-only", "-z", "-M", "HEAD~3", "HEAD~2").split("\0")[:-1])
    three = diff_refs(found_of(str(rich)), "side...main")
    assert three["merge_base"] == git(rich, "merge-base", "side", "main").strip()
    assert [c["path"] for c in three["changes"]] == git(rich, "diff", "--name-only", "side...main").split()
    filtered = diff_refs(found_of(str(rich)), "HEAD~3", "HEAD", path_filter="src")
    assert [c["path"] for c in filtered["changes"]] == ["src/main.py"]
    assert diff_refs(found_of(str(rich)), "HEAD~2")["head_sha"] == git(rich, "rev-parse", "HEAD").strip()
    assert _code(diff_refs, found_of(str(rich)), "HEAD~1..HEAD", "HEAD") == "BAD_ARGUMENT"
    assert _code(diff_refs, found_of(str(rich)), "HEAD", unified=-1) == "BAD_ARGUMENT"
    assert _code(diff_refs, found_of(str(rich)), "nope..HEAD") == "BAD_REF"


def test_diff_text_modes_and_caps(tmp_path: Path):
    repo = init_repo(tmp_path / "t", commits=3)
    commit_file(repo, "many.txt", "".join(f"row {i}\n" for i in range(50)))
    write(repo / "many.txt", "".join(f"ROW {i}\n" for i in range(50)))
    git(repo, "add", "many.txt")
    write(repo / "README.md", "worktree edit\n")
    full = diff_text(found_of(str(repo)), base="HEAD~2", head="HEAD")
    oracle = git(repo, "diff", "HEAD~2", "HEAD")
    assert full["patch"] == oracle and full["truncated"] is False
    assert full["total_bytes"] == len(oracle.encode()) and full["total_lines"] == oracle.count("\n")
    assert [f["path"] for f in full["files"]] == ["README.md", "many.txt"]
    assert diff_text(found_of(str(repo)))["patch"] == git(repo, "diff")
    assert diff_text(found_of(str(repo)), staged=True)["patch"] == git(repo, "diff", "--cached")
    assert diff_text(found_of(str(repo)), base="HEAD~1")["patch"] == git(repo, "diff", "HEAD~1")
    assert diff_text(found_of(str(repo)), base="HEAD~1", staged=True)["patch"] == git(repo, "diff", "--cached", "HEAD~1")
    cut = diff_text(found_of(str(repo)), staged=True, max_bytes=500)
    whole = git(repo, "diff", "--cached")
    assert cut["truncated"] and cut["patch_truncated"] and whole.startswith(cut["patch"])
    assert cut["patch"].endswith("\n") and len(cut["patch"].encode()) <= 500
    assert cut["total_bytes"] == len(whole.encode())
    lines = diff_text(found_of(str(repo)), staged=True, max_lines=10)
    assert lines["patch"] == "".join(whole.splitlines(keepends=True)[:10]) and lines["returned_lines"] == 10
    assert _code(diff_text, found_of(str(repo)), head="HEAD") == "BAD_ARGUMENT"
    assert _code(diff_text, found_of(str(repo)), base="HEAD~1..HEAD", staged=True) == "BAD_ARGUMENT"


def test_reflog_tolerant_parsing(tmp_path: Path):
    repo = init_repo(tmp_path / "rl", commits=3)
    git(repo, "update-ref", "refs/heads/quiet", "HEAD")                 # no -m: a message-less line
    git(repo, "checkout", "-q", "-b", "feature")
    commit_file(repo, "f.txt", "f\n")
    head = repo_reflog(found_at(str(repo), str(repo)))
    assert [e["new_sha"] for e in head["entries"]] == git(repo, "reflog", "--format=%H").split()
    assert head["entries"][0]["selector"] == "HEAD@{0}" and head["entries"][0]["message"].startswith("commit")
    assert head["entries"][-1]["old_sha"] is None                         # the initial commit: zero oid
    quiet = repo_reflog(found_at(str(repo), str(repo)), ref="quiet")
    assert quiet["full_ref"] == "refs/heads/quiet" and quiet["entries"][0]["message"] == ""
    assert quiet["entries"][0]["old_sha"] is None
    log_file = repo / ".git" / "logs" / "refs" / "heads" / "quiet"
    log_file.write_bytes(log_file.read_bytes() + b"garbage line\n")
    assert repo_reflog(found_at(str(repo), str(repo)), ref="quiet")["unreadable_lines"] == 1
    capped = repo_reflog(found_at(str(repo), str(repo)), limit=2)
    assert len(capped["entries"]) == 2 and capped["omitted_count"] == head["entry_count"] - 2
    assert _code(repo_reflog, found_at(str(repo), str(repo)), ref="nope") == "NOT_FOUND"
    assert _code(repo_reflog, found_at(str(repo), str(repo)), ref="HEAD~1..HEAD") == "BAD_REF"
    assert quiet["entries"][0]["identity"] == "Test Person <test@example.com>"


def test_refs(tmp_path: Path):
    repo = with_upstream(tmp_path, "refs", ahead=1, behind=2)
    git(repo, "tag", "-a", "v1", "-m", "annotated", "HEAD~1")
    git(repo, "tag", "light", "HEAD")
    git(repo, "branch", "-q", "local-only")
    git(repo, "branch", "-q", "orphaned", "origin/main")
    git(repo, "branch", "-q", "--set-upstream-to=origin/main", "orphaned")
    git(repo, "remote", "add", "secret", "https://user:hunter2@example.com/x.git")
    write(repo / "README.md", "stash\n")
    git(repo, "stash", "-q")
    result = repo_refs(found_of(str(repo)))
    branches = {b["name"]: b for b in result["branches"]}
    assert (branches["main"]["upstream"], branches["main"]["ahead"], branches["main"]["behind"]) == \
        ("origin/main", 1, 2)
    assert branches["main"]["current"] and branches["local-only"]["upstream"] is None
    tags = {t["name"]: t for t in result["tags"]}
    assert tags["v1"]["annotated"] and tags["v1"]["target"] == git(repo, "rev-parse", "v1^{}").strip()
    assert tags["v1"]["sha"] == git(repo, "rev-parse", "v1").strip() != tags["v1"]["target"]
    assert not tags["light"]["annotated"] and tags["light"]["target"] == git(repo, "rev-parse", "HEAD").strip()
    remotes = {r["name"]: r for r in result["remotes"]}
    assert remotes["secret"]["urls"] == ["https://***:***@example.com/x.git"]
    assert "hunter2" not in str(result)
    assert [s["sha"] for s in result["stashes"]] == git(repo, "stash", "list", "--format=%H").split()
    assert result["stashes"][0]["selector"] == "stash@{0}"
    assert "origin/main" in {b["name"] for b in result["remote_branches"]}
    git(repo, "branch", "-q", "-r", "-d", "origin/main")
    gone = {b["name"]: b for b in repo_refs(found_of(str(repo)))["branches"]}
    assert gone["orphaned"]["upstream_gone"] and gone["orphaned"]["upstream"] == "origin/main"
    assert gone["orphaned"]["ahead"] is None and "gone_upstream_name" not in gone["orphaned"]
    capped = repo_refs(found_of(str(repo)), max_entries=1)
    assert capped["truncated"] and len(capped["branches"]) == 1
    assert capped["omitted_count"] == sum(n - 1 for n in capped["counts"].values() if n)
    assert redact_url("ssh://git@host/x") == "ssh://git@host/x"


def test_history_ignores_log_follow_config(rich: Path):
    git(rich, "config", "log.follow", "true")
    try:
        page = repo_history(str(rich), path_filter="src/main.py", limit=200)
        assert [c["sha"] for c in page["commits"]] == \
            git(rich, "log", "--no-follow", "--format=%H", "--", "src/main.py").split()
        assert len(git(rich, "log", "--format=%H", "--", "src/main.py").split()) > len(page["commits"])
    finally:
        git(rich, "config", "--unset", "log.follow")


def test_head_commit_from_files_agrees_with_git(tmp_path: Path):
    from fleet.git.revs import head_commit

    repo = init_repo(tmp_path / "h", commits=2)
    assert head_commit(str(repo)) == git(repo, "rev-parse", "HEAD").strip()
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert head_commit(str(repo)) == git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    assert head_commit(str(repo)) == git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--orphan", "fresh")
    assert head_commit(str(repo)) is None and repo_history(str(repo))["commits"] == []
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/../../../../outside\n")
    assert git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False) == ""   # git sees no commit there
    assert repo_history(str(repo))["commits"] == []       # git's answer, not a file read outside .git
