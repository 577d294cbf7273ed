"""`fleetdeck patch generate|inspect|remove|validate`: unified diffs from structured changes, JSON in and out
(the same JSON the MCP `patch.*` tools return)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from fleet.cli.args import bounded
from fleet.cli.output import emit_json
from fleet.errors import FleetError


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


def add_parsers(sub: argparse._SubParsersAction) -> None:
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

