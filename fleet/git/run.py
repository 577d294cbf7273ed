"""The one hardened way fleetdeck runs git, and the rule it enforces.

The rule (docs/security.md, "Hostile repositories"): on a read, git runs nothing a repository defines and
writes nothing. A repository's own config is a stranger's code; the person's global and system config are
trusted. Every read therefore runs with:

- `--no-optional-locks` and `GIT_OPTIONAL_LOCKS=0`: no `index.lock`, no index rewrite (and so no
  `post-index-change` hook); callers use plumbing where porcelain would still refresh the index;
- every filter and diff driver the repository's config (or a file it includes) defines overridden with the
  trusted value or emptied (fleet/git/neutralize.py; attributes can only select drivers config defines);
  diff commands also pass `--no-ext-diff --no-textconv`;
- fixed settings: no fsmonitor, hooks looked up nowhere, no pager, no external diff, no transport at all
  (`protocol.allow=never`, `GIT_NO_LAZY_FETCH`: a partial clone's lazy fetch would run `core.sshCommand`);
- inherited `GIT_*` variables, pagers and `LD_PRELOAD` dropped; no prompt; stdin closed; its own process
  group killed whole on timeout; an output cap that errors instead of truncating.

Merge drivers cannot be emptied this way (git then runs an empty command and writes temp files in the work
tree), so `merge-tree` runs against a throwaway git dir instead (fleet/git/mergetree.py).

A run is described by a `Mode` (forced options, config, environment, whether repo drivers are overridden).
`READ` is the mode of every read; running git as a person would (hooks and filters honoured) is one more
`Mode` value, `PERSON` in fleet/ops/gitexec.py, passed explicitly by the one caller that needs it (the
executor of approved proposals).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fleet.errors import FleetError
from fleet.git.config import ConfigError
from fleet.git.neutralize import guard_for
from fleet.git.spawn import Child, GitError, GitResult, find_git

__all__ = ["GitError", "GitResult", "READ", "Mode", "run_git", "git_out", "run", "out", "text", "check_ref"]

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

_GIT: str | None = None


def git_path() -> str:
    """Which git executable every call runs (found once per process)."""
    global _GIT
    if _GIT is None:
        _GIT = find_git()
    return _GIT


_ENV_CACHE: dict[tuple, dict[str, str]] = {}


def _base_env(mode: Mode) -> dict[str, str]:
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


def run_git(cwd: str | os.PathLike[str], args: list[str], *, timeout: float = DEFAULT_TIMEOUT,
            max_bytes: int = DEFAULT_MAX_BYTES, check: bool = True, input_bytes: bytes | None = None,
            ok_codes: tuple[int, ...] = (0,), extra_env: dict[str, str] | None = None,
            mode: Mode = READ) -> GitResult:
    """Run git and return its output; raise GitError on failure, timeout or an output over `max_bytes`."""
    argv = git_command(cwd, args, mode)
    env = _base_env(mode)
    if mode.neutralize_repo:
        try:
            repo_env = guard_for(os.fspath(cwd)).env
        except (ConfigError, OSError, ValueError) as exc:     # ValueError: a NUL byte in a path it names
            raise GitError("GIT_FAILED", f"refusing to run git: {exc}", args=args) from exc
        if repo_env:
            env = {**env, **repo_env}
    if extra_env:
        env = {**env, **extra_env}
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


def git_out(cwd: str | os.PathLike[str], args: list[str], **kwargs) -> bytes:
    """stdout of a git command that must succeed."""
    return run_git(cwd, args, **kwargs).stdout


def trusted_config_listing() -> bytes:
    """`git config -z --list --includes` of the person's system and global config only (no repository).

    The two global files are listed one by one, in git's order: `git config --global` of git before 2.46
    reads only `~/.gitconfig` when it exists, though every other git command reads `$XDG_CONFIG_HOME/git/
    config` before it."""
    from fleet.git.neutralize import global_config_files

    listing = run_git(os.sep, ["config", "--system", "--includes", "-z", "--list"], ok_codes=(0, 1),
                      mode=_TRUSTED_LOOKUP).stdout
    for path in global_config_files():
        if os.path.isfile(path):
            listing += run_git(os.sep, ["config", "--file", path, "--includes", "-z", "--list"],
                               ok_codes=(0, 1), mode=_TRUSTED_LOOKUP).stdout
    return listing


# Listing the trusted config reads no repository, so it needs (and must not recurse into) no guard.
_TRUSTED_LOOKUP = Mode("trusted-lookup", READ.options, READ.config, READ.env, neutralize_repo=False)


# --- the per-repo read tools' entry points: literal pathspecs, FleetErrors --------------------------------

def run(repo: str, args: list[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
        ok_codes: tuple[int, ...] = (0,), input_bytes: bytes | None = None,
        check: bool = True) -> GitResult:
    """run_git with pathspec magic turned off (a path filter is always a literal path) and FleetErrors."""
    try:
        return run_git(repo, ["--literal-pathspecs", *args], max_bytes=max_bytes, ok_codes=ok_codes,
                       input_bytes=input_bytes, check=check)
    except GitError as exc:
        raise FleetError.from_git(exc) from exc


def out(repo: str, args: list[str], **kwargs) -> bytes:
    return run(repo, args, **kwargs).stdout


def text(data: bytes) -> str:
    """git output as text; bytes that are not UTF-8 become U+FFFD rather than failing the whole answer."""
    return data.decode("utf-8", "replace")


def _short(args: list[str]) -> str:
    joined = " ".join(args)
    return joined if len(joined) <= 120 else joined[:117] + "..."


def check_ref(value: str, field: str = "ref") -> str:
    """Refuse a ref-like argument git could read as an option (`--output=...`) or that is not a ref at all.

    Ranges `a..b` / `a...b` are checked side by side. Returns the value unchanged when it is acceptable.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field} must be a non-empty string")
    if len(value) > 4096:
        raise ValueError(f"{field} is longer than 4096 characters")
    sides = value.split("...", 1) if "..." in value else value.split("..", 1)
    for side in sides:
        if side.startswith("-"):
            raise ValueError(f"{field} must not start with '-': git would read {value!r} as an option")
        if any(ch in side for ch in ("\0", "\n", "\r")) or any(ord(ch) < 32 for ch in side):
            raise ValueError(f"{field} contains control characters")
    return value
