"""`fleetdeck policy check`: which rule of the policy file applies to (agent, op, repo, ref, path), and why."""

from __future__ import annotations

import argparse

from fleet.cli.output import emit
from fleet.errors import FleetError
from fleet.ops import policy as policy_mod
from fleet.ops.catalog import OPS, risk_of


def cmd_policy(args: argparse.Namespace) -> int:
    """Which rule applies to (agent, op, repo, ref, path), and why; or POLICY_INVALID for a broken file."""
    if args.op not in OPS:
        raise FleetError("BAD_ARGUMENT", f"unknown operation {args.op!r}; known: {', '.join(sorted(OPS))}")
    loaded = policy_mod.load_policy()
    risk = risk_of(args.op, {"mode": args.mode, "amend": args.amend})
    subject = policy_mod.Subject(args.op, args.repo, args.repo, tuple(args.ref or ()), tuple(args.path or ()),
                                 True, risk)
    decision = policy_mod.evaluate(loaded, args.agent, [subject])
    result = {"policy_file": loaded.source, "agent": args.agent, "op": args.op, "repo": args.repo,
              "refs": args.ref or [], "paths": args.path or [], "risk": risk, **decision.as_dict(),
              "settings": loaded.settings}
    emit(args, result, f"{decision.action}: {decision.why}")
    return 0


POLICY_HELP = (policy_mod.__doc__ or "").split("Example (also in", 1)[-1].split("\n", 1)[-1]



def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("policy", help="which policy rule applies to a proposal, and why",
                       description="Check the policy file ($FLEETDECK_POLICY / --policy, or "
                                   "$XDG_CONFIG_HOME/fleetdeck/policy.toml). A complete example file:\n" + POLICY_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    checks = p.add_subparsers(dest="policy_action", metavar="check")
    checks.required = True
    c = checks.add_parser("check", help="explain the decision for AGENT OP REPO")
    c.add_argument("agent")
    c.add_argument("op")
    c.add_argument("repo", help="the repository's path or fleet name")
    c.add_argument("--ref", action="append", help="a ref the proposal names or moves (repeatable)")
    c.add_argument("--path", action="append", help="a repo-relative path it touches (repeatable)")
    c.add_argument("--mode", help="reset mode (hard is high-risk)")
    c.add_argument("--amend", action="store_true", help="a commit that amends (high-risk)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_policy)
