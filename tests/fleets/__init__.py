"""The tests' one fleet-building library: real git repos in temp dirs, and the harnesses that serve them.

gitbuild: git CLI helpers (init, commit, clone, upstreams, the test HOME's git config).
repo_states: single repos in a given state (rich history, merge/rebase/cherry-pick conflicts, diverged).
every_state: a fleet with a repo in every state the radar knows. hostile: repos whose config tries to run code.
mcp_fleet / dashboard_fleet / ops_fleet: the fleets the MCP, dashboard and ops tests index, with their helpers.
presence: agent-session fixtures. audit_log: audit ledgers. oracle: git's own answers to compare against.
serving / stdio: a real `fleetdeck serve` subprocess and a real `fleetdeck mcp` stdio session. cli: CLI argv/env.
"""
