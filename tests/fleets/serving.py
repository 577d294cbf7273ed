"""`fleetdeck serve` as a child process, for the serve tests and the browser tests, and the one way every
test signs a client in to a dashboard: a fresh landing code traded at `/session` (`sign_in`)."""

from __future__ import annotations

import re
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx

from fleet.index.store import open_index
from fleet.ops import landing
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env


def fresh_code(db: Path) -> str:
    """A landing code on the index at `db`, as `fleetdeck dashboard link` makes one."""
    with open_index(db) as index:
        return landing.issue(index)


@dataclass(frozen=True)
class Login:
    """A signed-in client's secrets: the session's CSRF token (from a page, as the page's script reads it)
    and the tab's decision key (from the exchange's body, as the landing script keeps it)."""

    origin: str
    csrf: str
    decision_key: str

    @property
    def form(self) -> dict[str, str]:
        """Headers of a form post that changes nothing in a repository (CSRF + Origin)."""
        return {"Origin": self.origin, "X-CSRF-Token": self.csrf}

    @property
    def decide(self) -> dict[str, str]:
        """Headers of a decision as the dashboard's script sends it."""
        return {**self.form, "X-Fleetdeck-Decision": self.decision_key, "Accept": "application/json"}


def sign_in(client: httpx.Client, db: Path, next_path: str = "/") -> Login:
    """Sign `client` in as the person's browser does: trade a fresh landing code for the session cookie
    (kept in the client's jar) and the decision key, then read the CSRF token from a page."""
    origin = str(client.base_url).rstrip("/")
    r = client.post("/session", json={"code": fresh_code(db), "next": next_path},
                    headers={"Origin": origin, "Accept": "application/json"})
    assert r.status_code == 200, r.text
    page = client.get("/", headers={"Accept": "text/html"}).text
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert csrf, page[:500]
    return Login(origin, csrf.group(1), r.json()["decision_key"])

START_TIMEOUT_S = 60


class Server:
    """A `fleetdeck serve` child process: `base` its address, `token` the MCP bearer token it printed, and
    `link()` a fresh dashboard link (a landing code works once)."""

    def __init__(self, db: Path, roots: list[Path], extra: list[str] | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        argv = fleetdeck_argv("--db", str(db), "serve", *map(str, roots), "--port", "0", *(extra or []))
        self.db = db
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=fleetdeck_env(), preexec_fn=preexec_fn)  # e.g. a resource limit
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        lines = [self.proc.stdout.readline()] if ready else [""]
        while lines[-1] and "Bearer " not in lines[-1]:  # printed with the link, at once
            lines.append(self.proc.stdout.readline())
        if not lines[-1]:
            self.stop()
            raise AssertionError(f"serve did not start: {lines!r} {self.proc.stderr.read()}")
        if "http://" not in lines[0]:
            self.stop()
            raise AssertionError(f"serve did not print its link first: {lines!r}")
        self.url = lines[0].split()[-1]
        self.base = self.url.split("/?", 1)[0]
        self.token = next(line for line in lines if "Bearer " in line).split("Bearer ", 1)[1].strip()
        self.printed = lines

    def link(self, path: str = "/") -> str:
        return f"{self.base}{path}?code={fresh_code(self.db)}"

    def first_page(self) -> None:
        """Open the dashboard's first page, as the person who follows the link does: serve starts its work (the
        watcher, the MCP bridge behind the re-check, the notifier) behind the first page then, instead of after
        waiting out FIRST_PAGE_GRACE_S (2 s) for a page nobody asks for."""
        assert httpx.get(self.base + "/", headers=self.auth, timeout=30).status_code == 200

    def sign_in(self, client: httpx.Client) -> Login:
        return sign_in(client, self.db)

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
