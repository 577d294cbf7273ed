""""Audit degraded" across processes: a process that cannot append shows on the dashboard another process
serves, and its gap is recorded once appending works again — by itself, or by the next process that appends
when it ended first. The failing process is real: its file-size limit is the "disk full" (RLIMIT_FSIZE bites
for root too, where a chmod would not)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from fleet.audit.degraded import FOLDER
from fleet.audit.verify import verify_log
from fleet.index.scan import scan
from fleet.index.store import open_index
from tests.fleets.audit_log import read_lines
from tests.fleets.cli import fleetdeck_env
from tests.fleets.gitbuild import init_repo
from tests.fleets.mcp_fleet import ok
from tests.fleets.serving import Server

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent("""
    import json, os, resource, sys
    from fleet import audit
    log = audit.setup(sys.argv[1])
    log.record("tool_call", tool="fleet.repos", agent="child", summary="before")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(log.dir / "current.jsonl"), hard))  # disk full
    lost = [log.record("tool_call", tool="fleet.repos", agent="child", summary=f"lost {i}") for i in range(3)]
    assert lost == [None, None, None], lost
    print(json.dumps({"pid": os.getpid()}), flush=True)
    if sys.stdin.readline().strip() == "recover":
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))                                   # space again
        assert log.record("tool_call", tool="fleet.repos", agent="child", summary="after") is not None
        print("recovered", flush=True)
        sys.stdin.readline()
""")


def _fleet(tmp_path):
    root = tmp_path / "fleet"
    init_repo(root / "alpha", commits=1)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return root, db


def _child(db) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=fleetdeck_env())
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return proc, json.loads(line)["pid"]


def _page(server: Server, path: str = "/") -> str:
    answer = httpx2.get(server.base + path, headers=server.auth, timeout=60)
    assert answer.status_code == 200, answer.status_code
    return answer.text


def _gaps(folder) -> list[dict]:
    return [e for e in (json.loads(line) for line in read_lines(folder / "current.jsonl")[1:]) if e["event"] == "gap"]


def test_a_degraded_process_shows_on_another_process_dashboard_until_its_gap_is_written(tmp_path):
    root, db = _fleet(tmp_path)
    server = Server(db, [root], ["--no-watch"])
    try:
        child, pid = _child(db)
        for path in ("/", "/agents", "/audit"):
            page = _page(server, path)
            assert f"Audit degraded in process {pid}</strong> (<code>python</code>): 3 entries" in page, path
        child.stdin.write("recover\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "recovered"
        assert "Audit degraded" not in _page(server)
        child.stdin.write("done\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0, child.stderr.read()
    finally:
        server.stop()
    (gap,) = _gaps(tmp_path / "audit")
    assert gap["summary"].startswith("3 entries could not be appended") and "which ended" not in gap["summary"]
    assert list((tmp_path / FOLDER).glob("*.json")) == []
    assert verify_log(tmp_path / "audit").ok


async def test_the_gap_of_a_process_that_ended_degraded_is_written_by_the_next_append(tmp_path):
    root, db = _fleet(tmp_path)
    server = Server(db, [root], ["--no-watch"])
    try:
        child, pid = _child(db)
        child.stdin.write("exit\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0, child.stderr.read()
        page = _page(server)
        assert f"Audit degraded in process {pid}</strong> (<code>python</code>, ended)" in page
        assert "the next append records its gap" in page
        async with httpx2.AsyncClient(headers=server.auth, timeout=60) as http, \
                Client(streamable_http_client(server.base + "/mcp", http_client=http),
                       client_info=Implementation(name="via-serve", version="1")) as client:
            ok(await client.call_tool("fleet.repos", {}))
            ok(await client.call_tool("fleet.repos", {}))
        assert "Audit degraded" not in _page(server)
    finally:
        server.stop()
    (gap,) = _gaps(tmp_path / "audit")
    assert gap["summary"].startswith("3 entries could not be appended between")
    assert f"by process {pid}" in gap["summary"]
    assert "ended before it could record this gap" in gap["summary"]
    assert list((tmp_path / FOLDER).glob("*.json")) == []
    assert verify_log(tmp_path / "audit").ok
