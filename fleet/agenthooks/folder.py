"""Hooks that are one executable per event in a hooks folder (Cline: `~/Documents/Cline/Hooks/<Event>`).

Cline finds a hook by its file name (the event's, no extension on macOS/Linux) and runs it while it is
executable: its Hooks tab turns a hook off by clearing the executable bit. So fleetdeck's hook for an event is
a small shell script of that name holding the hook command; an event for which the person has a file of their
own keeps theirs (never replaced, never wrapped: fleetdeck is then not installed for that event, and install
says so). Uninstall removes only files that are fleetdeck's (they carry its mark), and the folders install
created when they are left empty. What install created is kept in `installed-hooks.json` beside the index.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from fleet.errors import FleetError

MARK = "fleet.agenthooks"
MAX_SCRIPT = 64 * 1024


@dataclass(frozen=True)
class FolderHooks:
    """Where an agent looks for its per-event hook files, and what runs them only when it is switched on."""

    name: str
    folder: Callable[[Mapping[str, str]], Path]
    events: tuple[str, ...]
    note: str
    unconfirmed: str        # the agent setting that must be on, which fleetdeck cannot read


def _header(event: str, agent: str) -> bytes:
    return f"#!/bin/sh\n# fleetdeck's {event} hook for {agent}: presence (and a snapshot before a change).\n".encode()


def script(event: str, command: str, agent: str) -> bytes:
    return _header(event, agent) + (f"# `fleetdeck hooks uninstall {agent}` removes it; hooks of your own here are "
                                    f"never touched.\nexec {command}\n").encode()


def _ours(path: Path, event: str, agent: str) -> bool:
    """fleetdeck's own file: its header, and the hook command (a script of the person's that runs fleetdeck's
    hook command too is theirs)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SCRIPT)
    except OSError:
        return False
    return data.startswith(_header(event, agent)) and MARK.encode() in data


def _enabled(path: Path) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IXUSR)
    except OSError:
        return False


def survey(spec: FolderHooks, env: Mapping[str, str]) -> dict[str, list[str]]:
    """The events with fleetdeck's file (`ours`, of which `disabled` are switched off in the agent), with
    the person's own file (`kept`), and with none (`missing`)."""
    folder = spec.folder(env)
    found: dict[str, list[str]] = {"ours": [], "disabled": [], "kept": [], "missing": []}
    for event in spec.events:
        path = folder / event
        if _ours(path, event, spec.name):
            found["ours"].append(event)
            if not _enabled(path):
                found["disabled"].append(event)
        elif os.path.lexists(path):
            found["kept"].append(event)
        else:
            found["missing"].append(event)
    return found


def _kept_note(kept: list[str]) -> str:
    return (f"your own {', '.join(kept)} hook{'s' if len(kept) > 1 else ''} kept: fleetdeck is not installed "
            f"for {'those events' if len(kept) > 1 else 'that event'}") if kept else ""


def _made_folders(folder: Path) -> list[str]:
    """Create `folder` and the parents it lacks; the ones created, innermost first."""
    made = []
    probe = folder
    while not probe.exists():
        made.append(str(probe))
        probe = probe.parent
    folder.mkdir(parents=True, exist_ok=True)
    return made


def install(spec: FolderHooks, command: Callable[[str], str], state: dict, env: Mapping[str, str]) -> dict:
    """Write fleetdeck's file for each event that has none (`state` records what was made)."""
    folder = spec.folder(env)
    found = survey(spec, env)
    notes = "; ".join(n for n in (spec.note, _kept_note(found["kept"])) if n)
    out = {"agent": spec.name, "settings": str(folder), "installed": bool(found["ours"] or found["missing"]),
           "changed": bool(found["missing"]), "note": notes}
    if not found["missing"]:
        return out
    try:
        made = _made_folders(folder)
        record = state.setdefault(str(folder), {"agent": spec.name, "folders": made, "files": []})
        for event in found["missing"]:
            path = folder / event
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)   # never over a file of theirs
            with os.fdopen(fd, "wb") as fh:
                fh.write(script(event, command(event), spec.name))
            os.chmod(path, 0o755)
            record["files"].append(event)
    except OSError as exc:
        raise FleetError("BAD_ARGUMENT", f"cannot write {spec.name}'s hooks in {folder}: {exc.strerror}") from None
    return out


def uninstall(spec: FolderHooks, state: dict, env: Mapping[str, str]) -> dict:
    """Remove fleetdeck's files (only those carrying its mark), then the folders install made, if empty."""
    folder = spec.folder(env)
    found = survey(spec, env)
    for event in found["ours"]:
        try:
            (folder / event).unlink()
        except FileNotFoundError:
            pass
    record = state.pop(str(folder), None) or {}
    for made in record.get("folders", []):
        try:
            os.rmdir(made)
        except OSError:
            break                       # not empty (the person's files), or gone: the rest are its parents
    return {"agent": spec.name, "settings": str(folder), "installed": False, "changed": bool(found["ours"])}


def status(spec: FolderHooks, env: Mapping[str, str]) -> dict:
    found = survey(spec, env)
    notes = [spec.note, _kept_note(found["kept"])]
    if found["disabled"]:
        notes.append(f"switched off in {spec.name}: {', '.join(found['disabled'])}")
    return {"agent": spec.name, "settings": str(spec.folder(env)), "installed": bool(found["ours"]),
            "events": found["ours"], "note": "; ".join(n for n in notes if n) or None, "problem": None,
            "kept": found["kept"], "disabled": found["disabled"], "unconfirmed": spec.unconfirmed}
