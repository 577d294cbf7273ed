"""The one hardened way fleetdeck runs git.

A monitor runs git thousands of times in repositories where people and agents are working. Every call
therefore: never takes optional locks (no `index.lock`, no index rewrite), ignores inherited `GIT_*`
variables and the user's pager/fsmonitor/external-diff settings, never prompts, runs with stdin closed in
its own process group (killed whole on timeout), and errors instead of silently truncating output.
"""

from __future__ import annotations

import os
import selectors
import signal
import time
from dataclasses import dataclass

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
STDERR_CAP = 64 * 1024

# Settings that would make git run user code, page, colour, or rewrite files behind our back.
_CONFIG = (
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.pager=",
    "diff.external=",
    "color.ui=false",
    "log.showSignature=false",
    "core.quotePath=false",
)
# The only inherited variables git gets: where it finds itself, the user's config and a temp dir. Everything
# else (GIT_*, pagers, LD_PRELOAD, credential helpers' variables...) stays out.
_KEEP_ENV = ("PATH", "HOME", "XDG_CONFIG_HOME", "TMPDIR", "USER", "LOGNAME")


class GitError(Exception):
    """A git command failed, timed out, or produced more output than allowed.

    `code` is a stable string (`GIT_FAILED`, `TIMEOUT`, `LIMIT`, `NO_GIT`) that adapters pass on as-is.
    """

    def __init__(self, code: str, message: str, *, args: list[str] | None = None,
                 returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.git_args = args or []
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: str


def _find_git() -> str:
    for candidate in ("/usr/bin/git", "/usr/local/bin/git", "/opt/homebrew/bin/git"):
        if os.access(candidate, os.X_OK):
            return candidate
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder, "git")
        if os.path.isabs(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise GitError("NO_GIT", "git is not installed or not on PATH")


_GIT: str | None = None


_ENV_CACHE: dict[tuple, dict[str, str]] = {}


def _base_env() -> dict[str, str]:
    """The hardened environment, rebuilt only when a variable git reads from outside GIT_* changes."""
    key = tuple(os.environ.get(k) for k in _KEEP_ENV)
    env = _ENV_CACHE.get(key)
    if env is None:
        _ENV_CACHE.clear()
        env = _ENV_CACHE[key] = _build_env()
    return env


def _build_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update({
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ADVICE": "0",
        "LC_ALL": "C",
        "LANG": "C",
        "NO_COLOR": "1",
    })
    return env


def git_command(cwd: str | os.PathLike[str], args: list[str]) -> list[str]:
    """The full argv for `git args` in `cwd`, with the hardening options in front."""
    global _GIT
    if _GIT is None:
        _GIT = _find_git()
    argv = [_GIT, "--no-pager", "--no-optional-locks", "--no-replace-objects"]
    for item in _CONFIG:
        argv += ["-c", item]
    argv += ["-C", os.fspath(cwd)]
    return argv + list(args)


def run_git(cwd: str | os.PathLike[str], args: list[str], *, timeout: float = DEFAULT_TIMEOUT,
            max_bytes: int = DEFAULT_MAX_BYTES, check: bool = True, input_bytes: bytes | None = None,
            ok_codes: tuple[int, ...] = (0,), extra_env: dict[str, str] | None = None) -> GitResult:
    """Run git and return its output; raise GitError on failure, timeout or an output over `max_bytes`."""
    argv = git_command(cwd, args)
    env = _base_env()
    if extra_env:
        env = {**env, **extra_env}
    try:
        child = _Child(argv, env, feed=input_bytes is not None)
    except FileNotFoundError as exc:
        raise GitError("NO_GIT", f"cannot run git: {exc}", args=args) from exc
    except OSError as exc:
        raise GitError("GIT_FAILED", f"cannot run git in {cwd}: {exc}", args=args) from exc
    out, err, problem = child.collect(timeout, max_bytes, input_bytes or b"")
    stderr = err.decode("utf-8", "replace")
    if problem == "timeout":
        raise GitError("TIMEOUT", f"git {_short(args)} timed out after {timeout:g}s", args=args)
    if problem == "limit":
        raise GitError("LIMIT", f"git {_short(args)} produced more than {max_bytes} bytes", args=args)
    if check and child.returncode not in ok_codes:
        first = stderr.strip().splitlines()[0] if stderr.strip() else f"exit status {child.returncode}"
        raise GitError("GIT_FAILED", f"git {_short(args)}: {first}", args=args,
                       returncode=child.returncode, stderr=stderr)
    return GitResult(child.returncode, out, stderr)


def git_out(cwd: str | os.PathLike[str], args: list[str], **kwargs) -> bytes:
    """stdout of a git command that must succeed."""
    return run_git(cwd, args, **kwargs).stdout


def _short(args: list[str]) -> str:
    text = " ".join(args)
    return text if len(text) <= 120 else text[:117] + "..."


class _Child:
    """git started with posix_spawn (a vfork-style spawn: a monitor runs git thousands of times, and this
    costs half of subprocess.Popen's Python time), in its own process group, stdin closed unless fed."""

    def __init__(self, argv: list[str], env: dict[str, str], feed: bool) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, self.stdin = os.pipe() if feed else (None, None)
        actions = [(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2),
                   (os.POSIX_SPAWN_DUP2, in_r, 0) if feed else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
        try:
            self.pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setpgroup=0)
        except BaseException:
            for fd in (out_r, err_r, self.stdin):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, in_r):
                if fd is not None:
                    os.close(fd)
        self.stdout, self.stderr = out_r, err_r
        self.returncode: int | None = None

    def collect(self, timeout: float, max_bytes: int, feed: bytes) -> tuple[bytes, bytes, str | None]:
        """Feed stdin and read stdout/stderr together (no pipe deadlock), enforcing the deadline and the cap."""
        deadline = time.monotonic() + timeout
        out: list[bytes] = []
        err: list[bytes] = []
        size = err_size = 0
        problem: str | None = None
        view = memoryview(feed)
        with selectors.DefaultSelector() as sel:
            sel.register(self.stdout, selectors.EVENT_READ, out)
            sel.register(self.stderr, selectors.EVENT_READ, err)
            if self.stdin is not None:
                os.set_blocking(self.stdin, False)
                sel.register(self.stdin, selectors.EVENT_WRITE)
            while sel.get_map() and problem is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    problem = "timeout"
                    break
                for key, _ in sel.select(remaining):
                    if key.fd == self.stdin:
                        try:
                            view = view[os.write(self.stdin, view[:65536]):]
                        except BrokenPipeError:
                            view = view[:0]
                        if not view:
                            sel.unregister(self.stdin)
                            os.close(self.stdin)
                            self.stdin = None
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fd)
                    elif key.data is out:
                        size += len(chunk)
                        if size > max_bytes:
                            problem = "limit"
                            break
                        out.append(chunk)
                    elif err_size < STDERR_CAP:
                        err_size += len(chunk)
                        err.append(chunk)
        if problem:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for fd in (self.stdout, self.stderr, self.stdin):
            if fd is not None:
                os.close(fd)
        self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return b"".join(out), b"".join(err), problem


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
