"""`fleetdeck digest`, `lost` and `prune-events`: what happened in the fleet, what can be recovered, and
forgetting old events."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from functools import partial

from fleet.cli.args import bounded, index_for
from fleet.cli.output import emit_json
from fleet.errors import FleetError
from fleet.timespec import iso
from fleet.safetext import json_safe, visible


def cmd_digest(args: argparse.Namespace) -> int:
    from fleet.views.digest import digest, report

    kinds = [k for part in args.kinds for k in part.split(",") if k] or None
    with contextlib.ExitStack() as stack:
        if args.team:   # the hub's digest across machines (fleet/team/hubview.py), same formats
            from fleet.team import hubview
            from fleet.team.hubread import Hub

            hub = stack.enter_context(contextlib.closing(Hub(args.team)))
            hub.check()
            source, digest, report = hub, partial(hubview.hub_digest, machine=args.machine), \
                partial(hubview.hub_report, machine=args.machine)
        else:
            source = stack.enter_context(index_for(args))
        if args.format == "json":
            text = json_safe(json.dumps(digest(source, args.since, repos=args.repo or None, kinds=kinds,
                                               max_events=args.max_events), indent=2, ensure_ascii=False)) + "\n"
        else:
            from fleet.views.report import render_html, render_markdown

            data = report(source, args.since, repos=args.repo or None, kinds=kinds, max_events=args.max_events)
            text = render_markdown(data) if args.format == "md" else render_html(data)
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise FleetError("BAD_PATH", f"cannot write {args.out}: {exc.strerror}") from None
    else:
        sys.stdout.write(text)
    return 0


def cmd_lost(args: argparse.Namespace) -> int:
    from fleet.views.digest import resolve_repos
    from fleet.index.lost import lost_commits
    from fleet.views.recovery import recover_command
    from fleet.snapshot.events import discarded_in_fleet
    from fleet.timespec import parse_since

    with index_for(args) as index:
        since, repo_ids = parse_since(args.since) if args.since else None, resolve_repos(index, args.repo or None)
        found = lost_commits(index, since=since, repo_ids=repo_ids)
        discarded = discarded_in_fleet(index, since, repo_ids)
    if args.json:
        emit_json({**found, "discarded": discarded})
        return 0
    if not found["commits"]:
        print("No recoverable commits: every dropped tip is still reachable from a ref (or already gone).")
    for d in discarded:
        print(f"{visible(d['repo'])}  {visible(d['summary'])}\n    files: {visible(', '.join(d['files'][:10]))}"
              f"{' …' if d['count'] > 10 else ''}\n    restore: {visible(d['restore'])}")
    for c in found["commits"]:
        sha = visible(c["sha"])
        print(f"{visible(c['repo'])}  {sha[:12]}  {visible(c['subject'])}\n    dropped by "
              f"{visible(c['dropped_by'])} on {visible(c['ref'])} at {iso(c['dropped_at'])} "
              f"({visible(c['message'])})\n    recover: {visible(recover_command(c['path'], c['sha']))}")
    for err in found["errors"]:
        print(f"fleetdeck: could not check {visible(err['repo'])}: {visible(err['error'])}", file=sys.stderr)
    return 0


def cmd_prune_events(args: argparse.Namespace) -> int:
    from fleet.index.events import prune_events
    from fleet.timespec import parse_duration

    with index_for(args) as index:
        result = prune_events(index, parse_duration(args.older_than))
    if args.json:
        emit_json(result)
    else:
        print(f"deleted {result['events_deleted']} events and {result['reflog_lines_deleted']} reflog lines "
              f"older than {iso(result['cutoff'])}", file=sys.stderr)
    return 0



def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("digest", help="what happened in the fleet since a point in time (for cron)")
    p.add_argument("--since", default="24h", help="24h, 90m, 7d, an ISO 8601 time or unix ms (default 24h)")
    p.add_argument("--format", choices=["md", "html", "json"], default="md")
    p.add_argument("--out", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--repo", action="append", default=[], metavar="NAME", help="only this repository (repeatable)")
    p.add_argument("--kind", dest="kinds", action="append", default=[], metavar="KIND",
                   help="only these event kinds (repeatable or comma-separated)")
    p.add_argument("--max-events", type=bounded(1, 1000), default=200, help="1..1000 (default 200)")
    p.add_argument("--team", metavar="DSN", help="the team hub's digest across machines (a login holding "
                                                 "fleetdeck_hub; the password from the DSN, PGPASSWORD or ~/.pgpass)")
    p.add_argument("--machine", metavar="NAME", help="with --team: only this machine")
    p.set_defaults(func=cmd_digest)

    p = sub.add_parser("lost", help="recoverable commits: dropped tips no ref reaches any more")
    p.add_argument("--json", action="store_true")
    p.add_argument("--since", help="only drops since then (24h, 7d, ISO 8601, unix ms)")
    p.add_argument("--repo", action="append", default=[], metavar="NAME")
    p.set_defaults(func=cmd_lost)

    p = sub.add_parser("prune-events", help="delete events (and raw reflog lines) older than a duration")
    p.add_argument("--older-than", required=True, metavar="DURATION", help="e.g. 90d, 12w")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_prune_events)
