"""`fleetdeck agents add|list|revoke`: the person issues, lists and revokes agents' credentials.

`add` prints the secret once, in both forms an MCP client takes it: the environment variable for a stdio
config and the bearer header for `/mcp` over HTTP. Every issue and revocation is an audit entry.
"""

from __future__ import annotations

import argparse

from fleet.agents import credentials
from fleet.agents.credentials import ENV_VAR
from fleet.cli.args import index_for
from fleet.cli.output import emit_json, print_table


def _added_text(made: dict) -> str:
    token = made["token"]
    return (f"agent {made['name']}: credential issued. It is shown only now (fleetdeck keeps its hash only):\n"
            f"  stdio MCP config, in the server's env:   {ENV_VAR}={token}\n"
            f"  HTTP /mcp of `fleetdeck serve`, header:  Authorization: Bearer {token}\n"
            f"Policy rules with agent = \"{made['name']}\" now apply to the client holding it; revoke it with "
            f"`fleetdeck agents revoke {made['name']}`. Config snippets: docs/mcp.md.")


def cmd_agents(args: argparse.Namespace) -> int:
    from fleet import audit

    action = args.agents_action
    with index_for(args, create=action == "add") as index:
        if action == "list":
            found = credentials.list_agents(index)
            if args.json:
                emit_json({"agents": found})
            elif found:
                print_table(("agent", "created", "last used"),
                            [(a["name"], a["created_at"], a["last_used_at"] or "never") for a in found])
            else:
                print("no agent credentials: issue one with `fleetdeck agents add NAME`")
            return 0
        log = audit.setup(index.path)
        if action == "add":
            made = credentials.add(index, args.name)
            log.record("agent.added", agent=made["name"], actor="cli", decision="issued",
                       summary=f"credential issued for agent {made['name']}")
            if args.json:
                emit_json({**made, "env": {ENV_VAR: made["token"]},
                           "http_header": f"Authorization: Bearer {made['token']}"})
            else:
                print(_added_text(made))
            return 0
        gone = credentials.revoke(index, args.name)
        log.record("agent.revoked", agent=gone["name"], actor="cli", decision="revoked",
                   summary=f"credential of agent {gone['name']} revoked")
    if args.json:
        emit_json(gone)
    else:
        print(f"agent {gone['name']}: credential revoked; a client still holding it is refused from now on")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agents", help="agents' credentials: add (issue one), list, revoke")
    actions = p.add_subparsers(dest="agents_action", metavar="ACTION")
    p.set_defaults(func=cmd_agents, agents_action="list", json=False)
    a = actions.add_parser("add", help="issue a credential for agent NAME (shown once)")
    a.add_argument("name", metavar="NAME", help="1..64 of a-z 0-9 . _ - (policy rules name the agent by it)")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("list", help="agents with a credential: created, last used (never the secret)")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("revoke", help="revoke agent NAME's credential, at once")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--json", action="store_true")
