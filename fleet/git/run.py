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

A run is described by a `Mode` (fleet/git/command.py: forced options, config, environment, whether repo
drivers are overridden).
`READ` is the mode of every read; running git as a person would (hooks and filters honoured) is one more
`Mode` value, `PERSON` in fleet/ops/gitexec.py, passed explicitly by the one caller that needs it (the
executor of approved proposals).
"""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.command import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, READ, Mode, base_env, execute, git_command
from fleet.git.config import ConfigError
from fleet.git.neutralize import guard_for
from fleet.git.spawn import GitError, GitResult

__all__ = ["GitError", "GitResult", "run_git", "git_out", "run", "out", "text", "check_ref"]

def run_git(cwd: str | os.PathLike[str], args: list[str], *, timeout: float = DEFAULT_TIMEOUT,
            max_bytes: int = DEFAULT_MAX_BYTES, check: bool = True, input_bytes: bytes | None = None,
            ok_codes: tuple[int, ...] = (0,), extra_env: dict[str, str] | None = None,
            mode: Mode = READ) -> GitResult:
    """Run git and return its output; raise GitError on failure, timeout or an output over `max_bytes`."""
    argv = git_command(cwd, args, mode)
    env = base_env(mode)
    if mode.neutralize_repo:
        try:
            repo_env = guard_for(os.fspath(cwd)).env
        except (ConfigError, OSError, ValueError) as exc:     # ValueError: a NUL byte in a path it names
            raise GitError("GIT_FAILED", f"refusing to run git: {exc}", args=args) from exc
        if repo_env:
            env = {**env, **repo_env}
    if extra_env:
        env = {**env, **extra_env}
    return execute(argv, env, args, cwd, timeout=timeout, max_bytes=max_bytes, check=check,
                   input_bytes=input_bytes, ok_codes=ok_codes)


def git_out(cwd: str | os.PathLike[str], args: list[str], **kwargs) -> bytes:
    """stdout of a git command that must succeed."""
    return run_git(cwd, args, **kwargs).stdout


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
