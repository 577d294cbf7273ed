"""`fleetdeck`: the command line. JSON goes to stdout, logs and progress to stderr.

Exit codes: 0 ok, 1 failure, 2 usage error. Each command is one small function over `fleet/`.
Text from repositories (names, branches, paths, messages) is printed through fleet.views.safe: as text,
never as rich markup, with control characters made visible.
"""

from __future__ import annotations

from fleet.words import plural
import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable, Iterable

from fleet import __version__
from fleet.errors import FleetError
from fleet.index.store import Index, default_db_path, open_index
from fleet.repo.record import iso
from fleet.views.safe import json_safe, visible

log = logging.getLogger("fleetdeck")
Handler = Callable[[argparse.Namespace], int]


def emit_json(value: object) -> None:
    sys.stdout.write(json_safe(json.dumps(value, indent=2, ensure_ascii=False, default=str)) + "\n")
    sys.stdout.flush()


def console():
    """A rich console on stdout for human-readable tables."""
    from rich.console import Console

    return Console(highlight=False)


KEEP_MAX = 40  # a kept column's widest cell; a longer one loses its middle, never its ends


def middle(text: str, width: int = KEEP_MAX) -> str:
    """`text` at most `width` characters, cut in the middle (`r02-dist…ems-notes`): both ends tell rows apart."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def print_table(columns: Iterable[str], rows: Iterable[Iterable[object]], right: tuple[str, ...] = (),
                keep: tuple[str, ...] = ()) -> None:
    """A borderless table of plain text cells (a list is one line each): no cell is read as rich markup, and
    every control character is visible. The `keep` columns (what tells rows apart: a name, an id) are never
    cut or wrapped (past KEEP_MAX, cut in the middle); the other cells wrap to fit the terminal (80 columns
    when piped)."""
    from rich.table import Table
    from rich.text import Text

    columns = list(columns)
    cells = [[("\n".join(map(visible, cell)) if isinstance(cell, list) else visible(cell)) for cell in row]
             for row in rows]
    table = Table(box=None, pad_edge=False)
    for i, col in enumerate(columns):
        if col in keep:
            for row in cells:
                row[i] = middle(row[i])
            widest = max([len(col), *(len(row[i]) for row in cells)])
            table.add_column(col, justify="right" if col in right else "left", no_wrap=True, min_width=widest)
        else:
            table.add_column(col, justify="right" if col in right else "left", overflow="fold")
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    console().print(table)


def index_for(args: argparse.Namespace, *, create: bool = False) -> Index:
    """The index named by --db / $FLEETDECK_DB / the default. Only commands that add roots (scan ROOT,
    watch ROOT, serve, roots add) create it: a read of a missing index creates nothing and says so."""
    path = args.db or default_db_path()
    if not create and not os.path.exists(path):
        raise FleetError("NOT_FOUND", f"no index yet: run `fleetdeck scan ROOT` (looked for {path})")
    return open_index(path)


def bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type for an integer option within [low, high]: anything else is a usage error (exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {high}, not {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {value}")
        return value

    parse.__name__ = f"integer {low}..{high}"
    return parse


# --- commands ------------------------------------------------------------------------------------------

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


def cmd_patch(args: argparse.Namespace) -> int:
    """`patch generate|inspect|remove|validate`: the same JSON the MCP `patch.*` tools return."""
    from fleet.patch.file import inspect_patch, remove_patch_entries, validate_patch
    from fleet.patch.generate import generate_patch

    action = args.patch_command
    if action == "generate":
        try:
            changes = json.loads(_read_input(args.changes, "changes"))
        except json.JSONDecodeError as exc:
            raise FleetError("BAD_ARGUMENT", f"changes are not valid JSON: {exc}") from None
        spec = patch_spec(changes, args)
        result = generate_patch(spec["root"], spec["changes"], context_lines=spec["context_lines"],
                                patch_file=spec["patch_file"], write_mode=spec["write_mode"],
                                check=not args.no_check, plain_folder=True, with_bytes=True)
        data = result.pop("patch_bytes")
        if args.raw:  # the exact bytes: entries in another encoding are written in it
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            return 0
    elif action == "inspect":
        result = inspect_patch(os.path.abspath(args.patch_file))
    elif action == "remove":
        result = remove_patch_entries(os.path.abspath(args.patch_file), args.path or None, args.index or None)
    else:
        repo = os.path.abspath(args.repo) if args.repo else None
        if args.patch_file == "-":
            result = validate_patch(patch=_read_input("-", "patch"), repo=repo)
        else:
            result = validate_patch(patch_file=os.path.abspath(args.patch_file), repo=repo)
    emit_json(result)
    return 0 if result.get("valid", True) else 1


SPEC_KEYS = ("changes", "output_path", "write_mode", "project_root_dir", "context_lines")


def patch_spec(spec: object, args: argparse.Namespace) -> dict:
    """The generate call a JSON spec asks for: a list of changes, or uni-diff-patch's object {changes,
    output_path?, write_mode?, project_root_dir?, context_lines?}; a flag given explicitly must agree."""
    if isinstance(spec, list):
        spec = {"changes": spec}
    if not isinstance(spec, dict) or "changes" not in spec:
        raise FleetError("BAD_ARGUMENT", "the spec must be a list of changes or an object with `changes`")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise FleetError("BAD_ARGUMENT", f"unknown spec keys {', '.join(unknown)}; allowed: {', '.join(SPEC_KEYS)}")

    def pick(key: str, flag: object, default: object) -> object:
        if key in spec and flag is not None and flag != spec[key]:
            raise FleetError("BAD_ARGUMENT", f"the spec's {key} and the command-line flag differ")
        return spec.get(key, flag if flag is not None else default)

    root = pick("project_root_dir", args.repo, None)
    output = pick("output_path", args.patch_file, None)
    for name, value in (("project_root_dir", root), ("output_path", output)):
        if value is not None and not isinstance(value, str):
            raise FleetError("BAD_ARGUMENT", f"{name} must be a path")
    text_pairs_only = all(isinstance(c, dict) and c.get("mode") == "text_pair" for c in spec["changes"] or [None])
    if root is None and not text_pairs_only:
        root = "."
    return {"changes": spec["changes"], "root": os.path.abspath(root) if root is not None else None,
            "patch_file": os.path.abspath(output) if output is not None else None,
            "write_mode": pick("write_mode", args.write_mode, "append"),
            "context_lines": pick("context_lines", args.context_lines, 3)}


def _read_input(source: str, what: str) -> str:
    """UTF-8 text from a file or `-` (stdin), capped like a patch file."""
    from fleet.patch.file import MAX_PATCH_BYTES

    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_PATCH_BYTES + 1)
        else:
            with open(source, "rb") as fh:
                data = fh.read(MAX_PATCH_BYTES + 1)
    except OSError as exc:
        raise FleetError("NOT_FOUND", f"cannot read {what} {source!r}: {exc.strerror}") from None
    if len(data) > MAX_PATCH_BYTES:
        raise FleetError("LIMIT", f"{what} is larger than {MAX_PATCH_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FleetError("BAD_ARGUMENT", f"{what} is not UTF-8 (byte {exc.start})") from None


def require_dirs(paths: list[str]) -> None:
    bad = [p for p in paths if not os.path.isdir(p)]
    if bad:
        raise FleetError("BAD_PATH", f"not a directory: {', '.join(bad)}")


def cmd_serve(args: argparse.Namespace) -> int:
    """Add ROOTs to the saved roots and serve the dashboard at once, from the index as it is. The watcher in
    the same process re-checks the fleet behind the first page (new repos first) and the pages fill in
    live; with `--no-watch` it re-checks once and stops, and the pages say the index is not kept fresh."""
    from web.server import serve

    require_dirs(args.roots)
    with index_for(args, create=True) as index:
        for root in args.roots:
            index.add_root(root)
        db_path = index.path
    serve(db_path, args.host, args.port, allow_remote=args.allow_remote, open_browser=args.open,
          watch=not args.no_watch)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Build the sample fleet, say where it and its index are, serve it alive (fleet.demolife), and on the
    way out (Ctrl-C included) delete it, unless `--keep`; on a terminal it asks first."""
    import tempfile
    import threading

    from fleet.demo import build_demo_fleet, seed_proposals
    from fleet.demolife import DemoLife, agent_env

    target = args.dir or tempfile.mkdtemp(prefix="fleetdeck-demo-")
    try:
        roots = build_demo_fleet(target)
    except FileExistsError as exc:
        raise FleetError("BAD_PATH", str(exc)) from exc
    args.roots = roots
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


