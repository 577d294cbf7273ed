"""Hostile repositories: on a read, git runs nothing a repository defines and writes nothing.

Each repo aims every command git could run (filters, process filters, textconv, external diff, merge drivers,
fsmonitor, hooks, ssh, gpg, pager, credential helper) at a marker folder, from its config or a file it
includes, selected by attributes from the work tree, .git/info/attributes or core.attributesFile. It is read
through the scan (with its conflict prediction), the watcher's refresh, every MCP read tool, the patch tools
and the dashboard's repo page; then no marker may exist and no file or folder under the repository (.git
included) may have changed, mtimes included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pygit2
import pytest
from starlette.testclient import TestClient

from fleet.git.revs import found_of
from fleet.git.mergetree import merge_tree
from fleet.git.run import run_git
from fleet.git.status import read_status
from fleet.index.scan import refresh_repo, scan
from fleet.index.store import open_index
from fleet.repo.changes import repo_changes
from fleet.repo import libmerge
from fleet.repo.conflicts import conflict_preflight
from fleet.repo.diffs import diff_text
from fleet.repo.record import predict_merge
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import commit_file, git, git_env, init_repo, write
from tests.fleets.hostile import (OLD, age_git_dir, diverged_pair, fired, hostile_repo, marker_command, snapshot,
                           snapshot_diff)
from tests.fleets.mcp_fleet import call, ok
from web.app import create_app

TOKEN = "hostile-token-0123456789abcdefghijklmnopqrstu"


def _age_work_tree(repo: Path) -> None:
    """Old mtimes on the work tree's folders too: a temp file created and removed there would show."""
    for top, dirs, _files in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        os.utime(top, (OLD, OLD))


def _mcp_reads(repo: Path) -> list[tuple[str, dict]]:
    name = str(repo)
    patch = ("diff --git a/data.txt b/data.txt\n--- a/data.txt\n+++ b/data.txt\n"
             "@@ -1 +1 @@\n-data changed\n+data again\n")
    return [
        ("repo.brief", {"repo": name}), ("repo.status", {"repo": name}), ("repo.changes", {"repo": name}),
        ("repo.changes", {"repo": name, "summary_only": True}),
        ("diff.text", {"repo": name}), ("diff.text", {"repo": name, "staged": True}),
        ("diff.text", {"repo": name, "base": "HEAD"}), ("diff.text", {"repo": name, "base": "origin/main"}),
        ("diff.refs", {"repo": name, "base": "origin/main"}),
        ("repo.blame", {"repo": name, "file": "shared.txt"}), ("repo.blame", {"repo": name, "file": "proc.p"}),
        ("repo.blame", {"repo": name, "file": "shared.txt", "ref": "HEAD"}),
        ("repo.conflict_preflight", {"repo": name}), ("repo.history", {"repo": name}),
        ("repo.history", {"repo": name, "path_filter": "shared.txt"}),
        ("commit.details", {"repo": name, "rev": "HEAD"}), ("repo.reflog", {"repo": name}),
        ("repo.refs", {"repo": name}), ("worktree.list", {"repo": name}), ("submodule.status", {"repo": name}),
        ("stash.list", {"repo": name}), ("conflict.read", {"repo": name}),
        ("fleet.repos", {}), ("fleet.radar", {}), ("fleet.digest", {"since": "7d"}),
        ("fleet.search", {"query": "shared"}), ("agents.presence", {}),
        ("patch.validate", {"repo": name, "patch": patch}),
        ("patch.generate", {"repo": name, "changes": [
            {"mode": "file_content", "path": "shared.txt", "new_content": "new\n"},
            {"mode": "search_replace", "path": "proc.p",
             "replacements": [{"search": "processed changed", "replace": "again"}]}]}),
    ]


CASES = [("config", "gitattributes"), ("include", "info_attributes"), ("includeif", "attributes_file"),
         ("worktree_config", "info_attributes")]


