"""`fleetdeck team init|enroll|viewer|join|push --once|decide|status|leave`: team mode's hub (docs/team.md).

Exit codes as everywhere: 0 ok, 1 failure (a hub that cannot be reached is one line naming it and why, never
a password), 2 usage. The passwords `enroll` and `viewer` print are shown once (never logged); `join` keeps a
machine's in a 0600 file.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from fleet.cli.args import index_for
from fleet.cli.output import emit, emit_json, shown
from fleet.cli.terminal import NONINTERACTIVE, ask_decision
from fleet.errors import FleetError
from fleet.team import admin, config, pg
from fleet.team.decisions import decide
from fleet.team.push import push_once, status


def _joined() -> config.TeamConfig:
    found = config.load()
    if found is None:
        raise FleetError("NOT_FOUND", "this machine has not joined a hub: `fleetdeck team join DSN --machine NAME`")
    return found


def _join_password(in_dsn: str | None, from_stdin: bool) -> str | None:
    """The hub password for `join`: read from stdin (`--password-stdin`), asked for on a terminal, or the one
    in the DSN. A password on the command line is readable by every local user in the process list while
    `join` runs, so the printed join command carries none."""
    if from_stdin:
        if in_dsn:
            raise FleetError("BAD_ARGUMENT", "the DSN carries a password and --password-stdin was given: use one")
        return sys.stdin.readline(config.MAX_PASSWORD_BYTES).rstrip("\r\n") or None
    if in_dsn is None and sys.stdin.isatty():
        return getpass.getpass("hub password (empty: none, or from ~/.pgpass): ") or None
    return in_dsn


def _mirrored_text(machine: str, row: dict) -> str:
    """What the person reads before signing a decision: the machine's proposal as the hub mirrors it, shown as
    `proposals show` shows a local one (its preview whole: what the signature vouches for)."""
    from fleet.cli.proposal_text import describe
    from fleet.ops.proposals import decode

    return f"machine {machine}:\n" + describe(decode(row))


def cmd_team(args: argparse.Namespace) -> int:
    action = args.team_action
    if action == "init":
        applied = admin.init(args.dsn)
        label = pg.hub_label(args.dsn)
        emit(args, {"hub": label, "applied": applied},
             f"hub {label}: " + (f"applied {', '.join(applied)}" if applied else "schema up to date"))
    elif action == "enroll":
        made = admin.enroll(args.dsn, args.name)
        emit(args, made, f"machine {made['machine']} enrolled on {made['hub']} (role {made['role']}).\n"
                         "Its connection string, shown only now (the hub keeps only a verifier):\n"
                         f"  {made['dsn']}\n"
                         f"On that machine: fleetdeck team join '{pg.without_password(made['dsn'])[0]}' --machine "
                         f"{made['machine']} (it asks for the password; --password-stdin reads it from a pipe)")
    elif action == "viewer":
        made = admin.viewer(args.dsn, args.name)
        emit(args, made, f"viewer {made['viewer']} created on {made['hub']} (role {made['role']}): a login for the "
                         "hub's dashboard; it reads every machine's rows and writes none.\n"
                         "Its connection string, shown only now (the hub keeps only a verifier):\n"
                         f"  {made['dsn']}\n"
                         f"On the person's machine: fleetdeck serve --team '{pg.without_password(made['dsn'])[0]}' "
                         "(the password from PGPASSWORD or ~/.pgpass)")
    elif action == "join":
        dsn, password = pg.without_password(args.dsn)
        password = _join_password(password, args.password_stdin)
        admin.join_check(dsn, password, args.machine)
        path = config.save(dsn, args.machine, args.share, password)
        emit(args, {"machine": args.machine, "hub": pg.hub_label(dsn), "settings": str(path)},
             f"joined {pg.hub_label(dsn)} as {args.machine} (settings: {path}); `fleetdeck serve` and `fleetdeck "
             "watch` push from now on, `fleetdeck team push --once` pushes the backlog now")
    elif action == "push":
        joined = _joined()
        with index_for(args) as index:
            sent, settled = push_once(index, joined)
        total = sum(sent.values())
        emit(args, {"machine": joined.machine, "hub": pg.hub_label(joined.hub), "sent": sent, "decisions": settled},
             f"pushed {total:,} rows to {pg.hub_label(joined.hub)}"
             + (f" ({', '.join(f'{t} {n:,}' for t, n in sent.items())})" if sent else " (nothing new)")
             + "".join(f"\nhub decision {d['decision']} on {d['proposal_id']}: {d['outcome']}"
                       + (f" ({d['reason']})" if d["reason"] else "") for d in settled))
    elif action == "decide":
        made = decide(args.dsn, args.machine, args.proposal, args.verdict, args.approver, args.key, args.reason,
                      confirm=lambda row: ask_decision(args.verdict, row, _mirrored_text(args.machine, row),
                                                       args.yes))
        emit(args, made, f"decision {made['decision']} ({made['action']} {made['proposal_id']} on "
                         f"{made['machine']}, signed by {made['approver']} with key {made['key_id']}): stored on the "
                         "hub; the machine acts on it when it next pushes")
    elif action == "status":
        joined = config.load()
        with index_for(args) as index:
            found = status(index, joined)
        if args.json:
            emit_json(found)
        elif joined is None:
            print("not in a team: `fleetdeck team join DSN --machine NAME`")
        else:
            waiting = ", ".join(f"{t} {n:,}" for t, n in found["backlog"].items() if n) or "nothing"
            print(shown(f"machine {found['machine']} on {found['hub']}: "
                  + ("connected" if found["connected"] else "not connected")
                  + f"; last push {found['last_push_at'] or 'never'}; waiting: {waiting}"
                  + (f"\nlast error: {found['last_error']}" if found["last_error"] else "")))
    else:  # leave
        joined = config.load()
        config.forget()
        with index_for(args, create=True) as index:
            from fleet.index import outbox
            outbox.forget(index)
        emit(args, {"left": joined.machine if joined else None},
             f"left {pg.hub_label(joined.hub)}: nothing is pushed any more (the hub keeps what it has)"
             if joined else "not in a team: nothing to leave")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("team", help="team mode: push this machine's rows to a PostgreSQL hub")
    actions = p.add_subparsers(dest="team_action", metavar="ACTION")
    actions.required = True
    p.set_defaults(func=cmd_team)
    a = actions.add_parser("init", help="create or upgrade the hub's schema and roles (an admin DSN)")
    a.add_argument("dsn", metavar="ADMIN_DSN")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("enroll", help="create machine NAME's login and print its one-time DSN")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--dsn", required=True, metavar="ADMIN_DSN")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("viewer", help="create NAME's login for the hub's dashboard (`serve --team`) and print "
                                          "its one-time DSN")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--dsn", required=True, metavar="ADMIN_DSN")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("join", help="push this machine's rows to the hub DSN as machine NAME")
    a.add_argument("dsn", metavar="DSN")
    a.add_argument("--machine", required=True, metavar="NAME")
    a.add_argument("--password-stdin", action="store_true",
                   help="read the machine's password from stdin (without it, a terminal is asked)")
    a.add_argument("--share", choices=config.SHARES, default="paths",
                   help="paths: rows as they are; names: repo names and states, no absolute path")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("push", help="push the backlog to the hub")
    a.add_argument("--once", action="store_true", required=True, help="push what waits, then exit")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("decide", help="approve or reject machine NAME's proposal on the hub, signed with "
                                          "your Ed25519 key; only that machine acts on it")
    a.add_argument("machine", metavar="MACHINE")
    a.add_argument("proposal", metavar="PROPOSAL_ID")
    a.add_argument("verdict", choices=("approve", "reject"))
    a.add_argument("--dsn", required=True, metavar="HUB_DSN", help="a login holding fleetdeck_hub (or the admin)")
    a.add_argument("--key", required=True, metavar="PEM", help="your Ed25519 private key (`fleetdeck audit keygen`)")
    a.add_argument("--as", dest="approver", required=True, metavar="NAME", help="your name, as machines log it")
    a.add_argument("--reason", help="why (required to reject)")
    a.add_argument("--yes", action="store_true", help=f"do not ask on the terminal (only with {NONINTERACTIVE} "
                                                      "in the settings file)")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("status", help="machine, hub, connection, backlog, last push and error")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("leave", help="stop pushing (the hub keeps the history until an admin prunes it)")
    a.add_argument("--json", action="store_true")
