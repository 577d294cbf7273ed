"""Hostile repositories against the files fleetdeck reads itself, and against scoping.

Each vector is built with real git in a temp dir: `.git` links and `core.worktree` leading out of the root,
worktree pointers that lie, credentials in remote and submodule URLs, a symlinked HEAD, a reflog time no
clock can show, FIFOs and sparse multi-GB files where git's own files belong. Then `fleetdeck scan` (a
subprocess with a deadline and a stdin that never ends) and every per-repo MCP read tool (in-process, each
call with a deadline) must finish, keep the good repos, return nothing from outside the root and never show
a credential.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from fleet.index.store import open_index
from mcp_bridge.server import build_server
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo, write
from tests.fleets.mcp_fleet import error_of, ok
from tests.test_mcp_security import REPO_TOOLS

SECRET = "zq7SECRETxq9"     # in files, commit messages and branch names outside the root
TOKEN = "tk4CREDENTIALv8"   # in remote and submodule URLs inside the root
CALL_DEADLINE_S = 60
# Tools that show a repository's own file contents (the token below is in its .gitmodules, inside the root)
CONTENT_TOOLS = frozenset({"repo.changes", "diff.text", "diff.refs", "commit.details", "repo.blame",
                           "conflict.read"})
SCAN_DEADLINE_S = 240
HUGE = 3 << 30              # a sparse 3 GiB file costs no disk and would cost 3 GiB of memory to read whole

SCOPE_ESCAPES = ("gitfile-out", "dotgit-link", "core-wt", "wt-of-outside")
FILE_VECTORS = ("fifo-head", "fifo-packed", "fifo-config", "fifo-merge-msg", "fifo-stash", "fifo-logs",
                "gitmodules-fifo", "gitmodules-include-fifo", "gitmodules-include-stdin", "sparse-config",
                "sparse-head", "sparse-reflog", "packed-zero", "head-link", "huge-time")


def _outside_repo(path: Path) -> Path:
    repo = init_repo(path, commits=1)
    commit_file(repo, "secret.txt", f"{SECRET}\n", f"commit: {SECRET}")
    git(repo, "branch", f"branch-{SECRET}")
    return repo


def _fifo(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)


def _sparse(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(HUGE)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("hostile")
    out, root = base / "outside", base / "root"
    (out / "plain").mkdir(parents=True)
    write(out / "plain" / "secret.txt", f"{SECRET}\n")
    repos: dict[str, Path] = {}

    for name in ("good-one", "good-two"):
        repos[name] = init_repo(root / name, commits=2)

    # --- scope escapes ----------------------------------------------------------------------------------
    target = _outside_repo(out / "gitfile-target")
    repos["gitfile-out"] = gf = root / "gitfile-out"
    write(gf / "README.md", "x\n")
    write(gf / ".git", f"gitdir: {target / '.git'}\n")

    link_target = _outside_repo(out / "link-target")
    repos["dotgit-link"] = dl = root / "dotgit-link"
    dl.mkdir()
    os.symlink(link_target / ".git", dl / ".git")

    repos["core-wt"] = cw = init_repo(root / "core-wt", commits=1)
    git(cw, "config", "core.worktree", str(out / "plain"))

    owner = _outside_repo(out / "wt-owner")
    git(owner, "worktree", "add", "-q", str(root / "wt-of-outside"), "-b", "wt-branch")
    repos["wt-of-outside"] = root / "wt-of-outside"

    # a repo in the root with a linked worktree the person made outside it: listed, never readable by tools
    repos["has-outside-wt"] = hw = init_repo(root / "has-outside-wt", commits=1)
    git(hw, "worktree", "add", "-q", str(out / "wt-of-inside"), "-b", "side")
    write(out / "wt-of-inside" / "new.txt", "untracked\n")

    # a worktree pointer that names another repository's folder: its state must not be read as ours
    repos["pointer-lie"] = pl = init_repo(root / "pointer-lie", commits=1)
    git(pl, "worktree", "add", "-q", str(root / "pointer-lie-wt"), "-b", "lie")
    victim = _outside_repo(out / "victim")
    write(victim / "untracked-1.txt", "u\n")
    write(pl / ".git" / "worktrees" / "pointer-lie-wt" / "gitdir", f"{victim / '.git'}\n")

    # --- leaks ------------------------------------------------------------------------------------------
    repos["tokens"] = tk = init_repo(root / "tokens", commits=1)
    git(tk, "remote", "add", "origin", f"https://{TOKEN}@github.example/o/r.git")
    git(tk, "remote", "add", "query", f"https://host.example/r.git?access_token={TOKEN}&x=1")
    git(tk, "remote", "add", "both", f"https://user:{TOKEN}@host.example/r.git")
    git(tk, "config", "remote.both.pushurl", f"https://{TOKEN}:x-oauth-basic@host.example/r.git")
    git(tk, "remote", "add", "helper", f"persistent-https::https://{TOKEN}@host.example/r")
    write(tk / ".gitmodules", f'[submodule "lib"]\n\tpath = lib\n\turl = https://{TOKEN}@host.example/lib.git\n')

    repos["head-link"] = hl = init_repo(root / "head-link", commits=1)
    (hl / ".git" / "HEAD").unlink()
    os.symlink(out / "plain" / "secret.txt", hl / ".git" / "HEAD")

    # --- denial of service ------------------------------------------------------------------------------
    repos["huge-time"] = ht = init_repo(root / "huge-time", commits=2)
    sha = git(ht, "rev-parse", "HEAD").strip()
    with open(ht / ".git" / "logs" / "HEAD", "ab") as fh:
        fh.write(f"{sha} {sha} A <a@b> 12345678901234567890123 +0000\tcommit: from the far future\n".encode())

    def plain(name: str, commits: int = 1) -> Path:
        repos[name] = init_repo(root / name, commits=commits)
        return repos[name]

    _fifo(plain("fifo-head") / ".git" / "HEAD")
    fp = plain("fifo-packed")
    git(fp, "pack-refs", "--all")
    _fifo(fp / ".git" / "packed-refs")
    _fifo(plain("fifo-config") / ".git" / "config")
    fm = plain("fifo-merge-msg")
    write(fm / ".git" / "MERGE_HEAD", git(fm, "rev-parse", "HEAD"))
    _fifo(fm / ".git" / "MERGE_MSG")
    fs = plain("fifo-stash")
    write(fs / "README.md", "stash me\n")
    git(fs, "stash", "-q")
    _fifo(fs / ".git" / "logs" / "refs" / "stash")
    _fifo(plain("fifo-logs") / ".git" / "logs" / "HEAD")
    _fifo(plain("gitmodules-fifo") / ".gitmodules")
    gi = plain("gitmodules-include-fifo")
    _fifo(gi / "pipe")
    write(gi / ".gitmodules", '[include]\n\tpath = pipe\n[submodule "a"]\n\tpath = a\n\turl = ./a\n')
    write(plain("gitmodules-include-stdin") / ".gitmodules",
          '[include]\n\tpath = /dev/stdin\n[submodule "a"]\n\tpath = a\n\turl = ./a\n')
    _sparse(plain("sparse-config") / ".git" / "config")
    _sparse(plain("sparse-head") / ".git" / "HEAD")
    _sparse(plain("sparse-reflog") / ".git" / "logs" / "HEAD")
    pz = plain("packed-zero")
    git(pz, "pack-refs", "--all")
    (pz / ".git" / "packed-refs").unlink()
    os.symlink("/dev/zero", pz / ".git" / "packed-refs")

    db = base / "fleet.db"
    with subprocess.Popen(fleetdeck_argv("--db", str(db), "scan", str(root), "--json"), env=fleetdeck_env(),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:  # stdin stays open and silent: a reader that followed /dev/stdin would wait forever
            stdout, stderr = proc.communicate(timeout=SCAN_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("fleetdeck scan hung on a hostile repository")
    assert proc.returncode in (0, 1), stderr.decode()
    return {"repos": repos, "root": root, "out": out, "db": db, "summary": json.loads(stdout),
            "scan_stderr": stderr.decode()}


def _records(world) -> dict[str, dict]:
    with open_index(world["db"]) as index:
        return {Path(r["path"]).name: index.repo(r["path"]) for r in index.repos()}


def _db_bytes(world) -> bytes:
    db = world["db"]
    return b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))


@pytest.mark.slow
def test_scan_finishes_and_keeps_the_good_repos(world):
    records = _records(world)
    for name in ("good-one", "good-two", "tokens", "huge-time", "has-outside-wt", "pointer-lie"):
        rec = records[name]
        assert rec["error"] is None, (name, rec["error"])
        assert rec["head"] == git(world["repos"][name], "rev-parse", "HEAD").strip()
    assert "Traceback" not in world["scan_stderr"]


def test_every_bad_file_is_that_repos_error(world):
    records = _records(world)
    expect = {
        "fifo-head": "HEAD is not a regular file", "fifo-packed": "packed-refs is not a regular file",
        "fifo-config": "config is not a regular file",
        "fifo-stash": "reflog is not a regular file", "sparse-config": "config is larger than",
        "sparse-head": "HEAD is larger than", "packed-zero": "packed-refs is a symbolic link",
        "head-link": "HEAD is a symbolic link",
    }
    for name, words in expect.items():
        assert words in (records[name]["error"] or ""), (name, records[name]["error"])
    for name in ("fifo-logs", "sparse-reflog", "gitmodules-include-fifo", "gitmodules-include-stdin",
                 "fifo-merge-msg"):
        assert records[name]["error"] is None, (name, records[name]["error"])
        assert records[name]["head"] == git(world["repos"][name], "rev-parse", "HEAD").strip()
    merge = records["fifo-merge-msg"]  # the merge is seen; its message, a FIFO, is left unread
    assert merge["operation"] == "merge" and merge["operation_detail"]["message"] is None
    (row,) = records["gitmodules-fifo"]["submodules"]
    assert row["state"] == "error" and "not a regular file" in row["error"]
    for name in ("gitmodules-include-fifo", "gitmodules-include-stdin"):  # includes are not followed there
        assert [s["path"] for s in records[name]["submodules"]] == ["a"]


def test_a_reflog_time_no_clock_can_show_is_skipped(world):
    with open_index(world["db"]) as index:
        rid = index.repo(str(world["repos"]["huge-time"]))["id"]
        messages = [m for (m,) in index.conn.execute(
            "select message from reflog where repo_id = ? and ref = 'HEAD'", (rid,))]
    assert len(messages) == 2 and not any("far future" in m for m in messages)


def test_scope_escapes_are_listed_but_not_read(world):
    records = _records(world)
    for name in ("gitfile-out", "wt-of-outside"):
        assert "git dir lies outside the fleet roots" in records[name]["error"]
        assert records[name]["head"] is None and records[name]["branches"] == []
    assert "core.worktree lies outside the fleet roots" in records["core-wt"]["error"]
    assert "dotgit-link" not in records  # discovery never follows a symlinked .git
    assert SECRET.encode() not in _db_bytes(world)


def test_worktrees_outside_the_root_and_lying_pointers(world):
    records = _records(world)
    (outside_wt,) = records["has-outside-wt"]["worktrees"]
    assert outside_wt["path"] == str(world["out"] / "wt-of-inside") and outside_wt["branch"] == "side"
    assert outside_wt["untracked"] == 1  # listed with its state
    (lie,) = records["pointer-lie"]["worktrees"]
    assert lie["untracked"] is None and "does not point back" in lie["error"]


def test_credentials_never_reach_the_index_or_the_cli(world):
    assert TOKEN.encode() not in _db_bytes(world)
    remotes = {r["name"]: r["url"] for r in _records(world)["tokens"]["remotes"]}
    assert remotes == {"origin": "https://***@github.example/o/r.git",
                       "query": "https://host.example/r.git?access_token=***&x=***",
                       "both": "https://***:***@host.example/r.git",
                       "helper": "persistent-https::https://***@host.example/r"}
    listing = run_cli("repos", "--json", db=world["db"], text=False)
    assert b"tokens" in listing.stdout and TOKEN.encode() not in listing.stdout


async def _call(client: Client, tool: str, args: dict):
    try:
        return await asyncio.wait_for(client.call_tool(tool, args), CALL_DEADLINE_S)
    except asyncio.TimeoutError:
        pytest.fail(f"{tool} hung on {args.get('repo')}")


@pytest.mark.slow
async def test_mcp_read_tools_on_every_vector(world):
    server = build_server(str(world["db"]))
    root, out = world["root"], world["out"]
    async with Client(server) as client:
        for name in (*SCOPE_ESCAPES, *FILE_VECTORS, "tokens", "has-outside-wt", "pointer-lie"):
            for tool, extra in REPO_TOOLS.items():
                result = await _call(client, tool, {"repo": str(root / name), **extra})
                text = result.content[0].text
                assert SECRET not in text, (name, tool, text[:300])
                assert TOKEN not in text or tool in CONTENT_TOOLS, (name, tool, text[:300])
                if name in SCOPE_ESCAPES:
                    assert error_of(result)[0] == "REPO_NOT_IN_FLEET", (name, tool, text[:300])
        for tool, extra in REPO_TOOLS.items():  # the outside worktree of an in-root repo: not by path
            result = await _call(client, tool, {"repo": str(out / "wt-of-inside"), **extra})
            assert error_of(result)[0] == "REPO_NOT_IN_FLEET"
        listed = ok(await _call(client, "worktree.list", {"repo": "has-outside-wt"}))
        assert [w["path"] for w in listed["worktrees"]] == [
            ln.split(" ", 1)[1] for ln in git(world["repos"]["has-outside-wt"], "worktree", "list",
                                              "--porcelain").splitlines() if ln.startswith("worktree ")]
        refs = ok(await _call(client, "repo.refs", {"repo": "tokens"}))
        both = next(r for r in refs["remotes"] if r["name"] == "both")
        assert both["push_urls"] == ["https://***:***@host.example/r.git"]
        fleet = await _call(client, "fleet.repos", {})
        assert TOKEN not in fleet.content[0].text
        # a FIFO stash log is refused before `git status --show-stash` would block on it until git's 30 s timeout
        assert error_of(await _call(client, "repo.status", {"repo": "fifo-stash"})) == \
            ("GIT_FAILED", "cannot read the status: the stash log is not a regular file")
        (main_wt,) = ok(await _call(client, "worktree.list", {"repo": "fifo-stash"}))["worktrees"]
        assert main_wt["error"] == "the stash log is not a regular file" and main_wt["untracked"] is None
        reflog = ok(await _call(client, "repo.reflog", {"repo": "huge-time"}))
        assert reflog["unreadable_lines"] == 1 and len(reflog["entries"]) == 2
        for name in ("good-one", "good-two"):
            assert ok(await _call(client, "repo.status", {"repo": name}))["head"] == \
                git(world["repos"][name], "rev-parse", "HEAD").strip()
