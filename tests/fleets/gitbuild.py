"""Build real git repositories in temp dirs with the git CLI, in every state fleetdeck must read.

Tests use `git()` (the real CLI with a fixed identity and clock) to make repos and as the oracle to check
what fleetdeck reports.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_CLOCK = [1_760_000_000]


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    _CLOCK[0] += 60
    stamp = f"@{_CLOCK[0]} +0000"
    env.update({
        "GIT_AUTHOR_NAME": "Test Person", "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test Person", "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
        "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C",
    })
    return env


def git(cwd: str | Path, *args: str, check: bool = True, input: bytes | None = None) -> str:
    """Run the real git CLI (the test oracle) and return stdout as text."""
    proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, env=git_env(),
                          input=input, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}:\n{proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "replace")


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def commit_file(repo: Path, name: str, text: str, message: str | None = None) -> str:
    write(repo / name, text)
    git(repo, "add", "--", name)
    git(repo, "commit", "-q", "-m", message or f"edit {name}")
    return git(repo, "rev-parse", "HEAD").strip()


def init_repo(path: Path, *, commits: int = 1, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    for i in range(commits):
        commit_file(path, "README.md", f"line {i}\n" * (i + 1), f"commit {i}")
    return path


def backdate(path: Path, seconds: int = 10) -> None:
    """Move the mtime of everything under `path` (its git dir too) `seconds` into the past, keeping their
    order: a change made now lands in a later whole second than anything there, as a poller comparing
    whole-second mtimes needs, without waiting out the clock."""
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(folder, name))
            os.utime(os.path.join(folder, name), ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9),
                     follow_symlinks=False)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9))


def bare_remote(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "--bare", "-b", "main")
    return path


def clone(remote: Path, path: Path) -> Path:
    git(remote.parent, "clone", "-q", str(remote), str(path))
    return path


def with_upstream(base: Path, name: str, *, ahead: int = 0, behind: int = 0) -> Path:
    """A repo tracking `origin/main` in a local bare remote, `ahead` local and `behind` remote commits apart."""
    remote = bare_remote(base / f"{name}-remote.git")
    seed = init_repo(base / f"{name}-seed", commits=1)
    git(seed, "remote", "add", "origin", str(remote))
    git(seed, "push", "-q", "-u", "origin", "main")
    repo = clone(remote, base / name)
    for i in range(behind):
        commit_file(seed, f"remote{i}.txt", f"r{i}\n")
    if behind:
        git(seed, "push", "-q", "origin", "main")
        git(repo, "fetch", "-q")
    for i in range(ahead):
        commit_file(repo, f"local{i}.txt", f"l{i}\n")
    return repo


def configure_home(home: Path) -> None:
    """Point HOME at a throwaway dir with a minimal global git config (identity, default branch)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test Person\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n"
        "[protocol \"file\"]\n\tallow = always\n"
        "[advice]\n\tdetachedHead = false\n",
        encoding="utf-8",
    )
    os.environ["HOME"] = str(home)
    os.environ.pop("GIT_CONFIG_GLOBAL", None)
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
