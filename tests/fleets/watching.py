"""A Watcher on its own event loop in a thread, for the watcher and re-check tests."""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from pathlib import Path

from fleet.index.store import open_index
from fleet.watch.watcher import Watcher
from tests.fleets.serving import wait_for


class RunningWatcher:
    """A Watcher on its own event loop in a thread, with short sweep intervals."""

    def __init__(self, db_path: Path, roots: list[str], **options) -> None:
        self.index = open_index(db_path)
        self.changed: list[int] = []
        self.watcher = Watcher(self.index, roots, on_change=self.changed.extend, **options)
        self.loop = asyncio.new_event_loop()
        self.stop: asyncio.Event | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        wait_for(lambda: self.stop is not None, "the event loop", 5.0)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def go() -> None:
            self.stop = asyncio.Event()
            await self.watcher.run(self.stop)

        try:
            self.loop.run_until_complete(go())
        except BaseException as exc:  # surfaced by close()
            self.error = exc

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop.set)
            self.thread.join(15)
        assert not self.thread.is_alive(), f"the watcher did not stop:\n{self._stacks()}"
        self.loop.close()
        self.index.close()
        if self.error:
            raise self.error

    def _stacks(self) -> str:
        """Where every thread of this process is (the watcher's loop and the threads it waits on), and the
        loop's pending tasks: what a watcher that does not stop is stuck in."""
        frames = sys._current_frames()
        out = [f"--- {t.name}\n" + "".join(traceback.format_stack(frames[t.ident]))
               for t in threading.enumerate() if t.ident in frames]
        try:
            tasks = [repr(task) for task in asyncio.all_tasks(self.loop)]
        except RuntimeError as exc:  # the loop's task set changed under us
            tasks = [f"(not listed: {exc})"]
        return "\n".join(out + ["--- pending tasks"] + tasks)
