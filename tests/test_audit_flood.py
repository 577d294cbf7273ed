"""A refusal flood cannot erase the record of a decision: pruning keeps every segment younger than the
retention age whatever `segments_kept` says, and tool calls that no credential authenticated are folded into
one counted entry per window (a real `fleetdeck serve` and unauthenticated POSTs to `/mcp`)."""

from __future__ import annotations

import json
import time

import httpx2
import pytest

from fleet.audit import ledger
from fleet.audit.fold import Folds
from fleet.audit.verify import verify_log
from fleet.index.scan import scan
from fleet.index.store import open_index
from tests.fleets.audit_log import files, make_log, read_lines
from tests.fleets.gitbuild import init_repo
from tests.fleets.serving import Server


def _all(folder) -> list[dict]:
    out = []
    for path in files(folder):
        out += [e for e in map(json.loads, read_lines(path)) if "seq" in e]
    return out


def _approval(log) -> dict:
    return log.record("proposal.approved", op="reset", proposal_id="p-selfapproved", decision="approved",
                      actor="dashboard", risk="high", summary="reset proposal approved")


def _refusals(log, count: int) -> None:
    for i in range(count):
        log.record("tool_call", tool="fleet.repos", args={"n": i}, result="UNAUTHORIZED",
                   summary="fleet.repos refused over HTTP: UNAUTHORIZED")


def test_a_flood_of_entries_cannot_prune_a_recent_decision(tmp_path):
    log = make_log(tmp_path, segment_max_bytes=8 * 1024, segments_kept=1)     # retention: the default 90 days
    approved = _approval(log)
    _refusals(log, 600)
    log.close()
    assert approved["seq"] in {e["seq"] for e in _all(log.dir)}
    assert not (log.dir / "checkpoint.json").exists()
    assert verify_log(log.dir).ok


def test_segments_older_than_the_retention_age_are_still_pruned(tmp_path, monkeypatch):
    long_ago = ledger.now_iso
    monkeypatch.setattr(ledger, "now_iso", lambda: "2020-01-01T00:00:00Z")    # written long before retention
    log = make_log(tmp_path, segment_max_bytes=8 * 1024, segments_kept=1, retention_days=30)
    old = _approval(log)
    _refusals(log, 100)
    monkeypatch.setattr(ledger, "now_iso", long_ago)
    _refusals(log, 200)
    log.close()
    kept = {e["seq"] for e in _all(log.dir)}
    assert old["seq"] not in kept and json.loads((log.dir / "checkpoint.json").read_text())["seq"] >= old["seq"]
    assert verify_log(log.dir).ok


def test_folds_count_a_window_and_open_the_next():
    now = [0.0]
    folds = Folds(window_s=60, clock=lambda: now[0], now_iso=lambda: f"t{now[0]:.0f}")
    assert folds.admit("k", "UNAUTHORIZED") is True
    assert [folds.admit("k", code) for code in ("UNAUTHORIZED", "HOST_REFUSED", "UNAUTHORIZED")] == [False] * 3
    assert folds.due() == [] and not folds.has_due()
    now[0] = 61
    assert folds.has_due()
    assert folds.admit("k", "UNAUTHORIZED") is True                             # a new window, its own entry
    (counted,) = folds.due()
    assert (counted["count"], counted["result"], counted["since"], counted["until"]) == (3, "UNAUTHORIZED", "t0", "t0")
    assert "UNAUTHORIZED x2, HOST_REFUSED x1" in counted["summary"]
    assert folds.due(final=True) == []                                         # the open window counted nothing


@pytest.mark.slow
def test_unauthenticated_refusals_over_http_are_folded(tmp_path):
    root = tmp_path / "fleet"
    init_repo(root / "alpha", commits=1)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    server = Server(db, [root], ["--no-watch"])
    flood = 40                                   # one recorded, 39 counted: unfolded, 40 entries
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fleet.repos", "arguments": {}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        started = time.monotonic()
        with httpx2.Client(timeout=60) as raw:
            codes = {raw.post(server.base + "/mcp", headers=headers, json=body).status_code for _ in range(flood)}
            authed = raw.post(server.base + "/mcp", headers={**headers, **server.auth, "Host": "evil.example"},
                              json=body)
        assert codes == {401} and authed.status_code == 421
        assert time.monotonic() - started < 60
    finally:
        server.stop()
    entries = _all(tmp_path / "audit")
    refused = [e for e in entries if e["event"] == "tool_call" and e["result"] == "UNAUTHORIZED"]
    counted = [e for e in entries if e["event"] == "calls_folded"]
    assert len(refused) == 1
    assert sum(e["count"] for e in counted) == flood                           # the Host refusal is counted too
    assert len(counted) <= 2 and all(e["actor"] == "fleetdeck" for e in counted)
    assert verify_log(tmp_path / "audit").ok
