"""Each op's arguments refused in the same words on every surface: the previews read them through the op's
class in fleet/ops/catalog.py (strings, flags and choices with `text`, `flag`, `choice`; path lists, hunk ids,
a plan's steps and a clean-up's targets with `items`, numbers with `number`), so a wrong type, a missing
required argument, one too long or too many, a number out of its bounds or a value outside a Literal gives
the code and message pinned here, as callers of fleet.ops.service.propose and MCP callers with arguments
the schema does not check (a plan step's) have always seen. Through MCP each case is either refused by the
published inputSchema (BAD_ARGUMENT, before the preview) or answered in the preview's words; the MCP tools'
arguments are the class's, one for one. Nothing is written: every call is a dry run, and git's state is
compared before and after."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import get_origin, get_type_hints

import jsonschema
import pytest
from mcp import Client
from pydantic import ValidationError, create_model

from fleet.errors import FleetError
from fleet.ops import service
from fleet.ops.catalog import OPS, STEP_OPS, Step, Target, _arg, _members
from fleet.ops.model import MAX_MESSAGE, MAX_PATHS
from mcp_bridge.argtypes import pydantic_type
from mcp_bridge.server import build_server
from tests.fleets.mcp_fleet import error_of, ok
from tests.fleets.ops_fleet import state

CASES = [
    ("merge", {"source": "topic", "mode": "rebase"}, "mode must be merge, squash or ff_only"),
    ("merge", {"source": "topic", "mode": None}, "mode must be merge, squash or ff_only"),
    ("merge", {"source": ""}, "source must be a non-empty string"),
    ("merge", {"source": "topic", "message": 7}, "message must be a non-empty string"),
    ("patch", {"patch": "x", "target": "tree"}, "target must be worktree or index"),
    ("submodule_pointer", {"path": "README.md"}, "action must be record or return"),
    ("submodule_pointer", {"path": "README.md", "action": "move"}, "action must be record or return"),
    ("submodule_pointer", {"action": "record"}, "path is required"),
    ("commit", {}, "message is required"),
    ("commit", {"message": ""}, "message must be a non-empty string"),
    ("commit", {"message": "x" * (MAX_MESSAGE + 1)}, f"message is longer than {MAX_MESSAGE} characters"),
    ("commit", {"message": "m\0"}, "message contains a NUL character"),
    ("commit", {"message": "m", "amend": "yes"}, "amend must be true or false"),
    ("branch", {"name": "x", "start_point": ""}, "start_point must be a non-empty string"),
    ("branch", {"name": "x", "checkout": 1}, "checkout must be true or false"),
    ("branch", {"name": "x" * 4097}, "name is longer than 4096 characters"),
    ("checkout", {}, "ref is required"),
    ("checkout", {"ref": "topic", "detach": "no"}, "detach must be true or false"),
    ("stash", {"message": ""}, "message must be a non-empty string"),
    ("stash", {"include_untracked": None}, "include_untracked must be true or false"),
    ("stage", {"all": "true"}, "all must be true or false"),
    ("discard", {"paths": ["README.md"], "include_untracked": 0}, "include_untracked must be true or false"),
    ("reset", {}, "target is required"),
    ("reset", {"target": "HEAD", "mode": "--hard"}, "mode must be soft, mixed, hard, keep or merge"),
    ("reset", {"target": "HEAD", "mode": None}, "mode must be soft, mixed, hard, keep or merge"),
    ("rebase", {}, "onto is required"),
    ("push", {"remote": 5}, "remote must be a non-empty string"),
    ("branch_delete", {"merged_only": "no"}, "merged_only must be true or false"),
    ("worktree", {"branch": "x"}, "path is required"),
    ("stage_hunks", {"hunks": ["h"]}, "path is required"),
    ("patch_file_write", {"patch": "x"}, "path is required"),
    ("restore", {"restore_point": "p" * 129}, "restore_point is longer than 128 characters"),
    ("restore", {}, "restore_point is required"),
]


# The kinds declared since: path lists (`Paths`; restore_snapshot's literal paths), numbers, hunk ids, a plan's
# steps and a clean-up's targets. Each case: (op, args, code, message).
STEP_LIST = ", ".join(("stage", "unstage", "stage_hunks", "commit", "branch", "checkout", "stash", "merge", "rebase",
                       "discard", "reset", "patch"))
LISTS = [
    ("unstage", {}, "BAD_ARGUMENT", "paths is required (a list of repo-relative paths)"),
    ("discard", {"paths": None}, "BAD_ARGUMENT", "paths is required (a list of repo-relative paths)"),
    ("unstage", {"paths": "README.md"}, "BAD_PATH", "paths must be a non-empty list of repo-relative paths"),
    ("discard", {"paths": []}, "BAD_PATH", "paths must be a non-empty list of repo-relative paths"),
    ("commit", {"message": "m", "paths": [7]}, "BAD_PATH", "paths must be a non-empty list of repo-relative paths"),
    ("commit", {"message": "m", "paths": {"README.md": 1}}, "BAD_PATH",
     "paths must be a non-empty list of repo-relative paths"),
    ("stage", {"paths": ["README.md"] * (MAX_PATHS + 1)}, "LIMIT", f"paths lists more than {MAX_PATHS} paths"),
    ("stage", {"paths": ["README.md", ""]}, "BAD_PATH", "path must be a non-empty string"),
    ("discard", {"paths": ["src/../../x"]}, "BAD_PATH", "path 'src/../../x' has an empty, '.' or '..' component"),
    ("unstage", {"paths": ["/etc/passwd"]}, "BAD_PATH",
     "path '/etc/passwd' is absolute; give a path relative to the repo root"),
    ("commit", {"message": "m", "paths": [".git/config"]}, "BAD_PATH", "path '.git/config' points into a .git directory"),
    ("stage", {"paths": ["out/x"]}, "BAD_PATH", "'out/x' leaves the repo through a symlink"),
    ("stage", {"paths": ["a\nb"]}, "BAD_PATH", "path 'a\\nb' contains control characters ('\\n')"),
    ("stage", {"paths": ["x" * 4097]}, "BAD_PATH", "path is longer than 4096 characters"),
    ("stage", {}, "BAD_ARGUMENT", "stage takes either paths or all: true"),
    ("stash_pop", {"index": -1}, "BAD_ARGUMENT", "index must be an integer 0..10000 (stash@{index})"),
    ("stash_pop", {"index": 10001}, "BAD_ARGUMENT", "index must be an integer 0..10000 (stash@{index})"),
    ("stash_pop", {"index": True}, "BAD_ARGUMENT", "index must be an integer 0..10000 (stash@{index})"),
    ("stash_pop", {"index": 2.5}, "BAD_ARGUMENT", "index must be an integer 0..10000 (stash@{index})"),
    ("stash_pop", {"index": None}, "BAD_ARGUMENT", "index must be an integer 0..10000 (stash@{index})"),
    ("stash_pop", {"index": 3}, "NOT_FOUND", "there is no stash@{3} (0 stash entries)"),
    ("stage_hunks", {"path": "README.md"}, "BAD_ARGUMENT", "hunks must be a non-empty list of hunk ids from repo.changes"),
    ("stage_hunks", {"path": "README.md", "hunks": []}, "BAD_ARGUMENT",
     "hunks must be a non-empty list of hunk ids from repo.changes"),
    ("stage_hunks", {"path": "README.md", "hunks": "h1"}, "BAD_ARGUMENT",
     "hunks must be a non-empty list of hunk ids from repo.changes"),
    ("stage_hunks", {"path": "README.md", "hunks": ["h1", ""]}, "BAD_ARGUMENT",
     "hunks must be a non-empty list of hunk ids from repo.changes"),
    ("stage_hunks", {"path": "README.md", "hunks": [3]}, "BAD_ARGUMENT",
     "hunks must be a non-empty list of hunk ids from repo.changes"),
    ("stage_hunks", {"path": "README.md", "hunks": ["h"] * 501}, "LIMIT", "more than 500 hunks"),
    ("stage_hunks", {"path": "../x", "hunks": 3}, "BAD_PATH", "path '../x' has an empty, '.' or '..' component"),
    ("restore_snapshot", {"snapshot": "abcd", "paths": "x"}, "BAD_PATH", "paths must be a list of repo-relative paths"),
    ("restore_snapshot", {"snapshot": "abcd", "paths": [1]}, "BAD_PATH", "paths must be a list of repo-relative paths"),
    ("restore_snapshot", {"snapshot": "abcd", "paths": ["x"] * (MAX_PATHS + 1)}, "LIMIT",
     f"paths lists more than {MAX_PATHS} paths"),
    ("restore_snapshot", {"snapshot": "abcd", "paths": ["a/../b"]}, "BAD_PATH",
     "paths 'a/../b' has an empty, '.' or '..' component"),
    ("restore_snapshot", {"snapshot": "abcd", "paths": ["/a"]}, "BAD_PATH",
     "paths '/a' is absolute; give a path relative to the repo root"),
    ("restore_snapshot", {"snapshot": "abcd", "paths": []}, "NOT_FOUND", "no snapshots of {work} yet"),
    ("restore_snapshot", {"snapshot": "abcd", "paths": ["src/"]}, "NOT_FOUND", "no snapshots of {work} yet"),
    ("plan", {}, "BAD_ARGUMENT", "steps must be a list of 1..10 {op, args}"),
    ("plan", {"steps": []}, "BAD_ARGUMENT", "steps must be a list of 1..10 {op, args}"),
    ("plan", {"steps": {"op": "stage"}}, "BAD_ARGUMENT", "steps must be a list of 1..10 {op, args}"),
    ("plan", {"steps": [{"op": "stash"}] * 11}, "BAD_ARGUMENT", "steps must be a list of 1..10 {op, args}"),
    ("plan", {"steps": [{"op": "stage", "args": {"all": True}}, 5]}, "BAD_ARGUMENT", "step 2 must be an object {op, args}"),
    ("plan", {"steps": [{"op": "stage", "x": 1}, 5]}, "BAD_ARGUMENT", "step 1 takes no argument 'x'; it takes args, op"),
    ("plan", {"steps": [{"op": "push"}]}, "BAD_ARGUMENT", f"step 1: 'push' cannot be a plan step (allowed: {STEP_LIST})"),
    ("plan", {"steps": [{"args": {}}]}, "BAD_ARGUMENT", f"step 1: None cannot be a plan step (allowed: {STEP_LIST})"),
    ("plan", {"steps": [{"op": "stage", "args": ["README.md"]}]}, "BAD_ARGUMENT", "step 1: args must be an object"),
    ("plan", {"steps": [{"op": "stage", "args": None}]}, "BAD_ARGUMENT", "step 1: args must be an object"),
    ("plan", {"steps": [{"op": "stage"}]}, "BAD_ARGUMENT", "step 1 (stage): stage takes either paths or all: true"),
    ("plan", {"steps": [{"op": "unstage", "args": {"paths": ["a"] * (MAX_PATHS + 1)}}]}, "LIMIT",
     f"step 1 (unstage): paths lists more than {MAX_PATHS} paths"),
    ("branch_delete", {}, "BAD_ARGUMENT", "targets must be a non-empty list of {repo, branches}"),
    ("branch_delete", {"targets": []}, "BAD_ARGUMENT", "targets must be a non-empty list of {repo, branches}"),
    ("branch_delete", {"targets": ["work"]}, "BAD_ARGUMENT", "targets must be a non-empty list of {repo, branches}"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["topic"]}] * 21}, "LIMIT",
     "at most 20 repositories in one clean-up"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["topic"], "tip": "x"}]}, "BAD_ARGUMENT",
     "branch_delete target takes no argument 'tip'; it takes branches, repo"),
    ("branch_delete", {"targets": [{"repo": "work"}]}, "BAD_ARGUMENT",
     "each target needs branches: a non-empty list of branch names"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": "topic"}]}, "BAD_ARGUMENT",
     "each target needs branches: a non-empty list of branch names"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": [1]}]}, "BAD_ARGUMENT",
     "each target needs branches: a non-empty list of branch names"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": [f"b{i}" for i in range(21)]}]}, "LIMIT",
     "at most 20 distinct branches per repository"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["topic", ""]}]}, "BAD_REF",
     "branches must be a non-empty string"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["--delete"]}]}, "BAD_REF",
     "branches must not start with '-': git would read '--delete' as an option"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["topic", "topic"]}]}, "LIMIT",
     "at most 20 distinct branches per repository"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["topic"]}, {"repo": "work", "branches": "x"}]},
     "BAD_ARGUMENT", "each target needs branches: a non-empty list of branch names"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["topic"]}, {"repo": "work", "branches": ["x"]}]},
     "BAD_ARGUMENT", "{work} is named twice in targets"),
    ("branch_delete", {"targets": [{"repo": "work", "branches": ["nope"]}, {"repo": "work", "branches": ["a", "a"]}]},
     "BAD_REF", "no local branch 'nope' in {work}"),
]


def test_a_bad_argument_is_refused_in_its_declared_words(ops_fleet) -> None:
    """One fleet for every case (a dry run writes nothing): each refusal's code and message, all listed."""
    work = _with_escape(ops_fleet["work"])
    before = state(work)
    wrong = []
    for op, args, code, message in _cases(work):
        try:
            service.propose(ops_fleet["index"], "agent-a", op, str(work), args, "why", dry_run=True)
            wrong.append((op, args, "accepted"))
        except FleetError as exc:
            if (exc.code, exc.message) != (code, message):
                wrong.append((op, str(args)[:80], exc.code, exc.message))
    assert not wrong
    assert state(work) == before


