"""Editors with built-in agents (Cursor, Windsurf, VS Code family): per-workspace storage folders.

`<config>/<App>/User/workspaceStorage/<id>/workspace.json` names the open folder (`file://` URI; remote
URIs skipped). A recent write under its `chatSessions/` is agent chat activity (`session`); otherwise a
recently written `state.vscdb` only shows the folder is open in the editor (`ide`: presence, not proof of
agent work, so it never counts as working). Config: `$XDG_CONFIG_HOME` or `~/.config`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from fleet.presence.files import mtime, read_json
from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting, path_from_uri
from fleet.presence.sqlite_ro import store_mtime
from fleet.xdg import config_home

APPS = {"Cursor": "cursor", "Windsurf": "windsurf", "Code": "vscode", "Code - Insiders": "vscode",
        "VSCodium": "vscode"}


def _newest_chat(folder: Path) -> float | None:
    try:
        entries = list(os.scandir(folder / "chatSessions"))
    except OSError:
        return None
    times = []
    for entry in entries:
        try:
            times.append(entry.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=None)


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS) -> list[Sighting]:
    config = config_home(environ, home)
    repo_map = RepoMap.of(repos)
    cutoff = now - thresholds.recent
    out = []
    for app, agent in APPS.items():
        try:
            folders = list(os.scandir(config / app / "User" / "workspaceStorage"))
        except OSError:
            continue
        for entry in folders:
            folder = Path(entry.path)
            chat = _newest_chat(folder)
            state = store_mtime(folder / "state.vscdb") or mtime(folder)
            if max(chat or 0.0, state or 0.0) < cutoff:
                continue
            doc = read_json(folder / "workspace.json", 64 * 1024)
            repo = repo_map.find(path_from_uri(doc.get("folder", ""))) if isinstance(doc, dict) else None
            if repo is None:
                continue
            if chat is not None and chat >= cutoff:
                out.append(Sighting(agent=agent, repo=repo, source="session", last_activity=min(chat, now)))
            else:
                out.append(Sighting(agent=agent, repo=repo, source="ide", last_activity=min(state, now), idle=True))
    return out
