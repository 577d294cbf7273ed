"""The presence off switches, read from the settings file's `[presence]` section:

    [presence]
    read_agent_sessions = false   # no agent's session store, editor storage or in-repo trace is read
    record_mcp_clients = false    # MCP calls leave no presence record, and none is read back

The file and its checks are fleet/settings.py's, where the keys are declared. A missing file or key means
on (today's behaviour); a file that exists but cannot be read or parsed is an error (BAD_ARGUMENT), never
silently "on", since these switches exist to keep things private.
"""

from __future__ import annotations

from typing import Mapping, TypedDict

from fleet.errors import FleetError
from fleet.settings import load_settings, settings_path


class Switches(TypedDict):
    read_agent_sessions: bool
    record_mcp_clients: bool


def presence_switches(environ: Mapping[str, str] | None = None) -> Switches:
    """Both switches (True = on); FleetError when the settings file exists but is unreadable or malformed."""
    section = load_settings(settings_path(environ))["presence"]
    return {"read_agent_sessions": section["read_agent_sessions"],
            "record_mcp_clients": section["record_mcp_clients"]}


def switches_view(environ: Mapping[str, str] | None = None) -> dict:
    """The switches for a page that must render anyway: `{read_agent_sessions, record_mcp_clients, error}`;
    an unreadable settings file shows both as off (nothing is read or recorded then) with its `error`."""
    try:
        return {**presence_switches(environ), "error": None}
    except FleetError as exc:
        return {"read_agent_sessions": False, "record_mcp_clients": False, "error": exc.message}