def _with_escape(work):
    """The work tree with `out`, a symlink to a folder outside it (a path through it leaves the repository)."""
    outside = work.parent.parent / "outside"
    outside.mkdir(exist_ok=True)
    os.symlink(outside, work / "out")
    return work


def _cases(work) -> list[tuple[str, dict, str, str]]:
    return [(op, args, "BAD_ARGUMENT", message) for op, args, message in CASES] + [
        (op, args, code, message.replace("{work}", str(work))) for op, args, code, message in LISTS]


@pytest.mark.slow
async def test_through_mcp_each_case_is_the_schema_s_refusal_or_the_preview_s_words(ops_fleet) -> None:
    """The real entry point: each case as its `operation.preview.<op>` call (the schema refuses what it
    publishes, the preview words the rest; what pydantic's lax mode coerces into the declared type is not the
    case any more) and, for a step op, as a plan's one step (no schema checks a step's arguments: the
    preview's words, prefixed with the step)."""
    work = _with_escape(ops_fleet["work"])
    before = state(work)
    wrong, schema_refused, worded = [], 0, 0
    async with Client(build_server(str(ops_fleet["db"]))) as client:
        schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        for op, args, code, message in _cases(work):
            tool = f"operation.preview.{op}"
            call = {"reason": "why", "dry_run": True, **args, **({"repo": "work"} if OPS[op].per_repo else {})}
            got = _refusal(await client.call_tool(tool, call))
            if jsonschema.Draft202012Validator(schemas[tool]).is_valid(call):
                worded += 1
                if got != (code, message):
                    wrong.append((tool, str(args)[:80], got))
            elif not _lax_accepts(OPS[op], args):
                schema_refused += 1
                if got[0] != "BAD_ARGUMENT" or not got[1].startswith(f"{tool}: "):
                    wrong.append((tool, str(args)[:80], got))
            # else pydantic's lax mode turns it into a value of the declared type ("yes" a true, 1.0 a 1)
            # before the preview sees it: only a plan step's arguments reach the preview as given
            if op in STEP_OPS:
                step = {"repo": "work", "reason": "why", "dry_run": True, "steps": [{"op": op, "args": args}]}
                got = _refusal(await client.call_tool("operation.preview.plan", step))
                if got != (code, f"step 1 ({op}): {message}"):
                    wrong.append(("plan step", op, str(args)[:80], got))
    assert not wrong, '\n'.join(map(str, wrong))
    assert schema_refused and worded  # both kinds were seen
    assert state(work) == before


