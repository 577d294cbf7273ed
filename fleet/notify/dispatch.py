"""What to send, and sending it without ever blocking anything.

`Dispatcher.tick(items)` is called with the inbox (fleet.inbox) as often as `serve` looks at it: an item is
sent once per `key` (one per item and state: a flapping agent keeps its key, fleet/presence/hooks.py), not
at all when its kind is switched off or during quiet hours; when the new items would make more than `burst`
messages within a minute, they go as one summary. Each notifier has a thread and a queue of its own: a
failing or slow webhook is retried with backoff there (BACKOFF_S) while the others and the tick go on; its
last success and error go to the status file (fleet.notify.status), an error as its kind only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from datetime import datetime
from typing import AsyncIterator, Callable

from fleet.errors import FleetError
from fleet.inbox.items import counts_stamp, inbox
from fleet.index.store import open_index
from fleet.index.wake import Bell
from fleet.notify import desktop, status
from fleet.notify.config import Notifier, NotifyConfig, load
from fleet.ops.landing import SERVE_URL
from fleet.notify.payloads import Message, for_items, request

log = logging.getLogger("fleetdeck.notify")
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
TIMEOUT_S = 10.0
WINDOW_S = 60.0
KEEP_SENT_S = 7 * 24 * 3600.0
TICK_S = 0.25


def in_quiet(quiet: tuple[int, int] | None, now: float) -> bool:
    if quiet is None:
        return False
    local = datetime.fromtimestamp(now)
    minute = local.hour * 60 + local.minute
    start, end = quiet
    return start <= minute < end if start <= end else minute >= start or minute < end


def _describe(exc: BaseException) -> str:
    """An error without the URL it came from (the URL is the secret)."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot connect ({type(exc.reason).__name__})"
    if isinstance(exc, FleetError):
        return exc.message
    return type(exc).__name__


def webhook(notifier: Notifier, include: str) -> Callable[[Message], None]:
    """A webhook's sender: one POST of the service's documented shape (fleet.notify.payloads)."""
    def send(message: Message) -> None:
        url, headers, body = request(notifier, message, include, time.time())
        post = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(post, timeout=TIMEOUT_S) as answer:
            answer.read(64 * 1024)

    return send


class Delivery:
    """One notifier's thread: sends its queue's messages in order, each retried with backoff. `wanted` is
    asked when a message is handed over (the desktop's: no dashboard tab is open)."""

    def __init__(self, name: str, send: Callable[[Message], None], db_path: str,
                 backoff: tuple[float, ...] = BACKOFF_S, wanted: Callable[[], bool] = lambda: True):
        self.name, self.send, self.db_path, self.backoff, self.wanted = name, send, db_path, backoff, wanted
        self.queue: queue.Queue[Message | None] = queue.Queue(maxsize=1000)
        self.thread = threading.Thread(target=self._run, name=f"notify-{name}", daemon=True)
        self.thread.start()

    def put(self, message: Message) -> None:
        if not self.wanted():
            return
        try:
            self.queue.put_nowait(message)
        except queue.Full:
            self._record(None, "queue full: messages dropped")

    def stop(self) -> None:
        self.queue.put(None)

    def _record(self, ok_at: float | None, error: str | None) -> None:
        status.record(self.db_path, self.name, ok_at, error)

    def _run(self) -> None:
        while True:
            message = self.queue.get()
            if message is None:
                return
            for attempt, wait in enumerate((0.0, *self.backoff)):
                time.sleep(wait)
                try:
                    self.send(message)
                    self._record(time.time(), None)
                    break
                except Exception as exc:          # recorded and retried; never raised into serve
                    error = f"{_describe(exc)} (attempt {attempt + 1} of {len(self.backoff) + 1})"
                    log.warning("notifier %s failed: %s", self.name, error)
                    self._record(None, error)


