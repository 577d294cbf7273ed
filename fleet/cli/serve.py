"""`fleetdeck serve` and `fleetdeck mcp`: the composition root, the only place fleet/ imports its adapters
(lazily: the other commands never load a web or MCP framework)."""

from __future__ import annotations

import argparse
import gc

from fleet.cli.args import bounded, index_for, require_dirs
from fleet.errors import FleetError


def cmd_serve(args: argparse.Namespace) -> int:
    """Add ROOTs to the saved roots and serve the dashboard at once, from the index as it is. The watcher in
    the same process re-checks the fleet behind the first page (new repos first) and the pages fill in
    live; with `--no-watch` it re-checks once and stops, and the pages say the index is not kept fresh."""
    if args.team:
        return _serve_hub(args)
    if args.key or args.approver:
        raise FleetError("BAD_ARGUMENT", "--key and --as sign the hub dashboard's decisions: they go with --team")
    # Start-up makes long-lived objects (modules, the app) and next to no garbage: the collector, run by
    # allocation counts, walked them again and again (~30 ms of CPU, on the cores a cold start reads with).
    # Paused until the dashboard serves (`web.server.serve` turns it on), the forked workers turning it on at once.
    gc.disable()
    try:
        return _serve_local(args)
    finally:
        gc.enable()  # a start that failed before serving


def _serve_local(args: argparse.Namespace) -> int:
    from fleet.watch.coldstart import begin

    require_dirs(args.roots)
    with index_for(args, create=True) as index:
        for root in args.roots:
            index.add_root(root)
        db_path = index.path
    cold = begin(db_path)  # a never-seen fleet: its state is read while the web stack loads
    from web.server import serve

    try:
        serve(db_path, args.host, args.port, allow_remote=args.allow_remote, open_browser=args.open,
              watch=not args.no_watch, cold=cold)
    except BaseException:
        if cold is not None and not cold.taken:
            cold.abandon()
        raise
    return 0


def _serve_hub(args: argparse.Namespace) -> int:
    """`serve --team DSN`: the hub's dashboard over PostgreSQL (no watcher: the machines push); read-only
    unless `--key PEM --as NAME` name the approver who signs its decisions (checked before it serves)."""
    if args.roots or args.no_watch:
        raise FleetError("BAD_ARGUMENT", "serve --team shows the hub: it takes no ROOT and no --no-watch")
    if bool(args.key) != bool(args.approver):
        raise FleetError("BAD_ARGUMENT", "the hub dashboard signs decisions with --key PEM and --as NAME together")
    from fleet.team.decisions import Approver

    approver = Approver.load(args.approver, args.key) if args.key else None
    with index_for(args, create=True) as index:   # this machine's own index keeps the landing code, the passkeys
        db_path = index.path
    from web.server import serve_hub

    serve_hub(db_path, args.team, args.host, args.port, allow_remote=args.allow_remote, open_browser=args.open,
              approver=approver)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """MCP on stdio: stdout carries JSON-RPC only, so everything else (logs included) goes to stderr."""
    from mcp_bridge.bridge import stdio_start
    from mcp_bridge.sdk import start_up

    bridge, agent_token = stdio_start(args.db)  # every refusal before the SDK is imported
    start_up()  # before anything imports the SDK: its server half only, without the garbage collector's passes
    from mcp_bridge.server import run_stdio

    run_stdio(bridge, agent_token)
    return 0



def add_server_options(p: argparse.ArgumentParser) -> None:
    """The options `serve` and `demo` share: where the dashboard listens and whether the watcher runs."""
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=bounded(0, 65535), default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    p.add_argument("--open", action="store_true", help="open the dashboard in a browser")
    p.add_argument("--no-watch", action="store_true",
                   help="do not keep the index fresh: re-check the fleet once behind the first page, then "
                        "stop (another `fleetdeck watch` may keep it fresh)")


HUB_OPTIONS = ("team", "key", "approver")  # serve's options that serve the team hub (see add_serve_parser)


def local_only(args: argparse.Namespace) -> None:
    """Set none of serve's hub options: for a command that serves a local fleet through `cmd_serve` with a
    parser of its own (the demo), which would otherwise miss every hub option serve gains."""
    for name in HUB_OPTIONS:
        setattr(args, name, None)


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the dashboard (and watcher) on http://127.0.0.1:8765")
    p.add_argument("roots", nargs="*", metavar="ROOT",
                   help="add these roots to the saved ones (every saved root is watched and shown)")
    p.add_argument("--team", metavar="DSN",
                   help="serve the team hub's dashboard instead: every machine's rows from this PostgreSQL DSN "
                        "(a login holding fleetdeck_hub; read-only; the password from the DSN, PGPASSWORD or "
                        "~/.pgpass, never shown)")
    p.add_argument("--key", metavar="PEM", help="with --team: your Ed25519 private key (`fleetdeck audit keygen`); "
                                                "the proposal pages then approve and reject, signed with it")
    p.add_argument("--as", dest="approver", metavar="NAME", help="with --team and --key: your name, as machines log it")
    p.set_defaults(func=cmd_serve)
    add_server_options(p)


def add_mcp_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="MCP server on stdio over the same index (for coding agents)")
    p.set_defaults(func=cmd_mcp)
