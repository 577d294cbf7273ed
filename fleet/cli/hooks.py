"""`fleetdeck hooks install|uninstall|status [AGENT]` and `fleetdeck hook AGENT` (what the agents run)."""

from __future__ import annotations

import argparse
import sys

from fleet.agenthooks import install as installer
from fleet.agenthooks.run import main as hook_main
from fleet.cli.output import emit_json
from fleet.index.store import default_db_path
from fleet.safetext import visible


def cmd_hooks(args: argparse.Namespace) -> int:
    db = args.db or str(default_db_path())
    if args.hooks_action == "status":
        found = installer.status(db)
        if args.json:
            emit_json(found)
            return 0
        for a in found["agents"]:
            state = f"installed ({', '.join(a['events'])})" if a["installed"] else "not installed"
            print(visible(f"{a['agent']:<12} {state:<28} {a['settings']}" + (f"  [{a['problem']}]" if a["problem"] else "")))
            for key, label in (("kept", "your own hooks kept"), ("disabled", "switched off in the agent")):
                if a.get(key):
                    print(visible(f"  {label}: {', '.join(a[key])}"))
            if a.get("unconfirmed") and a["installed"]:
                print(visible(f"  not confirmed: {a['unconfirmed']}"))
        for a in found["unsupported"]:
            print(visible(f"{a['agent']:<12} not supported: {a['why']}"))
        return 0
    agents = [args.agent] if args.agent else list(installer.NAMES)
    done = [installer.install(a, db, args.db) if args.hooks_action == "install" else installer.uninstall(a, db)
            for a in agents]
    if args.json:
        emit_json({"agents": done})
        return 0
    for d in done:
        verb = ("installed into" if d["installed"] else "removed from") if d["changed"] else \
            ("already in" if d["installed"] else "was not in")
        print(visible(f"{d['agent']}: fleetdeck {verb} {d['settings']}"))
        if d.get("note") and d["installed"]:
            print(visible(f"  note: {d['note']}"))
    return 0


def cmd_hook(args: argparse.Namespace) -> int:
    argv = [args.agent] + (["--event", args.event] if args.event else []) + (["--db", args.db] if args.db else [])
    return hook_main(argv, sys.stdin.buffer, sys.stdout, sys.stderr)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hooks", help="fleetdeck in the agents' own hooks (snapshots before their tool calls)")
    actions = p.add_subparsers(dest="hooks_action", required=True)
    for name, text in (("install", "add fleetdeck to an agent's hooks (all supported agents by default)"),
                       ("uninstall", "remove exactly what install added"),
                       ("status", "what is installed where, and which agents are not supported")):
        a = actions.add_parser(name, help=text)
        if name != "status":
            a.add_argument("agent", nargs="?", choices=sorted(installer.NAMES))
        a.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_hooks)

    p = sub.add_parser("hook", help="what an agent's hook runs: JSON on stdin, its protocol's answer on stdout")
    p.add_argument("agent", choices=sorted(installer.NAMES))
    p.add_argument("--event", help="the hook event, for an agent whose payload does not name it (Copilot CLI)")
    p.set_defaults(func=cmd_hook)
