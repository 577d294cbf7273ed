"""`fleetdeck snapshot`, `fleetdeck snapshots` (list, `diff`) and `fleetdeck restore`: the safety net on a
terminal. JSON with `--json` (times ISO 8601 UTC), a short text otherwise; errors are one line."""

from __future__ import annotations

import argparse
import os
import sys

from fleet.cli.args import index_for
from fleet.cli.output import emit_json
from fleet.errors import FleetError
from fleet.index.target import resolve_target
from fleet.snapshot.restore import restore, restore_by_person
from fleet.snapshot.take import take, taken
from fleet.snapshot.timeline import diff, snapshots, work_tree_of
from fleet.timespec import parse_since
from fleet.safetext import visible


def _trees(index, repos: list[str]):
    """The working trees the REPO arguments name (a fleet name, a path, a folder inside one; none: the
    repository of the current folder)."""
    return [work_tree_of(resolve_target(index, repo)) for repo in (repos or [os.getcwd()])]


def _public(meta: dict) -> dict:
    """fleet.snapshot.take.taken with the repository's fleet name after the id."""
    answer = taken(meta)
    return {"id": answer["id"], "repo": meta["repo"], **answer}


def cmd_snapshot(args: argparse.Namespace) -> int:
    with index_for(args) as index:
        made = []
        for tree in _trees(index, args.repo):
            meta = take(tree, index.path, "manual")
            made.append(_public({**meta, "repo": _repo_name(index, tree.path)}))
    if args.json:
        emit_json({"snapshots": made})
    else:
        for m in made:
            state = "unchanged, not kept again" if m["unchanged"] else f"{m['files']} uncommitted file(s)"
            print(visible(f"{m['id'][:12]}  {m['repo']}  {state}"))
            for skip in m["skipped"]:
                print(visible(f"  skipped {skip['path']}: {skip['reason']}"))
    return 0


def cmd_snapshots(args: argparse.Namespace) -> int:
    words = list(args.words)
    if words and words[0] == "diff":
        if len(words) not in (3, 4):
            raise FleetError("BAD_ARGUMENT", "usage: fleetdeck snapshots diff REPO FROM [TO] [--path P]")
        with index_for(args) as index:
            (tree,) = _trees(index, [words[1]])
            text = diff(tree, index.path, words[2], words[3] if len(words) == 4 else None, args.path)
        sys.stdout.write("\n".join(visible(line) for line in text.split("\n")) if sys.stdout.isatty() else text)
        return 0
    if len(words) != 1:
        raise FleetError("BAD_ARGUMENT", "usage: fleetdeck snapshots REPO [--since SPEC] [--path P] [--json]")
    with index_for(args) as index:
        (tree,) = _trees(index, words)
        since = parse_since(args.since) if args.since else None
        found = snapshots(tree, index.path, since=since, path=args.path)
        name = _repo_name(index, tree.path)
    if args.json:
        emit_json({"repo": name, "worktree": tree.path, "snapshots": found})
        return 0
    for s in found:
        agents = f" while {', '.join(s['agents'])} present" if s["agents"] else ""
        flag = "  DISCARDED WORK" if s["discarded"] else ""
        print(visible(f"{s['id'][:12]}  {s['at']}  {s['trigger']:<10} {s['changed_files']:>4} changed{agents}{flag}"))
    if not found:
        print(f"no snapshots of {visible(tree.path)} yet")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    with index_for(args) as index:
        (tree,) = _trees(index, [args.repo])
        if not args.dry_run and not args.yes:
            preview = restore(tree, index.path, args.snapshot, paths=args.path, index=args.index, dry_run=True)
            _confirm(preview)
        result = restore(tree, index.path, args.snapshot, paths=args.path, index=args.index, dry_run=True) \
            if args.dry_run else restore_by_person(tree, index.path, args.snapshot, by="cli", paths=args.path,
                                                   index=args.index)
    if args.json:
        emit_json(result)
        return 0
    verb = "would restore" if result["dry_run"] else "restored"
    for path in result["restored"]:
        print(visible(f"{verb} {path}"))
    for path in result["removed"]:
        print(visible(f"{'would remove' if result['dry_run'] else 'removed'} {path} (not in the snapshot)"))
    if result["index"]:
        print(f"{verb} the staged state")
    if not result["restored"] and not result["removed"] and not result["index"]:
        print("nothing to restore: the working tree already matches the snapshot")
    print(f"the state before is snapshot {result['snapshot_before'][:12]} "
          f"(`fleetdeck restore {visible(args.repo)} {result['snapshot_before'][:12]}` takes it back)")
    return 0


def _confirm(preview: dict) -> None:
    """The person confirms on the terminal what a restore overwrites (the present is snapshotted first, so
    nothing is lost either way); off a terminal, `--yes` says so."""
    changed = preview["restored"] + preview["removed"]
    if not changed and not preview["index"]:
        return
    if not sys.stdin.isatty():
        raise FleetError("BAD_ARGUMENT", "restore needs --yes when not run on a terminal (or --dry-run)")
    for path in changed[:50]:
        print(visible(f"  overwrites {path}"))
    if len(changed) > 50:
        print(f"  … and {len(changed) - 50} more")
    if input(f"restore {len(changed)} path(s) from the snapshot? [y/N] ").strip().lower() not in ("y", "yes"):
        raise FleetError("BAD_ARGUMENT", "not confirmed; nothing was restored")


def _repo_name(index, path: str) -> str:
    return index.name_at(path) or os.path.basename(path)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help="snapshot working trees now (nothing in the repository changes)")
    p.add_argument("repo", nargs="*", help="fleet name, path, or a folder inside one (default: the current folder)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("snapshots", help="a working tree's snapshots, newest first; `snapshots diff REPO FROM [TO]`")
    p.add_argument("words", nargs="+", metavar="REPO | diff REPO FROM [TO]")
    p.add_argument("--since", help="only snapshots since (e.g. 2h, 3d, an ISO time)")
    p.add_argument("--path", help="only snapshots that changed this file or folder")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_snapshots)

    p = sub.add_parser("restore", help="put a snapshot's files back into the working tree (HEAD never moves)")
    p.add_argument("repo")
    p.add_argument("snapshot", help="snapshot id (or a unique prefix)")
    p.add_argument("--path", action="append", default=[], help="restore only this file or folder (repeatable)")
    p.add_argument("--index", action="store_true", help="restore the staged state too")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    p.add_argument("--yes", action="store_true", help="do not ask (off a terminal this is required)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_restore)