@pytest.mark.slow
@pytest.mark.parametrize(("config_in", "attributes_in"), CASES)
async def test_every_read_surface_runs_nothing_and_writes_nothing(tmp_path: Path, config_in: str,
                                                                    attributes_in: str):
    marker = tmp_path / "marker"
    root = tmp_path / "root"
    repo = hostile_repo(tmp_path, "evil", marker, root=root, config_in=config_in, attributes_in=attributes_in)
    age_git_dir(repo)
    _age_work_tree(repo)
    before = snapshot(repo)
    db = tmp_path / "fleet.db"

    index = open_index(db)
    scan(index, [str(root)])
    record = index.repo(str(repo))
    refresh_repo(index, str(repo))
    index.close()
    # both sides edit shared.txt: git's merge (the repository's driver not run); merging in theirs' parent
    # instead changes one side only, and libgit2 answers in-process (but under any `[extensions]`, git):
    # the snapshot below covers both
    pair = record["predicted_conflicts"]
    extensions = "extensions" if config_in == "worktree_config" else None
    assert libmerge.unsure(str(repo / ".git"), pair["ours"], pair["theirs"]) == extensions or "same_path"
    objects = pygit2.Repository()
    objects.set_odb(pygit2.Odb(str(repo / ".git" / "objects")))
    parent = str(objects[pair["theirs"]].parents[0].id)
    assert libmerge.unsure(str(repo / ".git"), pair["ours"], parent) == extensions
    assert predict_merge(str(repo), str(repo / ".git"), pair["ours"], parent) == {
        "clean": True, "paths": [], "ours": pair["ours"], "theirs": parent}

    server = build_server(str(db))
    answers = {}
    for tool, args in _mcp_reads(repo):
        result = await call(server, tool, args)
        answers.setdefault(tool, result)
        if tool not in ("conflict.read", "patch.validate", "patch.generate"):
            assert result.is_error is False, (tool, result.content[0].text)

    app = create_app(db, TOKEN)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        client.headers["Authorization"] = f"Bearer {TOKEN}"
        for page in (f"/repos/{record['id']}", f"/api/repos/{record['id']}", "/"):
            assert client.get(page).status_code == 200, page

    assert fired(marker) == []
    assert snapshot_diff(before, snapshot(repo)) == []
    # The answers are still git's: the repository's drivers are simply not there.
    assert record["error"] is None
    untracked = {"new.txt"} | ({".gitattributes"} if attributes_in == "gitattributes" else set())
    assert (record["staged"], record["unstaged"], record["untracked"]) == (0, 2, len(untracked))
    assert record["ahead"] == 1 and record["behind"] == 1
    assert {k: record["predicted_conflicts"][k] for k in ("clean", "paths")} == {"clean": True, "paths": []}
    assert ok(answers["repo.conflict_preflight"])["result"] == "clean"
    changed = {c["path"] for c in ok(answers["repo.changes"])["changes"]}
    assert changed == {"data.txt", "proc.p"} | untracked          # shared.txt is only stat-dirty


@pytest.mark.slow
def test_the_hostile_repo_really_runs_its_commands_in_plain_git(tmp_path: Path):
    """The builders are armed: plain git runs the clean filter, the process filter, textconv and the merge
    driver (so the test above would fail if fleetdeck let git use them)."""
    for config_in, attributes_in in CASES:
        marker = tmp_path / f"marker-{config_in}"
        repo = hostile_repo(tmp_path / config_in, "evil", marker, config_in=config_in, attributes_in=attributes_in)
        git(repo, "status", "--porcelain", check=False)
        git(repo, "diff", check=False)
        git(repo, "blame", "shared.txt", check=False)
        git(repo, "merge-tree", "--write-tree", "HEAD", "origin/main", check=False)
        ran = fired(marker)
        assert {"filter-clean", "filter-process", "textconv", "merge-driver"} <= set(ran), (config_in, ran)


