"""`fleetdeck dashboard link`: a fresh single-use landing link, written to the person's terminal, so what a
command's output gives back never holds it."""

from __future__ import annotations

import argparse
import contextlib
import sys

from fleet.cli.args import index_for
from fleet.cli.terminal import hint, noninteractive, terminal


def cmd_dashboard(args: argparse.Namespace) -> int:
    """A fresh single-use landing link on the running dashboard, written to the terminal (stdout only for a
    non-interactive approver); no terminal, no link, and no code is made."""
    from fleet.ops.landing import LANDING_TTL_S, fresh_link

    with contextlib.ExitStack() as stack:
        tty = None if noninteractive() else stack.enter_context(
            terminal("`fleetdeck dashboard link`", hint("")))
        with index_for(args) as index:
            line = f"{fresh_link(index)}\n(works once, within {LANDING_TTL_S // 60} minutes)\n"
        (tty or sys.stdout).write(line)
    return 0



def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="a fresh link to the running dashboard (`dashboard link`)")
    links = p.add_subparsers(dest="dashboard_action", metavar="link")
    links.required = True
    links.add_parser("link", help="write a new single-use sign-in link for the dashboard to your terminal")
    p.set_defaults(func=cmd_dashboard)
