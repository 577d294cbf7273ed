"""The `[notify]` settings as notifiers. A webhook URL is a secret (anyone holding it can post to the
person's phone or channel): a settings file that holds one must be readable by its owner only, or no
notifier runs and the reason says so; a URL is only ever shown redacted (`redact`)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from fleet.errors import FleetError
from fleet.settings import load_settings, settings_path

KINDS = ("ntfy", "slack", "discord", "webhook")
INCLUDE = ("names", "counts")
_HOURS = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class Notifier:
    name: str
    kind: str
    url: str
    secret: str = ""


@dataclass(frozen=True)
class NotifyConfig:
    notifiers: tuple[Notifier, ...] = ()
    include: str = "names"
    kinds: dict[str, bool] = field(default_factory=dict)
    quiet: tuple[int, int] | None = None      # minutes of the day: start, end
    burst: int = 5
    error: str | None = None                  # why no notifier runs
    desktop: bool = False                     # native notifications from `serve` (fleet.notify.desktop)


def redact(url: str) -> str:
    """`https://ntfy.sh/…` — the scheme and host only: the path and query are the secret part."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}/…" if parts.scheme else "…"


def _quiet(text: str) -> tuple[int, int] | None:
    if not text:
        return None
    found = _HOURS.match(text.strip())
    if not found:
        raise FleetError("BAD_ARGUMENT", f"notify.quiet_hours must look like 22:00-07:00, not {text!r}")
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    return h1 * 60 + m1, h2 * 60 + m2


def load(path: Path | None = None) -> NotifyConfig:
    """The notifiers the settings name; a broken file or a readable secret gives none, with `error`."""
    path = path or settings_path()
    try:
        section = load_settings(path)["notify"]
        quiet = _quiet(section["quiet_hours"])
        if section["include"] not in INCLUDE:
            raise FleetError("BAD_ARGUMENT", f"notify.include must be one of {', '.join(INCLUDE)}")
    except FleetError as exc:
        return NotifyConfig(error=exc.message)
    found = []
    for kind in KINDS:
        url = section[kind].strip()
        if not url:
            continue
        if urlsplit(url).scheme not in ("http", "https"):
            return NotifyConfig(error=f"notify.{kind} must be an http(s) URL")
        if kind == "webhook" and not section["webhook_secret"]:
            return NotifyConfig(error="notify.webhook needs notify.webhook_secret (its HMAC key)")
        found.append(Notifier(kind, kind, url, section["webhook_secret"] if kind == "webhook" else ""))
    if found and os.stat(path).st_mode & 0o077:
        return NotifyConfig(error=f"{path} holds webhook URLs (secrets) but others may read it: chmod 600 it")
    return NotifyConfig(tuple(found), section["include"],
                        {k: section[k] for k in ("proposal", "waiting", "discarded", "conflict")},
                        quiet, section["burst"], desktop=section["desktop"])
