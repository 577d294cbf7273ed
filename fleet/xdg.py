"""Folders named by environment variables: the XDG base folders and the agents' own overrides.

One rule for all of them, the XDG spec's: the variable when it holds an absolute path, else the default
under the home folder (a relative value is ignored). It places fleetdeck's own files (index, settings,
policy, the MCP tool cache) and finds the agents' session files. Git's own lookup of its global config
differs and is mirrored where git's rules are (fleet/git/neutralize.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping


def env_dir(var: str, default: str, environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """`$var` when it is an absolute path, else `home/default` (`environ`: os.environ; `home`: its $HOME)."""
    environ = os.environ if environ is None else environ
    value = environ.get(var)
    if value and os.path.isabs(value):
        return Path(value)
    if home is None:
        home = Path(environ.get("HOME") or Path.home())
    return home / default


def data_home(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    return env_dir("XDG_DATA_HOME", ".local/share", environ, home)


def config_home(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    return env_dir("XDG_CONFIG_HOME", ".config", environ, home)


def cache_home(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    return env_dir("XDG_CACHE_HOME", ".cache", environ, home)