def cmd_watch(args: argparse.Namespace) -> int:
    from fleet.watch.service import fleet_watcher

    require_dirs(args.roots)
    logging.getLogger("fleetdeck.watcher").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    with index_for(args, create=bool(args.roots)) as index:
        if not args.roots and not index.roots():
            raise FleetError("BAD_ARGUMENT", "no roots saved yet: run `fleetdeck watch PATH` or `fleetdeck roots add PATH`")
        fleet_watcher(index, args.roots or None, force_polling=args.poll).run_forever()
    return 0


def cmd_digest(args: argparse.Namespace) -> int:
    from fleet.views.digest import digest, report

    kinds = [k for part in args.kinds for k in part.split(",") if k] or None
    with index_for(args) as index:
        if args.format == "json":
            text = json_safe(json.dumps(digest(index, args.since, repos=args.repo or None, kinds=kinds,
                                               max_events=args.max_events), indent=2, ensure_ascii=False)) + "\n"
        else:
            from fleet.views.report import render_html, render_markdown

            data = report(index, args.since, repos=args.repo or None, kinds=kinds, max_events=args.max_events)
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
    from fleet.repo.recovery import recover_command
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


def cmd_mcp(args: argparse.Namespace) -> int:
    """MCP on stdio: stdout carries JSON-RPC only, so everything else (logs included) goes to stderr."""
    from mcp_bridge.server import run_stdio

    run_stdio(args.db)
    return 0