def _declared(spec) -> type:
    """The op's declared arguments as one pydantic model, as mcp_bridge.argtypes makes each of them."""
    return create_model(f"{spec.op}Declared", **{name: (pydantic_type(hint), ... if default is ... else default)
                                                 for name, (hint, default) in spec.args().items()})


def _lax_accepts(spec, args: dict) -> bool:
    try:
        _declared(spec).model_validate(args)
        return True
    except ValidationError:
        return False


def _refusal(result) -> tuple[str, str]:
    return error_of(result) if result.is_error else ("accepted", str(result.structured_content)[:200])


async def test_each_preview_tool_takes_exactly_its_class_s_arguments(empty_index) -> None:
    """What `operation.preview.<op>` publishes is its class's declaration and nothing else: the same names in
    the same order, the same required ones, each argument's schema (and the records it refers to) the declared
    type's (mcp_bridge.argtypes.pydantic_type), besides the four every preview tool takes. An argument added to a
    tool by hand, or declared a second time with other bounds, fails here."""
    common = ["reason", "dry_run", "idempotency_key"]
    async with Client(build_server(str(empty_index))) as client:
        tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    for op, spec in OPS.items():
        schema = tools.pop(f"operation.preview.{op}")
        declared = spec.args()
        expected = _declared(spec).model_json_schema()
        published = {k: v for k, v in schema["properties"].items() if k not in [*common, "repo"]}
        assert list(published) == list(declared), op
        assert published == expected.get("properties", {}), op
        assert schema.get("$defs", {}) == expected.get("$defs", {}), op
        assert [k for k in schema["properties"] if k in common or k == "repo"] == (
            ["repo"] if spec.per_repo else []) + common, op
        assert schema["required"] == (["repo"] if spec.per_repo else []) + ["reason"] + [
            name for name, (_, default) in declared.items() if default is ...], op
    assert not [name for name in tools if name.startswith("operation.preview.")]  # no tool without its class