def test_plain_git_diff_rewrites_the_index_and_fires_a_hook_fleetdeck_does_not(tmp_path: Path):
    marker = tmp_path / "marker"
    marker.mkdir()
    repo = init_repo(tmp_path / "r", commits=2)
    hook = repo / ".git" / "hooks" / "post-index-change"
    write(hook, f"#!/bin/sh\n{marker_command(marker, 'post-index-change', 'true')}\n")
    hook.chmod(0o755)
    os.utime(repo / "README.md", (OLD, OLD))                      # stat-dirty, same content
    write(repo / "new.txt", "x\n")
    age_git_dir(repo)
    before = snapshot(repo)
    changes = repo_changes(found_of(str(repo)))
    text = diff_text(found_of(str(repo)))
    assert snapshot_diff(before, snapshot(repo)) == [] and fired(marker) == []
    assert [c["path"] for c in changes["changes"]] == ["new.txt"] and text["patch"] == ""
    assert git(repo, "--no-optional-locks", "diff") == ""            # the oracle agrees ...
    assert fired(marker) == ["post-index-change"]                      # ... but rewrote the index to say so
    assert snapshot_diff(before, snapshot(repo)) != []


@pytest.mark.parametrize("packed", [False, True])
def test_merge_tree_freshens_no_object(tmp_path: Path, packed: bool):
    """Both sides made the same change: the merged tree already exists, and git would freshen it (utime the
    loose object, or the whole pack). The scan's prediction and the preflight must not."""
    repo, seed = diverged_pair(tmp_path, "same")
    # Make the result equal to an existing tree: the local side also takes upstream's edit.
    upstream_text = git(seed, "show", "HEAD:shared.txt")
    local_text = git(repo, "show", "HEAD:shared.txt")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    commit_file(repo, "shared.txt", upstream_text, "same edit as upstream")
    commit_file(repo, "other.txt", "x\n", "another")
    git(repo, "branch", "-q", "both")
    commit_file(repo, "other.txt", "y\n", "and back")
    assert local_text != upstream_text
    if packed:
        git(repo, "repack", "-adq")
        assert not any(len(d) == 2 for d in os.listdir(repo / ".git" / "objects"))
    age_git_dir(repo)
    before = snapshot(repo)

    result = conflict_preflight(found_of(str(repo)), target="origin/main")
    assert result["result"] == "clean"
    common = str(repo / ".git")
    merge_tree(str(repo), common, ["--name-only", "-z", "--no-messages", "HEAD", "origin/main"])
    merge_tree(str(repo), common, ["--name-only", "-z", "both", "HEAD"])
    assert snapshot_diff(before, snapshot(repo)) == []

    # The oracle: the same merge through an alternate object directory does freshen an existing object.
    with tempfile.TemporaryDirectory() as scratch:
        env = {**git_env(), "GIT_OBJECT_DIRECTORY": scratch,
               "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(repo / ".git" / "objects")}
        proc = subprocess.run(["git", "-C", str(repo), "merge-tree", "--write-tree", "HEAD", "origin/main"],
                              env=env, capture_output=True, check=False)
        assert proc.returncode == 0
    changed = snapshot_diff(before, snapshot(repo))
    assert changed and all(".git/objects/" in line for line in changed), changed


def test_merge_tree_reads_objects_from_alternates_and_sha256(tmp_path: Path):
    repo, _ = diverged_pair(tmp_path, "alt")
    shared = tmp_path / "shared-clone"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(shared))
    git(shared, "remote", "add", "up", str(repo))
    git(shared, "fetch", "-q", "up")
    commit_file(shared, "data.txt", "mine\n", "mine")
    res = merge_tree(str(shared), str(shared / ".git"), ["--name-only", "-z", "HEAD", "up/main"])
    oracle = git(shared, "merge-tree", "--write-tree", "HEAD", "up/main").split()[0]
    assert res.returncode == 0 and res.stdout.split(b"\0")[0].decode() == oracle
    commit_file(shared, "later.txt", "objects that appear after the first merge\n", "later")   # new loose objects
    res = merge_tree(str(shared), str(shared / ".git"), ["--name-only", "-z", "HEAD", "up/main"])
    oracle = git(shared, "merge-tree", "--write-tree", "HEAD", "up/main").split()[0]
    assert res.returncode == 0 and res.stdout.split(b"\0")[0].decode() == oracle

    sha256 = tmp_path / "s256"
    sha256.mkdir()
    git(sha256, "init", "-q", "--object-format=sha256", "-b", "main")
    commit_file(sha256, "a.txt", "a\n", "a")
    git(sha256, "checkout", "-q", "-b", "side")
    commit_file(sha256, "a.txt", "side\n", "side")
    git(sha256, "checkout", "-q", "main")
    commit_file(sha256, "b.txt", "b\n", "b")
    res = merge_tree(str(sha256), str(sha256 / ".git"), ["--name-only", "-z", "main", "side"])
    tree = res.stdout.split(b"\0")[0].decode()
    assert res.returncode == 0 and len(tree) == 64
    assert tree == git(sha256, "merge-tree", "--write-tree", "main", "side").split()[0]