# --- parser ----------------------------------------------------------------------------------------------

def versions() -> str:
    """fleetdeck's version, and which git it runs with that git's own version line."""
    from fleet.git.run import GitError, git_path, run_git

    try:
        found = git_path()
        line = run_git("/", ["version"], timeout=10).stdout.decode("utf-8", "replace").strip()
        git_line = f"{line} ({found})"
    except GitError as exc:
        git_line = f"git: {exc.message}"
    return f"fleetdeck {__version__}\n{git_line}"


class VersionAction(argparse.Action):
    """`--version`, computed only when asked (it runs git once)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        for line in versions().splitlines():
            print(visible(line))
        parser.exit()


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line, except that the parsers of `patch`, the proposal commands, `audit` and `agents`
    (which import their packages to describe themselves: a third of a CLI call's start-up) are added only when
    `argv` may name one of them: a command defined here runs without them."""
    parser = argparse.ArgumentParser(prog="fleetdeck", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=VersionAction, help="show fleetdeck's version and the git it runs")
    parser.add_argument("--db", help="index database (default: $FLEETDECK_DB or $XDG_DATA_HOME/fleetdeck/fleet.db)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    parser.add_argument("--policy", help="the write policy file (default: $FLEETDECK_POLICY or "
                                         "$XDG_CONFIG_HOME/fleetdeck/policy.toml)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

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

    for name, text in (("serve", "the dashboard (and watcher) on http://127.0.0.1:8765"),
                       ("demo", "build a sample fleet in a temp dir and serve it")):
        p = sub.add_parser(name, help=text)
        if name == "serve":
            p.add_argument("roots", nargs="*", metavar="ROOT",
                           help="add these roots to the saved ones (every saved root is watched and shown)")
            p.set_defaults(func=cmd_serve)
        else:
            p.add_argument("--dir", help="build the sample fleet here (an empty or new folder)")
            p.add_argument("--keep", action="store_true", help="keep the sample fleet on exit (default: delete it)")
            p.set_defaults(func=cmd_demo)
        p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
        p.add_argument("--port", type=bounded(0, 65535), default=8765, help="port (default 8765; 0 picks a free one)")
        p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
        p.add_argument("--open", action="store_true", help="open the dashboard in a browser")
        p.add_argument("--no-watch", action="store_true",
                       help="do not keep the index fresh: re-check the fleet once behind the first page, then "
                            "stop (another `fleetdeck watch` may keep it fresh)")

    p = sub.add_parser("roots", help="list, add or remove the fleet's roots")
    p.add_argument("action", nargs="?", choices=["list", "add", "remove"], default="list")
    p.add_argument("path", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_roots)

    p = sub.add_parser("watch", help="watch the fleet and keep the index fresh (foreground; Ctrl-C stops)")
    p.add_argument("roots", nargs="*", metavar="ROOT", help="roots to watch (saved); default: the saved roots")
    p.add_argument("--poll", action="store_true", help="poll instead of using inotify")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("digest", help="what happened in the fleet since a point in time (for cron)")
    p.add_argument("--since", default="24h", help="24h, 90m, 7d, an ISO 8601 time or unix ms (default 24h)")
    p.add_argument("--format", choices=["md", "html", "json"], default="md")
    p.add_argument("--out", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--repo", action="append", default=[], metavar="NAME", help="only this repository (repeatable)")
    p.add_argument("--kind", dest="kinds", action="append", default=[], metavar="KIND",
                   help="only these event kinds (repeatable or comma-separated)")
    p.add_argument("--max-events", type=bounded(1, 1000), default=200, help="1..1000 (default 200)")
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

    p = sub.add_parser("mcp", help="MCP server on stdio over the same index (for coding agents)")
    p.set_defaults(func=cmd_mcp)

    # The global options that take a value, as argparse knows them (the subparsers' action has no option).
    valued = [s for a in parser._actions if a.nargs != 0 for s in a.option_strings if s.startswith("--")]
    if _command_of(sys.argv[1:] if argv is None else argv, valued) not in sub.choices:
        from fleet.agents.commands import add_agents_parser
        from fleet.ops.commands import add_parsers as add_ops_parsers
        from fleet.audit.commands import add_audit_parser
        from fleet.snapshot.commands import add_parsers as add_snapshot_parsers
        from fleet.agenthooks.commands import add_parsers as add_hook_parsers
        from fleet.inbox.commands import add_parsers as add_inbox_parsers

        _add_patch_parser(sub)
        add_ops_parsers(sub)
        add_audit_parser(sub)
        add_snapshot_parsers(sub)
        add_hook_parsers(sub)
        add_agents_parser(sub)
        add_inbox_parsers(sub)
    return parser


def _command_of(argv: list[str], valued: list[str]) -> str | None:
    """The command word of a command line as argparse will find it (None when there is none, as for
    `--help`): the first word that is neither an option nor the value of a global option that takes one
    (`valued`; abbreviations of them included)."""
    words = iter(argv)
    for word in words:
        if word == "--":
            return next(words, None)
        if word.startswith("--") and "=" not in word and any(o.startswith(word) for o in valued):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _add_patch_parser(sub: argparse._SubParsersAction) -> None:
    from fleet.patch.file import WRITE_MODES

    patch = sub.add_parser("patch", help="author unified diffs from structured changes (JSON in, JSON out)")
    patch.set_defaults(func=cmd_patch)
    actions = patch.add_subparsers(dest="patch_command", metavar="{generate,inspect,remove,validate}")
    actions.required = True
    p = actions.add_parser("generate", help="structured changes (JSON list) -> one unified diff")
    p.add_argument("--repo", help="the root the paths are relative to: a git work tree or a plain folder "
                                  "(default: the spec's project_root_dir, else the current directory)")
    p.add_argument("--changes", default="-", help="JSON file: a list of changes, or a uni-diff-patch spec "
                                                  "{changes, output_path, write_mode, project_root_dir}; - for stdin")
    p.add_argument("--context-lines", type=bounded(1, 20), help="lines of context, 1..20 (default 3)")
    p.add_argument("--patch-file", help="also store the entries in this .patch/.diff file (spec: output_path)")
    p.add_argument("--write-mode", choices=WRITE_MODES, help="append (default), upsert, overwrite, create_only")
    p.add_argument("--no-check", action="store_true", help="skip git apply --check")
    p.add_argument("--raw", action="store_true", help="print only the patch text")
    p = actions.add_parser("inspect", help="list a patch file's entries")
    p.add_argument("patch_file")
    p = actions.add_parser("remove", help="remove entries from a patch file")
    p.add_argument("patch_file")
    p.add_argument("--path", action="append", default=[], help="remove the entries holding PATH (repeatable)")
    p.add_argument("--index", action="append", type=bounded(0, 1_000_000), default=[], help="remove entry #N, counted from 0 (repeatable)")
    p = actions.add_parser("validate", help="parse a patch; with --repo also git apply --check it")
    p.add_argument("patch_file", help="a .patch/.diff file, or - for stdin")
    p.add_argument("--repo", help="work tree to run git apply --check in")


def _on_index_errors(args: argparse.Namespace) -> int:
    """Run the command; an index that turns out unusable mid-command (say, corrupt past its first page)
    becomes the same one-line error the index gives when it is opened."""
    import sqlite3

    from fleet.index.store import default_db_path, unusable

    try:
        return args.func(args) or 0
    except sqlite3.DatabaseError as exc:
        raise unusable(Path(args.db) if args.db else default_db_path(), exc) from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "action", None) in ("add", "remove") and not args.path:
        parser.error(f"roots {args.action} needs a PATH")
    if args.policy:  # every part of this process (and the executor) loads the same policy
        os.environ["FLEETDECK_POLICY"] = os.path.abspath(args.policy)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="fleetdeck: %(levelname)s: %(message)s")
    try:
        return _on_index_errors(args)
    except FleetError as exc:
        print(f"fleetdeck: error: {visible(exc.message)} [{exc.code}]", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fleetdeck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
