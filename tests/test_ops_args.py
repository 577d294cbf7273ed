"""Each op's string, flag and choice arguments refused in the same words on every surface: the previews read
them through the op's class in fleet/ops/catalog.py (`text`, `flag`, `choice`), so a wrong type, a missing
required argument, one too long or a value outside a Literal gives the code and message pinned here, as the
CLI, the dashboard and MCP callers with arguments the schema does not check (fleet.ops.service.propose)
have always seen. Nothing is written: every call is a dry run, and git's state is compared before and after."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.ops import service
from fleet.ops.model import MAX_MESSAGE
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
    ("rebase", {}, "onto is required"),
    ("push", {"remote": 5}, "remote must be a non-empty string"),
    ("branch_delete", {"merged_only": "no"}, "merged_only must be true or false"),
    ("worktree", {"branch": "x"}, "path is required"),
    ("stage_hunks", {"hunks": ["h"]}, "path is required"),
    ("patch_file_write", {"patch": "x"}, "path is required"),
    ("restore", {"restore_point": "p" * 129}, "restore_point is longer than 128 characters"),
    ("restore", {}, "restore_point is required"),
]


def test_a_bad_argument_is_refused_in_its_declared_words(ops_fleet) -> None:
    """One fleet for every case (a dry run writes nothing): each refusal's code and message, all listed."""
    work = ops_fleet["work"]
    before = state(work)
    wrong = []
    for op, args, message in CASES:
        try:
            service.propose(ops_fleet["index"], "agent-a", op, str(work), args, "why", dry_run=True)
            wrong.append((op, args, "accepted"))
        except FleetError as exc:
            if (exc.code, exc.message) != ("BAD_ARGUMENT", message):
                wrong.append((op, str(args)[:80], exc.code, exc.message))
    assert not wrong
    assert state(work) == before
