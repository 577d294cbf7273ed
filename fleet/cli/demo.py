"""`fleetdeck demo`: a sample fleet in a temp dir, alive, served, and deleted on the way out."""

from __future__ import annotations

import argparse
import os
import sys

from fleet.cli.serve import add_server_options, cmd_serve, local_only
from fleet.errors import FleetError


def cmd_demo(args: argparse.Namespace) -> int:
    """Build the sample fleet, say where it and its index are, serve it alive (fleet.demolife), and on the
    way out (Ctrl-C included) delete it, unless `--keep`; on a terminal it asks first."""
    import tempfile
    import threading

    from fleet.demo import build_demo_fleet, seed_proposals
    from fleet.demolife import DemoLife, agent_env
    from fleet.index.store import open_index

    if args.db and os.path.lexists(args.db):  # one that cannot be used is refused before the fleet is built
        open_index(args.db).close()
    target = args.dir or tempfile.mkdtemp(prefix="fleetdeck-demo-")
    try:
        roots = build_demo_fleet(target)
    except FileExistsError as exc:
        raise FleetError("BAD_PATH", str(exc)) from exc
    args.roots = roots
    local_only(args)  # the demo serves its own fleet, never a hub
    if not args.db:  # never mix the demo into the person's own index
        args.db = os.path.join(target, "fleet.db")
    os.environ.update(agent_env(target))  # the demo's agents live in the demo (the detectors read these)
    seed_proposals(args.db, roots)
    if not args.policy:
        os.environ["FLEETDECK_POLICY"] = os.path.join(target, "demo-policy.toml")
    print(demo_banner(target, args.db, os.environ["FLEETDECK_POLICY"], args.keep), file=sys.stderr)
    life, stop = DemoLife(target), threading.Event()
    try:
        life.tick()
        threading.Thread(target=life.run, args=(stop,), name="demo-life", daemon=True).start()
        return cmd_serve(args)
    finally:
        stop.set()
        life.close()
        _demo_exit(target, args.keep)


def demo_banner(target: str, db: str, policy: str, keep: bool) -> str:
    """Where the demo's fleet, index, policy and agents are, and how to point other commands at them."""
    return "\n".join([
        f"fleetdeck demo: a sample fleet in {target}/fleet (roots work/ and oss/)",
        f"  index:  {db}    e.g. fleetdeck --db {db} radar",
        f"  MCP:    fleetdeck mcp --db {db}    (follows the demo's policy: {policy})",
        f"  agents: session files under {target}/agents (this process reads them as CLAUDE_CONFIG_DIR, CODEX_HOME)",
        "  on exit: " + ("the fleet is kept (--keep)" if keep else "the fleet is deleted (--keep keeps it)"),
    ])


def _demo_exit(target: str, keep: bool) -> None:
    """Delete the demo folder (asked on a terminal; an interrupted question deletes), or say it is kept."""
    import shutil

    if not keep and sys.stdin.isatty():
        try:
            answer = input(f"delete the demo fleet in {target}? [Y/n] ").strip().lower()
        except (KeyboardInterrupt, EOFError):
            answer = ""
        keep = answer in ("n", "no")
    if keep:
        print(f"fleetdeck demo: kept {target} (delete it with: rm -rf {target})", file=sys.stderr)
        return
    shutil.rmtree(target, ignore_errors=True)
    print(f"fleetdeck demo: deleted {target}", file=sys.stderr)



def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="build a sample fleet in a temp dir and serve it")
    p.add_argument("--dir", help="build the sample fleet here (an empty or new folder)")
    p.add_argument("--keep", action="store_true", help="keep the sample fleet on exit (default: delete it)")
    p.set_defaults(func=cmd_demo)
    add_server_options(p)
