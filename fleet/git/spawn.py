"""Starting git as a child process: posix_spawn, its own process group, a deadline and an output cap.

This is the mechanism under the runner (fleet/git/run.py), which decides what git is allowed to do.
"""

from __future__ import annotations

import os
import selectors
import signal
import time
from dataclasses import dataclass

STDERR_CAP = 64 * 1024


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


def find_git() -> str:
    """The git a shell would run: the first executable `git` in PATH order (absolute entries only: a relative
    one would make the choice depend on the current folder), else the usual install places."""
    folders = [f for f in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(f)]
    for folder in folders + ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"]:
        candidate = os.path.join(folder, "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise GitError("NO_GIT", "git is not installed or not on PATH")


class Child:
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
        with selectors.PollSelector() as sel:
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
