"""The git command every run uses, and running it: which git, a `Mode`'s options, config and environment.

The rule these serve is in fleet/git/run.py, whose `run_git` adds the guard of the repository (its drivers
overridden, fleet/git/neutralize.py) before `execute`. The guard itself asks git for the person's own
config through `execute` directly: that lookup reads no repository, so it needs no guard.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fleet.git.spawn import Child, GitError, GitResult, find_git

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# The only inherited variables git gets: where it finds itself, the user's config and a temp dir. Everything
# else (GIT_*, pagers, LD_PRELOAD, credential helpers' variables...) stays out.
_KEEP_ENV = ("PATH", "HOME", "XDG_CONFIG_HOME", "TMPDIR", "USER", "LOGNAME")


@dataclass(frozen=True)
class Mode:
    """How git may behave in one run: forced settings, extra environment, and whether the repository's own
    drivers are overridden."""

    name: str
    options: tuple[str, ...]
    config: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    neutralize_repo: bool


READ = Mode(
    name="read",
    options=("--no-pager", "--no-optional-locks", "--no-replace-objects"),
    config=(
        "core.fsmonitor=false",
        "core.untrackedCache=false",
        "core.hooksPath=/dev/null",
        "core.pager=",
        "diff.external=",
        "color.ui=false",
        "log.showSignature=false",
        "core.quotePath=false",
        "protocol.allow=never",
    ),
    # GIT_FLUSH=0: `git log`, `rev-list` and the like write their output in full buffers, not flushed commit by
    # commit into the pipe (each flush a wake-up and a read here: 50 commits, ~40 of them). Reads only: the
    # person's own hooks and tools that a write runs may talk to git line by line.
    env=(("GIT_OPTIONAL_LOCKS", "0"), ("GIT_NO_LAZY_FETCH", "1"), ("GIT_FLUSH", "0")),
    neutralize_repo=True,
)
# The read side's settings without a guard of the repository's own: for git in a repository fleetdeck made
# itself (the snapshots' shadow store, merge-tree's throwaway), whose only config is fleetdeck's (nothing to
# override, and a guard built for each throwaway would be cached under a path never seen again), and for the
# trusted config's own lookup, which reads no repository and must not recurse into a guard.
UNGUARDED = Mode("unguarded", READ.options, READ.config, READ.env, neutralize_repo=False)

_GIT: str | None = None


def git_path() -> str:
    """Which git executable every call runs (found once per process)."""
    global _GIT
    if _GIT is None:
        _GIT = find_git()
    return _GIT


_ENV_CACHE: dict[tuple, dict[str, str]] = {}


def base_env(mode: Mode) -> dict[str, str]:
    """The hardened environment, rebuilt only when a variable git reads from outside GIT_* changes."""
    key = (mode.name, *(os.environ.get(k) for k in _KEEP_ENV))
    env = _ENV_CACHE.get(key)
    if env is None:
        env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
        env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_ADVICE": "0",
                    "LC_ALL": "C", "LANG": "C", "NO_COLOR": "1", **dict(mode.env)})
        if len(_ENV_CACHE) > 16:
            _ENV_CACHE.clear()
        _ENV_CACHE[key] = env
    return env


def git_command(cwd: str | os.PathLike[str], args: list[str], mode: Mode = READ) -> list[str]:
    """The full argv for `git args` in `cwd`, with the mode's options in front."""
    argv = [git_path(), *mode.options]
    for item in mode.config:
        argv += ["-c", item]
    argv += ["-C", os.fspath(cwd)]
    return argv + list(args)


def execute(argv: list[str], env: dict[str, str], args: list[str], cwd: str | os.PathLike[str], *,
            timeout: float = DEFAULT_TIMEOUT, max_bytes: int = DEFAULT_MAX_BYTES, check: bool = True,
            input_bytes: bytes | None = None, ok_codes: tuple[int, ...] = (0,)) -> GitResult:
    """Run `argv` (from git_command) with `env`; GitError on failure, timeout or an output over `max_bytes`."""
    try:
        child = Child(argv, env, feed=input_bytes is not None)
    except FileNotFoundError as exc:
        raise GitError("NO_GIT", f"cannot run git: {exc}", args=args) from exc
    except OSError as exc:
        raise GitError("GIT_FAILED", f"cannot run git in {cwd}: {exc}", args=args) from exc
    out_, err, problem = child.collect(timeout, max_bytes, input_bytes or b"")
    stderr = err.decode("utf-8", "replace")
    if problem == "timeout":
        raise GitError("TIMEOUT", f"git {_short(args)} timed out after {timeout:g}s", args=args)
    if problem == "limit":
        raise GitError("LIMIT", f"git {_short(args)} produced more than {max_bytes} bytes", args=args)
    if check and child.returncode not in ok_codes:
        first = stderr.strip().splitlines()[0] if stderr.strip() else f"exit status {child.returncode}"
        raise GitError("GIT_FAILED", f"git {_short(args)}: {first}", args=args,
                       returncode=child.returncode, stderr=stderr)
    return GitResult(child.returncode, out_, stderr)


def _short(args: list[str]) -> str:
    joined = " ".join(args)
    return joined if len(joined) <= 120 else joined[:117] + "..."
