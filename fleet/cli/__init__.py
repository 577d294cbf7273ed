"""`fleetdeck`: the command line. JSON goes to stdout, logs and progress to stderr.

Exit codes: 0 ok, 1 failure, 2 usage error. Each command is one small function over `fleet/`, in the module
of its group here (fleet/cli/repos.py, proposals.py, audit.py, ...); what they print goes through
fleet/cli/output.py. Text from repositories (names, branches, paths, messages) is printed through
fleet.safetext: as text, never as rich markup, with control characters made visible.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

from fleet import __version__
from fleet.cli import demo, history, repos, roots, serve
from fleet.errors import FleetError
from fleet.safetext import visible

__all__ = ["main", "build_parser"]


def versions() -> str:
    """fleetdeck's version, and which git it runs with that git's own version line."""
    from fleet.git.command import git_path
    from fleet.git.run import GitError, run_git

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
    """The whole command line, except that the parsers of the lazy groups (`patch`, the proposal commands,
    `audit`, `team`..., which import their packages to describe themselves: most of a CLI call's start-up) are
    added only when `argv` may name one of them, and then only the group that defines the command: a command
    defined here runs without any of them, `audit verify` without the write side or team mode."""
    parser = argparse.ArgumentParser(prog="fleetdeck", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=VersionAction, help="show fleetdeck's version and the git it runs")
    parser.add_argument("--db", help="index database (default: $FLEETDECK_DB or $XDG_DATA_HOME/fleetdeck/fleet.db)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    parser.add_argument("--policy", help="the write policy file (default: $FLEETDECK_POLICY or "
                                         "$XDG_CONFIG_HOME/fleetdeck/policy.toml)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in (repos.add_parsers, serve.add_serve_parser, demo.add_parsers, roots.add_parsers,
                history.add_parsers, serve.add_mcp_parser):
        add(sub)

    # The global options that take a value, as argparse knows them (the subparsers' action has no option).
    valued = [s for a in parser._actions if a.nargs != 0 for s in a.option_strings if s.startswith("--")]
    command = _command_of(sys.argv[1:] if argv is None else argv, valued)
    if command not in sub.choices:
        for add in _lazy_parsers(command):
            add(sub)
    return parser


# The command groups imported only when a command line may name one of their commands (module in fleet/cli,
# its function that adds the parsers, the commands it adds), in the order `--help` lists them: a command named
# here loads its own group only; any other command line (none, `--help`, a typo) loads them all.
# tests/test_cli_core.py checks the commands against what each function adds.
LAZY_GROUPS = (("patch", "add_parsers", ("patch",)), ("proposals", "add_parsers", ("proposals",)),
               ("dashboard", "add_parsers", ("dashboard",)), ("policy", "add_parsers", ("policy",)),
               ("proposals", "add_restore_points_parser", ("restore-points",)), ("audit", "add_parsers", ("audit",)),
               ("snapshot", "add_parsers", ("snapshot", "snapshots", "restore")),
               ("hooks", "add_parsers", ("hooks", "hook")), ("agents", "add_parsers", ("agents",)),
               ("inbox", "add_parsers", ("inbox",)), ("team", "add_parsers", ("team",)))


def _lazy_parsers(command: str | None) -> list[Callable[[Any], None]]:
    """The functions adding the parsers of the lazy group that defines `command` (importing its module only),
    or of every lazy group when none does."""
    named = [(module, name) for module, name, words in LAZY_GROUPS if command in words]
    if named:
        return [getattr(importlib.import_module(f"fleet.cli.{module}"), name) for module, name in named]
    from fleet.cli import agents, audit, dashboard, hooks, inbox, patch, policy, proposals, snapshot, team  # noqa: F401

    return [getattr(sys.modules[f"fleet.cli.{module}"], name) for module, name, _words in LAZY_GROUPS]


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

