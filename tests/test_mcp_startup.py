"""`fleetdeck mcp` answers `initialize` before it imports what only tools need, and then imports only what
each request needs: with the tool definitions cached (mcp_bridge/catalog.py), tools/list loads no tool
module; a call loads its own tool's module; the write side loads only with a call that uses it. Checked on
the real CLI with `python -X importtime` (each import is one line on stderr), with control runs that must
see those modules load (so the checks can fail): a tools/list without a cache loads every tool module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fleets.cli import fleetdeck_env
from tests.fleets.dashboard_fleet import indexed_fleet

# Heavy modules made lazy (imports and tool schemas: most of a connect after the SDK's own import).
WITH_TOOLS = ("mcp_bridge.toolkit", "mcp_bridge.models", "mcp_bridge.tools_fleet", "mcp_bridge.tools_git",
              "mcp_bridge.tools_ops", "mcp_bridge.tools_patch", "mcp_bridge.tools_audit", "fleet.patch.generate",
              "fleet.repo.history", "fleet.repo.diffs", "fleet.views.queue")
WRITE_SIDE = ("fleet.ops.service", "fleet.ops.restore", "fleet.ops.coreops")
LAZY = WITH_TOOLS + WRITE_SIDE

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "startup-test", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
STATUS = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
          "params": {"name": "operation.status", "arguments": {"proposal_id": "p-no-such-proposal"}}}
REPOS = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "fleet.repos", "arguments": {"limit": 1}}}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    base = tmp_path_factory.mktemp("startup")
    index, _repos = indexed_fleet(base)
    index.close()
    return base / "fleet.db"


def session(db, *requests: dict, **env: str) -> tuple[list[dict], set[str]]:
    """Run `fleetdeck mcp` under `-X importtime`: send `initialize`, wait for its answer, then `requests`
    (answers awaited for those with an id), close stdin. Returns (every stdout line as JSON, modules imported)."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "fleet", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=fleetdeck_env(FLEETDECK_DB=str(db), **env))
    try:
        replies = []
        for request in (INITIALIZE, *requests):
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            if "id" in request:
                replies.append(json.loads(proc.stdout.readline()))
        rest, err = proc.communicate(timeout=60)  # closes stdin: the bridge ends
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    replies += [json.loads(line) for line in rest.splitlines()]  # stdout is protocol only: every line JSON
    modules = {line.split("|")[2].strip() for line in err.splitlines()
               if line.startswith("import time:") and line.count("|") == 2}
    return replies, modules


@pytest.mark.slow
def test_initialize_is_answered_before_the_tools_are_imported(db) -> None:
    replies, modules = session(db, INITIALIZED)
    assert [r["id"] for r in replies] == [1] and replies[0]["result"]["serverInfo"]["name"] == "fleetdeck"
    assert "mcp_bridge.server" in modules and "mcp.server.lowlevel.server" in modules  # the log is read right
    early = sorted(m for m in LAZY if m in modules)
    assert not early, f"imported before initialize was answered: {early}"


@pytest.mark.slow
def test_tools_list_from_the_cache_imports_no_tool_module_and_a_call_only_its_own(db, tmp_path) -> None:
    """Without a cache (the control) the first tools/list loads every tool module but not the write side; with
    the cache it loads none; a read call loads its own module; a write-side call the write side."""
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    replies, modules = session(db, INITIALIZED, LIST_TOOLS, **cache)
    assert [r["id"] for r in replies] == [1, 2]
    names = [tool["name"] for tool in replies[1]["result"]["tools"]]
    assert {"fleet.radar", "repo.brief", "operation.preview.stage", "patch.generate", "audit.tail"} <= set(names)
    assert set(WITH_TOOLS) <= modules, sorted(set(WITH_TOOLS) - modules)
    assert not set(WRITE_SIDE) & modules, sorted(set(WRITE_SIDE) & modules)
    cold = replies[1]["result"]
    replies, modules = session(db, INITIALIZED, LIST_TOOLS, **cache)
    assert replies[1]["result"] == cold
    assert "mcp_bridge.catalog" in modules
    kit = {"mcp_bridge.toolkit", "mcp_bridge.tools_audit"}  # what audits every call: made by any request
    early = sorted(m for m in LAZY if m in modules and m not in kit)
    assert not early, f"imported by a tools/list from the cache: {early}"
    replies, modules = session(db, INITIALIZED, LIST_TOOLS, REPOS, **cache)
    assert not replies[2]["result"]["isError"]
    assert {"mcp_bridge.tools_fleet", "mcp_bridge.models"} <= modules
    assert not {"mcp_bridge.tools_git", "mcp_bridge.tools_patch", "mcp_bridge.tools_ops", *WRITE_SIDE} & modules
    assert not {"fleet.index.scan", "pygit2"} & modules  # the scanner loads only for a call's `refresh`
    replies, modules = session(db, INITIALIZED, LIST_TOOLS, STATUS, **cache)
    assert replies[2]["result"]["isError"] and "p-no-such-proposal" in replies[2]["result"]["content"][0]["text"]
    assert set(WRITE_SIDE) <= modules, sorted(set(WRITE_SIDE) - modules)


def test_an_unusable_audit_key_still_stops_the_bridge_before_it_answers(db, tmp_path) -> None:
    """Registering late must not open late: the audit log (and a configured key) is checked at start."""
    run = subprocess.run([sys.executable, "-m", "fleet", "mcp"], input=json.dumps(INITIALIZE) + "\n",
                         capture_output=True, text=True, timeout=60,
                         env=fleetdeck_env(FLEETDECK_DB=str(db), FLEETDECK_AUDIT_KEY=str(tmp_path / "nope.pem")))
    assert run.returncode == 1 and "AUDIT_KEY" in run.stderr and run.stdout == ""
