"""`fleetdeck inbox [--json] [--wait [--timeout S]]`: what needs the person; `--wait` blocks until something
new does (for scripts and status bars), then prints it."""

from __future__ import annotations

import argparse
import time

from fleet.cli.args import index_for
from fleet.cli.output import emit_json, print_table
from fleet.inbox.items import inbox
from fleet.notify.status import notifiers
from fleet.safetext import visible

WAIT_POLL_S = 0.25


def _view(index) -> dict:
    return {**inbox(index), "notifiers": notifiers(index.path)}


def _new(index, seen: set[str], deadline: float | None) -> dict | None:
    """The inbox once it holds an item whose key is not in `seen` (None at the deadline)."""
    while deadline is None or time.monotonic() < deadline:
        view = _view(index)
        fresh = [i for i in view["items"] if i["key"] not in seen]
        if fresh:
            return {**view, "new": fresh}
        time.sleep(WAIT_POLL_S)
    return None


def cmd_inbox(args: argparse.Namespace) -> int:
    with index_for(args) as index:
        view = _view(index)
        if args.wait:
            deadline = time.monotonic() + args.timeout if args.timeout else None
            view = _new(index, {i["key"] for i in view["items"]}, deadline)
            if view is None:
                return 1
    if args.json:
        emit_json(view)
        return 0
    shown = view.get("new", view["items"])
    if not shown:
        print("Nothing needs you.")
    else:
        print_table(("kind", "repo", "agent", "since", "what", "next"), (
            (i["kind"], i["repo"], i["agent"] or "-", i["since"] or "-", i["summary"], i["action"]) for i in shown))
    for n in view["notifiers"]:
        if n["last_error"]:
            print(visible(f"notifier {n['name']} ({n['kind']}) failing: {n['last_error']}"))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inbox", help="what needs you: proposals, agents waiting, discarded work, conflicts")
    p.add_argument("--json", action="store_true")
    p.add_argument("--wait", action="store_true", help="block until something new needs you, then print it")
    p.add_argument("--timeout", type=float, default=None, help="with --wait: give up after this many seconds "
                                                              "(exit 1)")
    p.set_defaults(func=cmd_inbox)
