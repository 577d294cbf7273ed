"""`fleetdeck patch generate|inspect|remove|validate`: the patch-authoring functions on the command line.

Each command prints the same JSON the MCP tools return (or `{"error": {code, message}}` with exit 1), so
scripts and agents see one shape; `validate` also exits 1 when the patch is not valid. Relative paths are resolved against the current directory here; the
functions below take absolute paths only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable

from fleet.errors import FleetError
from fleet.patchfile import MAX_PATCH_BYTES, WRITE_MODES, inspect_patch, remove_patch_entries, validate_patch
from fleet.patchgen import generate_patch


def add_patch_commands(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `patch` and its four subcommands; each sets `func(args) -> exit code`."""
    patch = subparsers.add_parser("patch", help="author unified diffs from structured changes")
    sub = patch.add_subparsers(dest="patch_command", required=True, metavar="{generate,inspect,remove,validate}")

    gen = sub.add_parser("generate", help="structured changes (JSON) -> one unified diff")
    gen.add_argument("--repo", default=".", help="top of the git work tree (default: current directory)")
    gen.add_argument("--changes", default="-", help="JSON file with a list of changes, or - for stdin")
    gen.add_argument("--context-lines", type=int, default=3, help="lines of context, 1..20 (default 3)")
    gen.add_argument("--patch-file", help="store the entries in this .patch/.diff file")
    gen.add_argument("--write-mode", choices=WRITE_MODES, default="append")
    gen.add_argument("--no-check", action="store_true", help="skip git apply --check")
    gen.add_argument("--raw", action="store_true", help="print the patch text instead of JSON")
    gen.set_defaults(func=_guard(_generate))

    ins = sub.add_parser("inspect", help="list a patch file's entries")
    ins.add_argument("patch_file")
    ins.set_defaults(func=_guard(lambda a: inspect_patch(_abs(a.patch_file))))

    rem = sub.add_parser("remove", help="remove entries from a patch file")
    rem.add_argument("patch_file")
    rem.add_argument("--path", action="append", default=[], help="remove the entries holding PATH (repeatable)")
    rem.add_argument("--index", action="append", type=int, default=[], help="remove entry #INDEX (repeatable)")
    rem.set_defaults(func=_guard(lambda a: remove_patch_entries(_abs(a.patch_file), a.path or None,
                                                                a.index or None)))

    val = sub.add_parser("validate", help="parse a patch and optionally git apply --check it")
    val.add_argument("patch_file", help="a .patch/.diff file, or - for stdin")
    val.add_argument("--repo", help="also run git apply --check in this work tree")
    val.set_defaults(func=_guard(_validate))
    return patch


def _abs(path: str) -> str:
    return os.path.abspath(path)


def _guard(command: Callable[[argparse.Namespace], dict | str]) -> Callable[[argparse.Namespace], int]:
    """Print the command's result (JSON, or raw text) and turn a FleetError into a JSON error and exit 1."""
    def run(args: argparse.Namespace) -> int:
        try:
            result = command(args)
        except FleetError as exc:
            print(json.dumps({"error": exc.as_dict()}, ensure_ascii=False))
            return 1
        if isinstance(result, str):
            sys.stdout.write(result)
            return 0
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0 if result.get("valid", True) else 1
    return run


def _read_input(source: str, what: str) -> str:
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


def _generate(args: argparse.Namespace) -> dict | str:
    try:
        changes = json.loads(_read_input(args.changes, "changes"))
    except json.JSONDecodeError as exc:
        raise FleetError("BAD_ARGUMENT", f"changes are not valid JSON: {exc}") from None
    if isinstance(changes, dict) and set(changes) == {"changes"}:
        changes = changes["changes"]
    result = generate_patch(_abs(args.repo), changes, context_lines=args.context_lines,
                            patch_file=_abs(args.patch_file) if args.patch_file else None,
                            write_mode=args.write_mode, check=not args.no_check)
    return result["patch"] if args.raw else result


def _validate(args: argparse.Namespace) -> dict:
    repo = _abs(args.repo) if args.repo else None
    if args.patch_file == "-":
        return validate_patch(patch=_read_input("-", "patch"), repo=repo)
    return validate_patch(patch_file=_abs(args.patch_file), repo=repo)
