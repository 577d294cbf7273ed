"""This machine's team settings: `[team]` in the settings file, and the hub password in a 0600 file beside it.

`team join` writes both (the section replaced in place, the rest of the file kept byte for byte); `team
leave` removes both. A settings file holding `[team]` stays the person's own: nothing else is rewritten.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from fleet.errors import FleetError
from fleet.fsio import replace_file
from fleet.settings import load_settings, settings_path
from fleet.team.rows import Share

SHARES = ("paths", "names")
MAX_PASSWORD_BYTES = 4096
SECTION = re.compile(r"(?ms)^\[team\][^\n]*\n.*?(?=^\[|\Z)")


@dataclass(frozen=True)
class TeamConfig:
    hub: str                 # the DSN without its password
    machine: str
    share: str
    push_interval_s: float
    accept_remote_approvals: bool
    approver_keys: tuple[str, ...]

    def password(self) -> str | None:
        return read_password()

    def sharing(self, prefixes: list[str]) -> Share:
        return Share.of(self.share, prefixes)


def password_path() -> Path:
    return settings_path().parent / "team-password"


def load() -> TeamConfig | None:
    """The `[team]` settings, or None when this machine has not joined a hub."""
    team = load_settings()["team"]
    if not team["hub"]:
        return None
    if team["share"] not in SHARES:
        raise FleetError("BAD_ARGUMENT", f"{settings_path()}: team.share must be one of {', '.join(SHARES)}")
    if not team["machine"]:
        raise FleetError("BAD_ARGUMENT", f"{settings_path()}: team.hub is set but team.machine is not")
    return TeamConfig(team["hub"], team["machine"], team["share"], team["push_interval_ms"] / 1000,
                      team["accept_remote_approvals"], tuple(team["approver_keys"]))


def read_password() -> str | None:
    """The hub password `join` kept, or None. Opened without following a link and checked on the open file
    itself (not a name that could be swapped between a check and the read): a regular file, the owner's only."""
    path = password_path()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FleetError("BAD_ARGUMENT", f"{path} must be a regular file readable by its owner only (chmod 600)"
                         f" ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_uid != os.getuid():
            raise FleetError("BAD_ARGUMENT", f"{path} must be a regular file readable by its owner only (chmod 600)")
        return fh.read(MAX_PASSWORD_BYTES).decode("utf-8", "replace").strip() or None


def save(hub: str, machine: str, share: str, password: str | None) -> Path:
    """Write `[team]` (replacing one already there) and the password file; returns the settings path."""
    if share not in SHARES:
        raise FleetError("BAD_ARGUMENT", f"--share must be one of {', '.join(SHARES)}, not {share!r}")
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = _without_section(path)
    section = (f"[team]\nhub = {json.dumps(hub)}\nmachine = {json.dumps(machine)}\n"
               f"share = {json.dumps(share)}\n")
    text = (kept.rstrip("\n") + "\n\n" if kept.strip() else "") + section
    _write_private(path, text, keep_mode=True)
    if password:
        _write_private(password_path(), password + "\n")
    load_settings(path)  # what was written reads back (a settings file that was already broken says so)
    return path


def forget() -> bool:
    """Remove `[team]` and the password file; whether there was anything to remove."""
    path = settings_path()
    had = False
    if path.exists():
        kept = _without_section(path)
        had = kept != path.read_text(encoding="utf-8")
        if had:
            _write_private(path, kept, keep_mode=True)
    try:
        password_path().unlink()
        had = True
    except FileNotFoundError:
        pass
    return had


def _without_section(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    return SECTION.sub("", text)


def _write_private(path: Path, text: str, keep_mode: bool = False) -> None:
    """Replace `path` atomically with `text`, 0600 (or its present mode when `keep_mode`, never wider), through a
    temp file made exclusively (fleet.fsio): nothing planted under a guessable temp name receives the text."""
    mode = 0o600
    if keep_mode and path.exists():
        mode = path.stat().st_mode & 0o600 or 0o600
    replace_file(path, text.encode("utf-8"), mode)
