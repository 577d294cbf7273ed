"""fleetdeck's core: discovery, git readers, the SQLite index and everything built on it.

Nothing in this package knows about HTTP or MCP; `web/` and `mcp_bridge/` are thin adapters over it.
"""

__version__ = "0.1.0"
