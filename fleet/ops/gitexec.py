"""How the executor runs git for an approved proposal: as the person would, in their repository.

The read-side runner (fleet.git.run) strips the environment and disables what a repository configures,
because a read must never run a stranger's code. An approved write is the person's own act: hooks and
filters run as git itself would run them, and the person's environment stays (ssh-agent, credential
helpers, GPG/SSH signing, identity variables). What is still removed are the variables that would point
git at another repository or index (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, ...), and git never waits
for a terminal or an editor. Spawning, the timeout (killing the process group) and the output cap are the
read-side runner's own machinery.
"""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.run import DEFAULT_MAX_BYTES, GitResult, _Child, _find_git, _short

EXEC_TIMEOUT = 600.0
# Variables that redirect git to another repository, index or object store: never inherited by a write.
_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
              "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
              "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_PREFIX", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
              "GIT_CONFIG_COUNT", "GIT_QUARANTINE_PATH", "GIT_REPLACE_REF_BASE", "GIT_NO_REPLACE_OBJECTS",
              "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE", "GIT_OPTIONAL_LOCKS", "GIT_LITERAL_PATHSPECS",
              "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_TRACE")


def person_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _REDIRECTS and not k.startswith("GIT_CONFIG_KEY_") and not k.startswith("GIT_CONFIG_VALUE_")}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true",
                "GIT_PAGER": "cat", "GIT_MERGE_AUTOEDIT": "no"})
    if extra:
        env.update(extra)
    return env


def exec_git(cwd: str, args: list[str], *, timeout: float = EXEC_TIMEOUT, check: bool = True,
             input_bytes: bytes | None = None, extra_env: dict[str, str] | None = None,
             max_bytes: int = DEFAULT_MAX_BYTES, literal: bool = True) -> GitResult:
    """Run `git args` in `cwd` as the person would; FleetError(GIT_FAILED/TIMEOUT/LIMIT) on failure.

    Paths are literal (no globs, no `:(magic)`) unless `literal` is False, which only commands taking no
    path from an agent may ask for (`stash -u` passes `:/` to its own internal clean).
    """
    argv = [_find_git(), "--no-pager", "-c", "color.ui=false", "-c", "core.quotePath=false",
            "-C", cwd, *args]
    env = person_env(extra_env)
    if literal:
        env["GIT_LITERAL_PATHSPECS"] = "1"
    try:
        child = _Child(argv, env, feed=input_bytes is not None)
    except OSError as exc:
        raise FleetError("GIT_FAILED", f"cannot run git in {cwd}: {exc}") from exc
    out, err, problem = child.collect(timeout, max_bytes, input_bytes or b"")
    stderr = err.decode("utf-8", "replace")
    if problem == "timeout":
        raise FleetError("TIMEOUT", f"git {_short(args)} timed out after {timeout:g}s")
    if problem == "limit":
        raise FleetError("LIMIT", f"git {_short(args)} produced more than {max_bytes} bytes")
    if check and child.returncode != 0:
        first = next((ln for ln in stderr.strip().splitlines() if ln.strip()), f"exit status {child.returncode}")
        failed = FleetError("GIT_FAILED", f"git {_short(args)}: {first}")
        failed.stderr = stderr  # the executor keeps a summary of both in the proposal's result
        failed.stdout = out.decode("utf-8", "replace")
        raise failed
    return GitResult(child.returncode, out, stderr)
