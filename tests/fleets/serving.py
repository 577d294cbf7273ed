"""`fleetdeck serve` as a child process, for the serve tests and the browser tests."""

from __future__ import annotations

import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from tests.fleets.cli import fleetdeck_argv, fleetdeck_env

START_TIMEOUT_S = 60


class Server:
    """A `fleetdeck serve` child process; `url` is the printed access link (with its token)."""

    def __init__(self, db: Path, roots: list[Path], extra: list[str] | None = None) -> None:
        argv = fleetdeck_argv("--db", str(db), "serve", *map(str, roots), "--port", "0", *(extra or []))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=fleetdeck_env())
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if "http://" not in line:
            self.stop()
            raise AssertionError(f"serve did not start: {line!r} {self.proc.stderr.read()}")
        self.url = line.split()[-1]
        self.base = self.url.split("/?", 1)[0]
        self.token = self.url.split("token=", 1)[1]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def signal_and_wait(self, sig: int = signal.SIGTERM, timeout: float = 10) -> tuple[int, float, str]:
        """Send `sig`; returns (exit code, seconds to exit, stderr)."""
        started = time.monotonic()
        self.proc.send_signal(sig)
        _out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, time.monotonic() - started, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(check: Callable[[], object], what: str, timeout: float = 10.0) -> object:
    """Poll `check` until it returns something truthy, up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout}s: {what}")
        time.sleep(0.05)
