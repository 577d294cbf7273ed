"""Starting git as a child process: posix_spawn, its own process group, a deadline and an output cap.

This is the mechanism under the runner (fleet/git/run.py), which decides what git is allowed to do.
"""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import dataclass

from fleet.errors import FleetError

STDERR_CAP = 64 * 1024


class GitError(FleetError):
    """A git command failed, timed out, or produced more output than allowed.

    A FleetError whose `code` is `GIT_FAILED`, `TIMEOUT`, `LIMIT` or `NO_GIT` (adapters pass it on as-is) and
    whose `details` hold git's arguments, exit status and stderr.
    """

    def __init__(self, code: str, message: str, *, args: list[str] | None = None,
                 returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(code, message, {"args": args or [], "returncode": returncode, "stderr": stderr})


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
        # select.poll itself, not a selectors wrapper: git writes a large output a few KiB at a time, and
        # each wake-up costs only the poll and the read.
        poller = select.poll()
        open_fds = {self.stdout, self.stderr}
        poller.register(self.stdout, select.POLLIN)
        poller.register(self.stderr, select.POLLIN)
        if self.stdin is not None:
            os.set_blocking(self.stdin, False)
            poller.register(self.stdin, select.POLLOUT)
            open_fds.add(self.stdin)
        stdout, stdin = self.stdout, self.stdin
        while open_fds and problem is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                problem = "timeout"
                break
            for fd, _ in poller.poll(int(remaining * 1000) + 1):
                if fd == stdin:
                    try:
                        view = view[os.write(stdin, view[:65536]):]
                    except BrokenPipeError:
                        view = view[:0]
                    if not view:
                        poller.unregister(stdin)
                        open_fds.discard(stdin)
                        os.close(stdin)
                        self.stdin = stdin = None
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                elif fd == stdout:
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
