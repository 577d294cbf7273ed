"""`fleetdeck scan`, `repos`, `radar` and `presence`: the fleet as the index holds it."""

from __future__ import annotations

import argparse
import os
import sys

from fleet.cli.args import bounded, index_for, require_dirs
from fleet.cli.output import console, emit_json, print_table
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.safetext import visible
from fleet.words import plural


def cmd_scan(args: argparse.Namespace) -> int:
    from fleet.index.scan import scan, set_skip_patterns, skip_patterns

    require_dirs(args.roots)  # before the index is opened: a bad ROOT creates no database
    roots = args.roots or None
    with index_for(args, create=bool(roots)) as index:
        if args.skip:
            set_skip_patterns(index, list(skip_patterns(index)) + args.skip)
        if not roots and not index.roots():
            raise FleetError("BAD_ARGUMENT", "no roots saved yet: run `fleetdeck scan PATH` or `fleetdeck roots add PATH`")
        if sys.stderr.isatty() and not args.json:
            summary = _scan_with_progress(index, roots)
        else:
            summary = scan(index, roots)
    if args.json:
        emit_json(summary)
    else:
        print(f"indexed {summary['repos']} repositories under {plural(len(summary['roots']), 'root')} "
              f"in {summary['elapsed_s']:.2f}s; {summary['error_count']} with errors, "
              f"{len(summary['gone'])} gone", file=sys.stderr)
        for err in summary["errors"]:
            print(f"  {visible(err['path'])}: {visible(err['error'])}", file=sys.stderr)
    return 0


def _scan_with_progress(index: Index, roots: list[str] | None) -> dict:
    """A progress bar on stderr, redrawn from the scan's own callback: a refresh thread would keep the scan
    from forking its worker processes."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fleet.index.scan import scan

    with Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), transient=True, auto_refresh=False) as bar:
        task = bar.add_task("", total=None)

        def tick(done: int, total: int, path: str) -> None:
            bar.update(task, completed=done, total=total, description=os.path.basename(path), refresh=True)

        return scan(index, roots, progress=tick)


def cmd_repos(args: argparse.Namespace) -> int:
    from fleet.views.repos import public_records

    with index_for(args) as index:
        records = public_records(index, include_gone=args.all)
    if args.json:
        emit_json(records)
        return 0
    print_table(("name", "branch", "head", "upstream", "↑", "↓", "staged", "modified", "untracked", "conflicted",
                 "stashes", "op"), (
        (r["name"], r["branch"] or ("(detached)" if r["detached"] else "-"),
         r["head"][:10] if r["head"] else "(no commits)",
         (r["upstream"] or "-") + (" (gone)" if r.get("upstream_gone") else ""), _num(r["ahead"]),
         _num(r["behind"]), _num(r["staged"]), _num(r["unstaged"]), _num(r["untracked"]), _num(r["conflicted"]),
         _num(r["stashes"]), r["operation"] or "") for r in records), keep=("name",))
    return 0


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def cmd_radar(args: argparse.Namespace) -> int:
    from fleet.presence import presence
    from fleet.views.queue import radar_view

    with index_for(args) as index:
        view = radar_view(index, presence(index), include_clean=args.all, limit=args.limit)
    if args.json:
        emit_json(view)
        return 0
    entries = view["entries"]
    if not entries:
        console().print("Nothing needs attention: every repository is clean and in sync.")
        return 0
    # one line per reason, each with its own next step (the repo's score and name on its first line)
    print_table(("score", "repo", "why", "next step"), (
        (e["score"] if n == 0 else "", e["name"] if n == 0 else "", r["summary"], r["next_step"])
        for e in entries for n, r in enumerate(e["reasons"])), right=("score",), keep=("repo",))
    return 0


def cmd_presence(args: argparse.Namespace) -> int:
    from fleet.presence import collisions, refresh_presence

    with index_for(args) as index:
        rows = refresh_presence(index)
    clashes = collisions(rows)
    if args.json:
        emit_json({"agents": rows, "collisions": clashes})
        return 0
    if not rows:
        console().print("No coding agents seen in the fleet in the last 15 minutes.")
        return 0
    from rich.text import Text

    def files(r: dict) -> str:
        return ", ".join(r["files"][:3]) + (" …" if len(r["files"]) > 3 else "")

    print_table(("agent", "state", "repo", "branch", "tool", "files", "pid", "last activity", "seen by"), (
        (r["agent"], r["state"], r["repo_name"] or r["repo"], r["branch"] or "-", r["tool"] or "-",
         files(r) or "-", _num(r["pid"]), r["last_activity"] or "-", ", ".join(r["sources"])) for r in rows),
        keep=("agent", "repo"))
    out = console()
    for clash in clashes:
        out.print(Text.assemble(("collision", "bold red"), visible(
            f" in {clash['repo']}: {clash['message']} — {clash['next_step']}")))
    return 0



def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help="index repositories under ROOTs (saved as roots) or under the saved roots")
    p.add_argument("roots", nargs="*", metavar="ROOT")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--skip", action="append", default=[], metavar="PATTERN",
                   help="also skip folders matching this glob (saved for later scans)")
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("repos", help="the index: one record per repository")
    p.add_argument("--json", action="store_true")
    p.add_argument("--all", action="store_true", help="include repositories gone from disk")
    p.set_defaults(func=cmd_repos)

    p = sub.add_parser("radar", help="the attention queue, most urgent first")
    p.add_argument("--json", action="store_true")
    p.add_argument("--limit", type=bounded(1, 1_000_000), default=None,
                   help="show at most N repositories (1..1000000; default all)")
    p.add_argument("--all", action="store_true", help="include clean repositories")
    p.set_defaults(func=cmd_radar)

    p = sub.add_parser("presence", help="coding agents working in the fleet's repositories, and collisions")
    p.add_argument("--json", action="store_true", help="print {agents: [...], collisions: [...]} as JSON")
    p.set_defaults(func=cmd_presence)
