"""The MCP bridge: tool definitions over `fleet/`, nothing else."""