def test_every_list_and_number_declares_its_refusal() -> None:
    """A list or number argument the previews read (`items`, `number`, a record's fields) says in its
    declaration how it is refused; one without words would fail as a defect (RuntimeError) on a bad value."""
    def needs_words(hint) -> bool:
        return any(get_origin(m) is list or m is int for m in _members(hint))

    missing = []
    for op, spec in OPS.items():
        for name, (hint, _) in spec.args().items():
            if needs_words(hint) and _arg(hint).wrong is None:
                missing.append((op, name))
    for record in (Step, Target):
        for name, hint in get_type_hints(record, include_extras=True).items():
            if needs_words(hint) and _arg(hint).wrong is None:
                missing.append((record.__name__, name))
    assert not missing


async def test_every_reset_mode_the_preview_takes_is_published(ops_fleet) -> None:
    """reset's modes are one Literal: the MCP tool takes each mode the preview runs (keep and merge were
    refused by the published schema while plans and other callers could use them), merge at high risk."""
    async with Client(build_server(str(ops_fleet["db"]))) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["operation.preview.reset"]
        assert tool.input_schema["properties"]["mode"]["enum"] == ["soft", "mixed", "hard", "keep", "merge"]
        for mode, risk in (("soft", "medium"), ("mixed", "medium"), ("hard", "high"), ("keep", "medium"),
                           ("merge", "high")):
            made = ok(await client.call_tool("operation.preview.reset", {
                "repo": "work", "reason": "why", "target": "HEAD~1", "mode": mode, "dry_run": True}))
            assert (made["status"], made["preview"]["mode"], made["risk"]) == ("dry_run", mode, risk)


def test_the_docs_op_table_names_every_op_and_its_arguments() -> None:
    """docs/proposals.md's table of operations is written by hand: it has a row for each op of the catalog
    (and no other), and the row names each argument the op's class declares (as `name`, or `name: ...`)."""
    text = (Path(__file__).parent.parent / "docs" / "proposals.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4:
            rows[cells[0].strip("`")] = {re.match(r"\w*", t).group() for t in re.findall(r"`([^`]+)`", cells[1])}
    assert set(rows) == set(OPS)
    unnamed = {op: sorted(set(spec.args()) - rows[op]) for op, spec in OPS.items() if set(spec.args()) - rows[op]}
    assert not unnamed
