"""`fleetdeck roots` and `fleetdeck watch`: the fleet's saved roots, and the watcher that keeps them fresh."""

from __future__ import annotations

import argparse
import logging

from fleet.cli.args import index_for, require_dirs
from fleet.cli.output import emit_json
from fleet.errors import FleetError
from fleet.safetext import visible


def cmd_roots(args: argparse.Namespace) -> int:
    if args.action == "add":
        require_dirs([args.path])
    with index_for(args, create=args.action == "add") as index:
        if args.action == "add":
            print(visible(index.add_root(args.path)))
        elif args.action == "remove":
            if not index.remove_root(args.path):
                raise FleetError("NOT_FOUND", f"not a saved root: {args.path}")
        else:
            roots = index.roots()
            if args.json:
                emit_json(roots)
            else:
                for root in roots:
                    print(visible(root))
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from fleet.watch.service import fleet_watcher, team_pusher

    require_dirs(args.roots)
    logging.getLogger("fleetdeck.watcher").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    with index_for(args, create=bool(args.roots)) as index:
        if not args.roots and not index.roots():
            raise FleetError("BAD_ARGUMENT", "no roots saved yet: run `fleetdeck watch PATH` or `fleetdeck roots add PATH`")
        watcher = fleet_watcher(index, args.roots or None, force_polling=args.poll)
        pusher = team_pusher(index.path)  # this machine joined a hub: what the watcher stores is pushed
        try:
            watcher.run_forever()
        finally:
            if pusher is not None:
                pusher.stop()
    return 0



def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("roots", help="list, add or remove the fleet's roots")
    p.add_argument("action", nargs="?", choices=["list", "add", "remove"], default="list")
    p.add_argument("path", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_roots)

    p = sub.add_parser("watch", help="watch the fleet and keep the index fresh (foreground; Ctrl-C stops)")
    p.add_argument("roots", nargs="*", metavar="ROOT", help="roots to watch (saved); default: the saved roots")
    p.add_argument("--poll", action="store_true", help="poll instead of using inotify")
    p.set_defaults(func=cmd_watch)
