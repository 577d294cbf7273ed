"""What each notifier last did (`notify-status.json` beside the index, 0600, written by the dispatcher in
`serve`) and which items were already sent, so a restart sends nothing twice. Errors are kept as their
kind and status only: never a URL."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Callable

from fleet.notify import desktop
from fleet.notify.config import load, redact
from fleet.timespec import iso

_LOCK = threading.Lock()


def status_path(db_path: str | os.PathLike[str]) -> Path:
    return Path(db_path).parent / "notify-status.json"


def read(db_path: str | os.PathLike[str]) -> dict:
    try:
        value = json.loads(status_path(db_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"notifiers": {}, "sent": {}}
    return value if isinstance(value, dict) else {"notifiers": {}, "sent": {}}


def update(db_path: str | os.PathLike[str], change: Callable[[dict], None]) -> None:
    """Read, change and write the status file as one step (the delivery threads and the dispatcher share it)."""
    with _LOCK:
        value = read(db_path)
        change(value)
        _write(db_path, value)


def record(db_path: str | os.PathLike[str], name: str, ok_at: float | None, error: str | None) -> None:
    """A notifier's last success (when `ok_at`) and its last error (None: it works)."""
    def change(value: dict) -> None:
        entry = value.setdefault("notifiers", {}).setdefault(name, {})
        if ok_at is not None:
            entry["last_ok_at"] = iso(ok_at)
        entry["last_error"] = error

    update(db_path, change)


def _write(db_path: str | os.PathLike[str], value: dict) -> None:
    path = status_path(db_path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".notify-status.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(value, fh, sort_keys=True)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def notifiers(db_path: str | os.PathLike[str]) -> list[dict]:
    """`[{name, kind, target, last_ok_at, last_error}]` of the configured notifiers (a settings problem is one
    row named `settings`). The desktop's row says what `serve` last found of the notification service, or,
    before `serve` ever looked, what this process finds."""
    config = load()
    if config.error:
        return [{"name": "settings", "kind": "config", "target": None, "last_ok_at": None,
                 "last_error": config.error}]
    seen = read(db_path).get("notifiers", {})
    rows = [{"name": n.name, "kind": n.kind, "target": redact(n.url),
             "last_ok_at": seen.get(n.name, {}).get("last_ok_at"),
             "last_error": seen.get(n.name, {}).get("last_error")} for n in config.notifiers]
    if config.desktop:
        entry = seen.get(desktop.NAME)
        rows.append({"name": desktop.NAME, "kind": desktop.NAME, "target": desktop.target(),
                     "last_ok_at": (entry or {}).get("last_ok_at"),
                     "last_error": entry.get("last_error") if entry else desktop.unavailable_here()})
    return rows
