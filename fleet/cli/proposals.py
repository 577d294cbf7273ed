"""`fleetdeck proposals ...` and `fleetdeck restore-points`: the person's side of the write path on a terminal.

`approve` executes at once in this process; `undo` makes and runs a `restore` proposal; `reject` refuses one.
Each of these decisions asks on the person's terminal (`/dev/tty`, never stdin, which an agent's shell can
pipe), unless the person set up a non-interactive approver (`[approval] noninteractive = true` in the
settings file) and passed `--yes`; with neither a terminal nor that setting it refuses (NO_TERMINAL).
`wait` blocks until a proposal is decided (for scripts); `reconcile` settles a proposal whose executor died.
JSON with `--json`, a short text otherwise.
"""

from __future__ import annotations

import argparse
import sys

from fleet.cli.args import index_for
from fleet.cli.output import emit
from fleet.cli.proposal_text import describe, line
from fleet.cli.terminal import NONINTERACTIVE, ask_decision
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops import confirm, proposals
from fleet.settings import settings_path
from fleet.words import plural




def _confirm(args: argparse.Namespace, index: Index, row: dict, verb: str) -> None:
    """Show the proposal on the terminal and ask; `--yes` skips that only for a non-interactive approver. A
    decision that needs the person's passkey (fleet/ops/passkeys.py) is refused here: a terminal has none."""
    from fleet.ops import passkeys

    if passkeys.required(index, confirm.decision_risk(verb, row.get("risk"))):
        raise FleetError("PASSKEY_REQUIRED", f"{verb} this on the dashboard: it needs your passkey ([passkeys] "
                                             f"require = {passkeys.mode()!r} in {settings_path()})")
    ask_decision(verb, row, describe(row), args.yes)


def cmd_proposals(args: argparse.Namespace) -> int:
    from fleet.ops import service  # the write side loads only for the commands that use it (not `mcp`'s parser)

    action = args.proposals_action
    if action == "approver-token":
        from fleet.ops.approver import approver_token

        with index_for(args) as index:
            print(approver_token(index.path))
        return 0
    with index_for(args) as index:
        if action == "list":
            found = service.list_public(index, args.status, limit=args.limit)
            emit(args, found, "\n".join(line(r) for r in found["proposals"]) or "no proposals")
            return 0
        if action == "show":
            emit(args, service.show(index, args.id), describe)
            return 0
        if action == "patch":
            from fleet.ops.patchops import full_patch

            sys.stdout.write(full_patch(index, args.id))
            return 0
        if action in ("approve", "undo"):  # this process is an executor now: claim what a dead one left
            service.resume_orphans(index)
        if action == "approve":
            _confirm(args, index, service.show(index, args.id), "approve")
            row = service.approve(index, args.id, "cli")
        elif action == "reject":
            _confirm(args, index, service.show(index, args.id), "reject")
            row = service.reject(index, args.id, "cli", args.reason)
        elif action == "undo":
            original = service.show(index, args.id)
            _confirm(args, index, original, "undo")
            row = service.undo(index, args.id, "cli")
        elif action == "wait":
            row = service.wait(index, args.id, args.timeout)
        else:
            row = service.reconcile(index, args.id, args.as_status, "cli")
    emit(args, row, describe)
    # a proposal that ran and failed is a failed command; one the person just reconciled as failed is not
    return 1 if row["status"] == "failed" and action != "reconcile" else 0


def cmd_restore_points(args: argparse.Namespace) -> int:
    from fleet.ops import restore, restorepoints
    from fleet.index.target import resolve_target

    with index_for(args) as index:
        path = resolve_target(index, args.repo).path
        if args.prune:
            ids = {p["restore_point"] for p in restorepoints.list_points(index, path, limit=100_000)["restore_points"]}
            if args.prune not in ids:
                raise FleetError("NOT_FOUND", f"no restore point {args.prune} in {path}")
            result = restore.prune(index, args.prune)
            emit(args, result, f"pruned {args.prune}: {plural(result['refs_deleted'], 'ref')} deleted")
            return 0
        found = restorepoints.list_points(index, path)
    emit(args, found, "\n".join(f"{p['restore_point']}  {p['created_at']}  {p['op']}  "
                                 f"{'undoable' if p['undoable'] else 'not undoable'}"
                                 for p in found["restore_points"]) or "no restore points")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proposals", help="agents' proposals: list, show, approve, reject, undo, wait, reconcile")
    actions = p.add_subparsers(dest="proposals_action", metavar="ACTION")
    p.set_defaults(func=cmd_proposals, proposals_action="list", json=False, status=None, limit=200)
    actions.add_parser("approver-token", help="the token your own scripts send as X-Fleetdeck-Approver to approve "
                                              "or reject over HTTP (the MCP bearer token cannot)")
    a = actions.add_parser("list", help="pending first, then the rest newest first")
    a.add_argument("--status", choices=proposals.STATES)
    a.add_argument("--limit", type=int, default=200)
    a.add_argument("--json", action="store_true")
    for name, text in (("show", "one proposal with its preview"),
                       ("patch", "the whole patch a patch proposal applies (every character visible)"),
                       ("approve", "approve and execute now"),
                       ("reject", "reject with a reason"), ("undo", "go back to the state before it ran"),
                       ("wait", "block until it is decided and run (for scripts)"),
                       ("reconcile", "settle a proposal whose executor died (never re-run)")):
        a = actions.add_parser(name, help=text)
        a.add_argument("id", metavar="ID")
        a.add_argument("--json", action="store_true")
        if name in ("approve", "reject", "undo"):
            a.add_argument("--yes", action="store_true", help=f"do not ask on the terminal (only with "
                                                              f"{NONINTERACTIVE} in the settings file)")
        if name == "reject":
            a.add_argument("--reason", required=True)
        if name == "wait":
            a.add_argument("--timeout", type=float, default=3600.0, help="seconds (default 3600)")
        if name == "reconcile":
            a.add_argument("--as", dest="as_status", required=True, choices=["failed", "completed"])


def add_restore_points_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("restore-points", help="restore points of one repository (what can be undone)")
    p.add_argument("repo")
    p.add_argument("--prune", metavar="ID", help="delete this restore point (its refs) for good: the only way "
                                                 "one goes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_restore_points)

