"""Native desktop notifications from `serve`, through desktop-notifier: on Linux the desktop's notification
service (`org.freedesktop.Notifications` on the session D-Bus), on macOS the Notification Center.

They go out only while no dashboard tab is open (an open tab shows the strip, the title badge and its own
notifications); which items, once each, bursts, quiet hours and the per-kind switches are the Dispatcher's
(fleet.notify.dispatch), as for the webhooks. `unavailable()` says why none can be shown on this machine —
no session bus, no notification service on it, a Python that macOS will not let notify — and the notifier
is then off, with that reason as its `last_error`. The library is imported only where one is wanted.
"""

from __future__ import annotations

import asyncio
import os
import platform
from functools import lru_cache

from fleet.errors import FleetError
from fleet.notify.payloads import Message

NAME = "desktop"
SERVICE = "org.freedesktop.Notifications"
PROBE_TIMEOUT_S = 3.0
SEND_TIMEOUT_S = 10.0


def target() -> str:
    """Where the notifications go, as `inbox --json` shows it."""
    return "macOS Notification Center" if platform.system() == "Darwin" else f"{SERVICE} on the session D-Bus"


async def _service_on_bus() -> bool:
    """Whether the session bus has a notification service, running or started on demand (D-Bus activation)."""
    from dbus_fast import Message as BusMessage
    from dbus_fast.aio import MessageBus

    bus = await MessageBus().connect()
    try:
        for member, found in (("NameHasOwner", lambda body: body[0]),
                              ("ListActivatableNames", lambda body: SERVICE in body[0])):
            reply = await bus.call(BusMessage(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                                              interface="org.freedesktop.DBus", member=member,
                                              signature="s" if member == "NameHasOwner" else "",
                                              body=[SERVICE] if member == "NameHasOwner" else []))
            if reply.body and found(reply.body):
                return True
        return False
    finally:
        bus.disconnect()


def unavailable() -> str | None:
    """Why no desktop notification can be shown here, or None when a service takes them. Call it where no
    event loop runs (it runs its own)."""
    system = platform.system()
    if system == "Darwin":
        from desktop_notifier.backends.dummy import DummyNotificationCenter
        from desktop_notifier.main import get_backend_class

        if get_backend_class() is DummyNotificationCenter:
            return "macOS shows notifications only from an app bundle, and this Python is not one"
        return None
    if system != "Linux":
        return f"desktop notifications are sent on Linux and macOS, not on {system}"
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS") and not os.environ.get("DISPLAY"):
        return "no session D-Bus (DBUS_SESSION_BUS_ADDRESS is not set)"
    try:
        found = asyncio.run(asyncio.wait_for(_service_on_bus(), PROBE_TIMEOUT_S))
    except Exception as exc:          # a refused connection, a bus that does not answer
        return f"cannot reach the session D-Bus ({type(exc).__name__})"
    return None if found else f"no desktop notification service ({SERVICE}) on the session D-Bus"


@lru_cache(maxsize=1)
def unavailable_here() -> str | None:
    """`unavailable()` once per process: what `inbox` shows when `serve` has not said it yet."""
    return unavailable()


class Desktop:
    """Sends one message as one native notification: title, the message's text and the item's dashboard
    URL (a path on the dashboard: never a token). Used from one delivery thread, with a loop of its own."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notifier = None

    def send(self, message: Message) -> None:
        from desktop_notifier import DesktopNotifier

        if self._notifier is None:
            self._loop = asyncio.new_event_loop()
            self._notifier = DesktopNotifier(app_name="fleetdeck", app_icon=None)
        shown: list[bool] = []
        body = message.text + (f"\n{message.url}" if message.url else "")
        try:     # the library logs a failure instead of raising it: `on_dispatched` says it was taken
            self._loop.run_until_complete(asyncio.wait_for(self._notifier.send(
                message.title, body, on_dispatched=lambda: shown.append(True)), SEND_TIMEOUT_S))
        except asyncio.TimeoutError:
            pass
        if not shown:
            self.close()          # a bus that went away: connect afresh on the next try
            raise FleetError("NOTIFY_FAILED", "the desktop notification service did not take the notification")

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
        self._loop, self._notifier = None, None
