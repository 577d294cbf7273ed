"""The MCP contract as bytes: `tools/list` (every tool's name, title, description, annotations, inputSchema and
outputSchema) and a set of tool results, through the official client, against golden files captured before
the models and op arguments were derived from fleet/ (issue 24). A change to either is a contract change:
regenerate with FLEETDECK_WRITE_GOLDEN=1 only when it is meant, and say so in CHANGELOG.md.

Results are normalised only where a run must differ: the fleet's temp folder becomes `<ROOT>`, and the values
of clock-bound keys (VOLATILE) become `<T>`; everything else, shas included (the fleet is built here on
gitbuild's fixed clock), is compared as it is."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest

from mcp_bridge.server import build_server
from tests.fleets import gitbuild, mcp_fleet

GOLDEN = Path(__file__).parent / "golden"
WRITE = os.environ.get("FLEETDECK_WRITE_GOLDEN") == "1"
VOLATILE = {"indexed_at", "age_s", "heartbeat_age_s", "expires_at", "last_activity", "first_seen", "last_seen",
            "snapshot_at", "scanned_at", "proposal_id", "approve_url", "next_action", "mtime", "since"}
GOLDEN_CLOCK = 1_760_000_000
# (tool, arguments): read answers of every per-repo shape, and the write side's previews (nothing stored).
CALLS: list[tuple[str, dict]] = [
    ("repo.brief", {"repo": "alpha"}),
    ("repo.status", {"repo": "dirty"}),
    ("repo.changes", {"repo": "dirty"}),
    ("repo.history", {"repo": "alpha", "limit": 3}),
    ("repo.reflog", {"repo": "alpha", "limit": 3}),
    ("repo.refs", {"repo": "alpha"}),
    ("commit.details", {"repo": "alpha", "rev": "HEAD"}),
    ("diff.refs", {"repo": "beta", "base": "origin/main", "head": "main"}),
    ("diff.text", {"repo": "dirty"}),
    ("repo.blame", {"repo": "alpha", "file": "src/app.py"}),
    ("repo.conflict_preflight", {"repo": "conflicted", "target": "main", "source": "topic"}),
    ("conflict.read", {"repo": "conflicted"}),
    ("worktree.list", {"repo": "alpha"}),
    ("submodule.status", {"repo": "super"}),
    ("stash.list", {"repo": "dirty"}),
    ("repo.branch_stack", {"repo": "alpha", "branch": "feature/login"}),
    ("repo.scope", {"repo": "alpha"}),
    ("diff.semantic", {"repo": "alpha", "base": "HEAD~1", "head": "HEAD"}),
    ("repo.history", {"repo": "alpha", "ref": "v1", "limit": 2}),
    ("operation.preview.stage", {"repo": "dirty", "reason": "golden", "all": True, "dry_run": True}),
    ("operation.preview.commit", {"repo": "dirty", "reason": "golden", "message": "m", "dry_run": True}),
    ("operation.preview.branch", {"repo": "alpha", "reason": "golden", "name": "golden", "dry_run": True}),
    ("operation.preview.checkout", {"repo": "alpha", "reason": "golden", "ref": "feature/login",
                                    "dry_run": True}),
    ("operation.preview.stash", {"repo": "dirty", "reason": "golden", "dry_run": True}),
    ("operation.preview.reset", {"repo": "alpha", "reason": "golden", "target": "HEAD~1", "dry_run": True}),
    ("operation.preview.discard", {"repo": "dirty", "reason": "golden", "paths": ["README.md"], "dry_run": True}),
    ("operation.preview.merge", {"repo": "alpha", "reason": "golden", "source": "feature/login",
                                 "dry_run": True}),
    ("operation.preview.push", {"repo": "beta", "reason": "golden", "dry_run": True}),
    ("operation.preview.branch_delete", {"reason": "golden", "targets": [{"repo": "alpha", "branches": ["nope"]}],
                                         "dry_run": True}),
    ("operation.preview.plan", {"repo": "dirty", "reason": "golden", "dry_run": True, "steps": [
        {"op": "stage", "args": {"paths": ["notes.txt"]}}, {"op": "commit", "args": {"message": "m"}}]}),
    ("operation.preview.stage", {"repo": "dirty", "reason": "golden", "dry_run": True}),
    ("operation.preview.unstage", {"repo": "dirty", "reason": "golden", "paths": ["nope"], "extra": 1,
                                   "dry_run": True}),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict[str, Path]:
    """The MCP fleet built here, on gitbuild's clock from its start: every sha the same in every run (the
    session's shared template is built at whatever the clock reads when a first test asks for it)."""
    now = gitbuild._CLOCK[0]
    gitbuild._CLOCK[0] = GOLDEN_CLOCK
    try:
        return mcp_fleet._build(tmp_path_factory.mktemp("golden"))
    finally:
        gitbuild._CLOCK[0] = max(now, gitbuild._CLOCK[0])


@pytest.fixture(scope="module")
def server(fleet):
    return build_server(str(fleet["_db"]))


def _json(value: object) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if WRITE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    golden = path.read_text(encoding="utf-8")
    if golden != text:
        diff = difflib.unified_diff(golden.splitlines(), text.splitlines(), "golden", "now", lineterm="", n=2)
        raise AssertionError(f"{name} differs from its golden file:\n" + "\n".join(list(diff)[:60]))


def _normalised(value: object, root: str) -> object:
    if isinstance(value, dict):
        return {k: "<T>" if k in VOLATILE and v is not None else _normalised(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "<ROOT>")
    return value


@pytest.mark.slow
async def test_tools_list_is_byte_for_byte_the_golden_one(server):
    from mcp import Client

    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    listed = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
    _check("mcp_tools_list.json", _json(listed))


@pytest.mark.slow
async def test_tool_results_are_the_golden_ones(server, fleet):
    from mcp import Client

    root = str(fleet["_root"].resolve())
    answers = []
    async with Client(server) as client:
        for tool, args in CALLS:
            result = await client.call_tool(tool, args)
            assert json.loads(result.content[0].text) == result.structured_content
            answers.append({"tool": tool, "args": args, "is_error": result.is_error,
                            "answer": _normalised(result.structured_content, root)})
    _check("mcp_tool_results.json", _json(answers))
