"""How the executor runs git for an approved proposal: as the person would, in their repository.

The read-side runner (fleet.git.run, mode READ) strips the environment and overrides what a repository
configures, because a read must never run a stranger's code. An approved write is the person's own act:
this module's `PERSON` mode (the runner's extension point for exactly this caller) lets hooks and filters
run as git itself would run them and keeps the person's environment (ssh-agent, credential helpers,
GPG/SSH signing, identity variables). What is still removed are the variables that would point git at
another repository or index (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, ...), and git never waits for a
terminal or an editor. Spawning, the timeout (killing the process group) and the output cap are the runner's.

A run with no person behind it (an `auto` policy rule) goes through `neutralized()`: every git call of that
execution then gets the repository's code overridden (fleet/ops/repocode.py: hooks, programs) on top of the
read side's guard (filters, diff drivers), and fails closed when the repository's config cannot be read.

Inside `scratch_env(...)` (a plan's steps simulated in a scratch copy, fleet/ops/scratch.py) every call gets
that environment on top: no global or system config, a fixed identity.
"""

from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from typing import Iterator

from fleet.errors import FleetError
from fleet.git.config import ConfigError
from fleet.git.neutralize import guard_for
from fleet.git.command import DEFAULT_MAX_BYTES, Mode
from fleet.git.run import GitError, GitResult, run_git
from fleet.ops.repocode import neutral_config

EXEC_TIMEOUT = 600.0
PERSON = Mode(name="person", options=("--no-pager",), config=("color.ui=false", "core.quotePath=false"),
              env=(), neutralize_repo=False)
_NEUTRAL: ContextVar[bool] = ContextVar("fleetdeck_neutral_exec", default=False)
# Variables that redirect git to another repository, index or object store: never inherited by a write.
_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
              "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
              "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_PREFIX", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
              "GIT_CONFIG_COUNT", "GIT_QUARANTINE_PATH", "GIT_REPLACE_REF_BASE", "GIT_NO_REPLACE_OBJECTS",
              "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE", "GIT_OPTIONAL_LOCKS", "GIT_LITERAL_PATHSPECS",
              "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_TRACE",
              "GIT_NO_LAZY_FETCH")


_SCRATCH: ContextVar[tuple[str, dict[str, str]] | None] = ContextVar("fleetdeck_scratch_exec", default=None)


@contextlib.contextmanager
def scratch_env(root: str, env: dict[str, str]) -> Iterator[None]:
    """Every exec_git inside gets `env` last (it wins over the person's environment and `extra_env`), and
    refuses to run anywhere but under `root` (a simulation never reaches the repository it copies)."""
    token = _SCRATCH.set((os.path.realpath(root), env))
    try:
        yield
    finally:
        _SCRATCH.reset(token)


def person_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _REDIRECTS and not k.startswith("GIT_CONFIG_KEY_") and not k.startswith("GIT_CONFIG_VALUE_")}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true",
                "GIT_PAGER": "cat", "GIT_MERGE_AUTOEDIT": "no", "LC_ALL": "C"})
    if extra:
        env.update(extra)
    return env


@contextlib.contextmanager
def neutralized() -> Iterator[None]:
    """Every exec_git inside runs no code the repository defines (an `auto` execution)."""
    token = _NEUTRAL.set(True)
    try:
        yield
    finally:
        _NEUTRAL.reset(token)


def _neutral_env(cwd: str) -> dict[str, str]:
    """GIT_CONFIG_COUNT/KEY/VALUE: the guard's filter and diff-driver overrides, then the repository's hooks
    and programs (repocode.neutral_config). Command-scope config beats every file."""
    try:
        guard = guard_for(cwd).env
    except (ConfigError, OSError, ValueError) as exc:
        raise FleetError("GIT_FAILED", f"refusing to run git: {exc}") from exc
    count = int(guard.get("GIT_CONFIG_COUNT", "0"))
    pairs = [(guard[f"GIT_CONFIG_KEY_{i}"], guard[f"GIT_CONFIG_VALUE_{i}"]) for i in range(count)]
    pairs += neutral_config(cwd)
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def exec_git(cwd: str, args: list[str], *, timeout: float = EXEC_TIMEOUT, check: bool = True,
             input_bytes: bytes | None = None, extra_env: dict[str, str] | None = None,
             max_bytes: int = DEFAULT_MAX_BYTES, literal: bool = True) -> GitResult:
    """Run `git args` in `cwd` as the person would; FleetError(GIT_FAILED/TIMEOUT/LIMIT) on failure, carrying
    git's stdout and stderr (the executor keeps a summary of both in the proposal's result).

    Paths are literal (no globs, no `:(magic)`) unless `literal` is False, which only commands taking no
    path from an agent may ask for (`stash -u` passes `:/` to its own internal clean).
    """
    scratch = _SCRATCH.get()
    if scratch is not None and os.path.commonpath([os.path.realpath(cwd), scratch[0]]) != scratch[0]:
        raise FleetError("BAD_PATH", f"a simulated step tried to run git outside its scratch copy: {cwd}")
    env = person_env({**(extra_env or {}), **(scratch[1] if scratch else {})})
    if _NEUTRAL.get():
        env.update(_neutral_env(cwd))
    if literal:
        env["GIT_LITERAL_PATHSPECS"] = "1"
    try:
        result = run_git(cwd, args, timeout=timeout, check=False, input_bytes=input_bytes, extra_env=env,
                         max_bytes=max_bytes, mode=PERSON)
    except GitError as exc:
        raise FleetError.from_git(exc) from exc
    if check and result.returncode != 0:
        first = next((ln for ln in result.stderr.strip().splitlines() if ln.strip()),
                     f"exit status {result.returncode}")
        shown = " ".join(args)
        raise FleetError("GIT_FAILED", f"git {shown if len(shown) <= 120 else shown[:117] + '...'}: {first}",
                         {"stderr": result.stderr, "stdout": result.stdout.decode("utf-8", "replace")})
    return result
