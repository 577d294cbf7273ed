"""The presence off switches, read from the settings file's `[presence]` section:

    [presence]
    read_agent_sessions = false   # no agent's session store, editor storage or in-repo trace is read
    record_mcp_clients = false    # MCP calls leave no presence record, and none is read back

The file is `$FLEETDECK_SETTINGS`, else `$XDG_CONFIG_HOME/fleetdeck/settings.toml` (`~/.config/...`). A
missing file or key means on (today's behaviour); a file that exists but cannot be read or parsed is an
error (BAD_ARGUMENT), never silently "on", since these switches exist to keep things private.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Mapping, TypedDict

from fleet.errors import FleetError

MAX_SETTINGS_BYTES = 1024 * 1024


class Switches(TypedDict):
    read_agent_sessions: bool
    record_mcp_clients: bool


def settings_path(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get("FLEETDECK_SETTINGS"):
        return Path(environ["FLEETDECK_SETTINGS"])
    config = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(config) / "fleetdeck" / "settings.toml"


def presence_switches(environ: Mapping[str, str] | None = None) -> Switches:
    """Both switches (True = on); FleetError when the settings file exists but is unreadable or malformed."""
    path = settings_path(environ)
    switches: Switches = {"read_agent_sessions": True, "record_mcp_clients": True}
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return switches
    except OSError as exc:
        raise FleetError("BAD_ARGUMENT", f"cannot read settings file {path}: {exc.strerror}") from None
    if len(data) > MAX_SETTINGS_BYTES:
        raise FleetError("BAD_ARGUMENT", f"settings file {path} is larger than {MAX_SETTINGS_BYTES} bytes")
    try:
        section = tomllib.loads(data.decode("utf-8")).get("presence", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FleetError("BAD_ARGUMENT", f"settings file {path} is not valid TOML: {exc}") from None
    if not isinstance(section, dict):
        raise FleetError("BAD_ARGUMENT", f"settings file {path}: [presence] must be a table")
    for key in switches:
        if key in section:
            if not isinstance(section[key], bool):
                raise FleetError("BAD_ARGUMENT", f"settings file {path}: presence.{key} must be true or false")
            switches[key] = section[key]  # type: ignore[literal-required]
    return switches


def switches_view(environ: Mapping[str, str] | None = None) -> dict:
    """The switches for a page that must render anyway: `{read_agent_sessions, record_mcp_clients, error}`;
    an unreadable settings file shows both as off (nothing is read or recorded then) with its `error`."""
    try:
        return {**presence_switches(environ), "error": None}
    except FleetError as exc:
        return {"read_agent_sessions": False, "record_mcp_clients": False, "error": exc.message}
