"""A session D-Bus of the test's own (`dbus-daemon --session` in a temp dir), what `dbus-monitor` sees on it,
and a stand-in desktop notification service (`python -m tests.fleets.desktop_bus ADDRESS`).

The stand-in is needed because a notification cannot be sent to nobody: the library introspects the
service before it calls `Notify`, so with no owner of `org.freedesktop.Notifications` there is no call to
see. The call itself is observed by `dbus-monitor`, not by the stand-in."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.fleets.cli import PROJECT_ROOT

SERVICE = "org.freedesktop.Notifications"


def require_dbus() -> None:
    """Skip, saying why, where the D-Bus tools are absent; under CI=true that is a failure (.ci/run installs
    them)."""
    missing = [tool for tool in ("dbus-daemon", "dbus-monitor") if not shutil.which(tool)]
    if missing:
        why = f"{', '.join(missing)} not installed (Debian: apt-get install dbus-daemon dbus-bin)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


class SessionBus:
    """A private session bus: `address` for DBUS_SESSION_BUS_ADDRESS."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fd-bus-"))    # short: a socket path has at most 107 bytes
        self.proc = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address",
                                      f"--address=unix:path={self.dir}/bus"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.address = self.proc.stdout.readline().strip()
        assert self.address.startswith("unix:"), self.proc.stderr.read()
        self.children: list[subprocess.Popen] = []

    def env(self) -> dict[str, str]:
        return {"DBUS_SESSION_BUS_ADDRESS": self.address}

    def service(self) -> subprocess.Popen:
        """Start the stand-in notification service; returns once it owns the name."""
        proc = subprocess.Popen([sys.executable, "-m", "tests.fleets.desktop_bus", self.address],
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
        assert proc.stdout.readline().strip() == "ready"
        self.children.append(proc)
        return proc

    def monitor(self) -> "Monitor":
        monitor = Monitor(self.address)
        self.children.append(monitor.proc)
        return monitor

    def close(self) -> None:
        for child in [*self.children, self.proc]:
            child.terminate()
            child.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Monitor:
    """`dbus-monitor` on the bus, for `Notify` calls: each call as the lines dbus-monitor prints for it."""

    def __init__(self, address: str) -> None:
        self.proc = subprocess.Popen(["dbus-monitor", "--address", address,
                                      f"type='method_call',interface='{SERVICE}',member='Notify'"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 10            # its own NameAcquired signal: it is listening
        while not any("NameAcquired" in line or "NameLost" in line for line in self.lines):
            assert time.monotonic() < deadline, "dbus-monitor did not start"
            time.sleep(0.02)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def calls(self) -> list[str]:
        """The text of each `Notify` method call seen so far."""
        out: list[list[str]] = []
        for line in list(self.lines):
            if line.startswith(("method call ", "method return ", "signal ", "error ")):
                out.append([line])
            elif out:                               # an argument, or a string's next line
                out[-1].append(line)
        return ["\n".join(block) for block in out if block[0].startswith("method call") and "member=Notify" in block[0]]

    def wait(self, n: int, timeout: float = 10.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.calls()) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.calls()


async def _serve(address: str) -> None:
    """The stand-in: the notification spec's methods, answering as a minimal server does."""
    from dbus_fast.aio import MessageBus
    from dbus_fast.service import ServiceInterface, method, signal

    class Notifications(ServiceInterface):
        def __init__(self) -> None:
            super().__init__(SERVICE)
            self.last = 0

        @method()
        def GetCapabilities(self) -> "as":  # noqa: F821 (D-Bus signatures)
            return ["body"]

        @method()
        def GetServerInformation(self) -> "ssss":  # noqa: F821
            return ["fleetdeck-test", "fleetdeck", "1", "1.2"]

        @method()
        def Notify(self, app: "s", replaces: "u", icon: "s", summary: "s", body: "s",  # noqa: F821
                   actions: "as", hints: "a{sv}", timeout: "i") -> "u":  # noqa: F821
            self.last += 1
            return self.last

        @method()
        def CloseNotification(self, nid: "u") -> "":  # noqa: F821
            return None

        @signal()
        def NotificationClosed(self) -> "uu":  # noqa: F821
            return [0, 0]

        @signal()
        def ActionInvoked(self) -> "us":  # noqa: F821
            return [0, ""]

    bus = await MessageBus(bus_address=address).connect()
    bus.export("/org/freedesktop/Notifications", Notifications())
    await bus.request_name(SERVICE)
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1]))
