"""Who an agent is: per-agent credentials a person issues (`fleetdeck agents add`), and the identity every
write-side decision keys on (policy `agent =` rules, cancel rights, quotas). A client's self-declared MCP
name is recorded beside it, never trusted (docs/security.md, "Agent identity")."""