def test_a_global_lfs_style_filter_stays_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """git-lfs defines its filter in the person's global config: it keeps working (status counts equal
    git's), even when the repo's own config redefines the same filter name, whose command never runs."""
    home = tmp_path / "home"
    marker = tmp_path / "marker"
    marker.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write(bin_dir / "up", "#!/bin/sh\ntr a-z A-Z\n")
    write(bin_dir / "down", "#!/bin/sh\ntr A-Z a-z\n")
    for name in ("up", "down"):
        (bin_dir / name).chmod(0o755)
    shutil.copytree(os.environ["HOME"], home, symlinks=True, dirs_exist_ok=True)
    with open(home / ".gitconfig", "a", encoding="utf-8") as fh:
        fh.write(f'[filter "lfs"]\n\tclean = {bin_dir / "up"}\n\tsmudge = {bin_dir / "down"}\n\trequired = true\n')
    monkeypatch.setenv("HOME", str(home))

    repo = init_repo(tmp_path / "lfs", commits=1)
    write(repo / ".gitattributes", "*.dat filter=lfs\n")
    write(repo / "big.dat", "hello lfs\n")
    write(repo / "other.dat", "second\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "lfs files")
    assert git(repo, "cat-file", "-p", "HEAD:big.dat") == "HELLO LFS\n"   # stored through the clean filter
    write(repo / "other.dat", "second changed\n")
    for name in ("big.dat", "README.md"):
        os.utime(repo / name, (OLD, OLD))                                 # stat-dirty: must be re-filtered
    oracle = git(repo, "status", "--porcelain")
    assert oracle == " M other.dat\n"

    def counts() -> tuple[int, int, int]:
        status = read_status(repo, repo / ".git")
        return status.staged, status.unstaged, status.untracked

    assert counts() == (0, 1, 0)
    # The repo's own config redefines the trusted filter: the person's commands are used, not the repo's.
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write(f'[filter "lfs"]\n\tclean = "{marker_command(marker, "repo-lfs-clean")}"\n'
                 f'\tsmudge = "{marker_command(marker, "repo-lfs-smudge")}"\n\trequired = false\n')
    os.utime(repo / "big.dat", (OLD + 5, OLD + 5))
    assert counts() == (0, 1, 0)
    changes = repo_changes(found_of(str(repo)))
    assert [c["path"] for c in changes["changes"]] == ["other.dat"]
    assert fired(marker) == []
    # A repo-set `process` the person does not define cannot be restored (an empty process also blocks
    # clean): the filter is off for the read, which still answers and still runs nothing.
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write(f'\tprocess = "{marker_command(marker, "repo-lfs-process")}"\n')
    os.utime(repo / "big.dat", (OLD + 9, OLD + 9))
    assert counts() == (0, 2, 0)
    assert fired(marker) == []


def test_a_config_git_would_refuse_is_refused_before_git_runs(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=1)
    fifo = repo / ".git" / "fifo.cfg"
    os.mkfifo(fifo)
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write("[include]\n\tpath = fifo.cfg\n")
    with pytest.raises(Exception) as err:
        run_git(repo, ["rev-parse", "HEAD"], timeout=5)
    assert "not a regular file" in str(err.value)