class Dispatcher:
    """Decides what each tick sends and hands it to every notifier's delivery thread."""

    def __init__(self, db_path: str, config: NotifyConfig, clock: Callable[[], float] = time.time,
                 backoff: tuple[float, ...] = BACKOFF_S, extra: tuple[Delivery, ...] = ()) -> None:
        self.db_path, self.config, self.clock = db_path, config, clock
        self.sent: dict[str, float] = dict(status.read(db_path).get("sent", {}))
        self.window: deque[float] = deque()
        self.deliveries = [Delivery(n.name, webhook(n, config.include), db_path, backoff)
                           for n in config.notifiers] + list(extra)

    def tick(self, items: list[dict], base_url: str | None) -> list[Message]:
        """Send what is new in `items`; the messages handed to the notifiers."""
        now = self.clock()
        new = [i for i in items if i["key"] not in self.sent]
        if not new:
            return []
        for item in new:
            self.sent[item["key"]] = now
        self._save(now)
        wanted = [i for i in new if self.config.kinds.get(i["kind"], True)]
        if not wanted or not self.deliveries or in_quiet(self.config.quiet, now):
            return []
        while self.window and now - self.window[0] > WINDOW_S:
            self.window.popleft()
        if len(self.window) + len(wanted) > self.config.burst:
            messages = [for_items(wanted, self.config.include, base_url)]
        else:
            messages = [for_items([i], self.config.include, base_url) for i in wanted]
        for message in messages:
            self.window.append(now)
            for delivery in self.deliveries:
                delivery.put(message)
        return messages

    def _save(self, now: float) -> None:
        kept = {k: at for k, at in self.sent.items() if now - at < KEEP_SENT_S}
        status.update(self.db_path, lambda value: value.__setitem__("sent", kept))

    def stop(self) -> None:
        for delivery in self.deliveries:
            delivery.stop()


async def _desktop(db_path: str, config: NotifyConfig, tabs_open: Callable[[], bool]) -> tuple[Delivery, ...]:
    """The desktop notifier when it is on and this machine has a notification service (recorded either way)."""
    if not config.desktop:
        return ()

    why = await asyncio.to_thread(desktop.unavailable)
    status.record(db_path, desktop.NAME, None, why)
    if why:
        log.warning("desktop notifications off: %s", why)
        return ()
    return (Delivery(desktop.NAME, desktop.Desktop().send, db_path, wanted=lambda: not tabs_open()),)


@contextlib.asynccontextmanager
async def notifying(db_path: str, interval: float = TICK_S, tabs_open: Callable[[], bool] = lambda: False,
                    bell: Bell | None = None) -> AsyncIterator[None]:
    """`serve`'s notifications: a thread that looks at the inbox when the `bell` rings (an agent's hook
    recorded something) and every `interval`, and ticks a Dispatcher whenever the inbox's stamp moved (off,
    and saying so in the log, when no notifier is configured). `tabs_open` says whether a dashboard tab is
    connected now: the desktop's notifications are for when none is."""
    config = load()
    if config.error:
        log.warning("notifications off: %s", config.error)
    extra = await _desktop(str(db_path), config, tabs_open)
    if not config.notifiers and not extra:
        yield
        return
    dispatcher = Dispatcher(str(db_path), config, extra=extra)
    stop = threading.Event()

    def loop() -> None:
        rung, looked = 0, None
        with open_index(db_path) as index:
            while not stop.is_set():
                if bell:
                    rung = bell.wait(rung, interval)
                else:
                    stop.wait(interval)
                try:
                    stamp = counts_stamp(index)
                    if stamp == looked or stop.is_set():
                        continue
                    looked = stamp
                    dispatcher.tick(inbox(index)["items"], index.meta_text(SERVE_URL))
                except Exception:             # a tick that fails is logged; the next one tries again
                    log.exception("notify tick failed")

    thread = threading.Thread(target=loop, name="notify-ticks", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        dispatcher.stop()
        thread.join(timeout=5)
