"""The write side in the audit log: every state a proposal enters is one entry, decisions carry who decided."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from fleet import audit
from fleet.audit.verify import verify_log
from fleet.errors import FleetError
from fleet.ops import proposals, service
from tests.fleets.cli import fleetdeck_env


def entries(index) -> list[dict]:
    log = audit.setup(index.path)
    out = []
    for seg in sorted(log.dir.glob("*.jsonl")):
        out += [json.loads(line) for line in seg.read_text().splitlines() if line.startswith("{")]
    return [e for e in out if str(e.get("event", "")).startswith("proposal.")]


def test_propose_approve_execute_and_reject_are_audited(ops_fleet):  # noqa: F811
    index, work = ops_fleet["index"], str(ops_fleet["work"])
    made = service.propose(index, "claude-code", "stage", work, {"paths": ["README.md"]}, "stage the edit")
    service.approve(index, made["proposal_id"], "cli")
    other = service.propose(index, "codex", "stage", work, {"paths": ["notes.txt"]}, "stage notes")
    service.reject(index, other["proposal_id"], "dashboard", "not now")
    mine = [(e["event"], e.get("decision"), e.get("actor")) for e in entries(index)
            if e["proposal_id"] == made["proposal_id"]]
    assert mine == [("proposal.pending", None, None), ("proposal.approved", "approved", "cli"),
                    ("proposal.executing", None, "fleetdeck"), ("proposal.completed", None, "fleetdeck")]
    ran = [e["summary"] for e in entries(index) if e["proposal_id"] == made["proposal_id"]][-1]
    assert ran == "stage proposal completed (run by fleetdeck: cli approved it)"  # the server ran it, not the agent
    theirs = [(e["event"], e.get("decision"), e.get("actor")) for e in entries(index)
              if e["proposal_id"] == other["proposal_id"]]
    assert theirs[-1] == ("proposal.rejected", "rejected", "dashboard")
    first = next(e for e in entries(index) if e["proposal_id"] == made["proposal_id"])
    assert first["agent"]["name"] == "claude-code" and first["op"] == "stage" and first["risk"]
    assert work not in json.dumps(first)  # the repo is a fingerprint, never the path


def _expired_entries(index) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for e in entries(index):
        if e["event"] == "proposal.expired":
            found.setdefault(e["proposal_id"], []).append(e)
    return found


def _overdue(index, ids: list[str]) -> None:
    """The deadline of real proposals passes (as the clock would move it)."""
    with index.write() as conn:
        conn.executemany("update proposals set expires_at = ? where id = ?", [(time.time() - 1, p) for p in ids])


def test_expiry_is_one_entry_per_proposal_with_the_expiry_as_actor(ops_fleet):
    index, work = ops_fleet["index"], str(ops_fleet["work"])
    made = [service.propose(index, "claude-code", "stage", work, {"paths": ["README.md"]}, f"stage {i}")["proposal_id"]
            for i in range(3)]
    _overdue(index, made[:2])
    assert proposals.list_proposals(index, status="expired")["total"] == 2
    proposals.get(index, made[0])        # reading again expires nothing more, writes nothing more
    proposals.list_proposals(index)
    expired = _expired_entries(index)
    assert sorted(expired) == sorted(made[:2]) and all(len(v) == 1 for v in expired.values())
    entry = expired[made[0]][0]
    assert (entry["actor"], entry["op"], entry["result"], entry["decision"]) == ("expiry", "stage", "ok", None)
    assert entry["agent"]["name"] == "claude-code" and entry["risk"]
    assert proposals.get(index, made[2])["status"] == "pending" and made[2] not in expired


def test_an_expiry_rolled_back_with_its_transaction_writes_no_entry(ops_fleet):
    index, work = ops_fleet["index"], str(ops_fleet["work"])
    made = service.propose(index, "claude-code", "stage", work, {"paths": ["README.md"]}, "stage")["proposal_id"]
    _overdue(index, [made])
    with pytest.raises(FleetError):      # the transaction that expired it fails: the expiry never happened
        proposals.transition(index, "p-nosuchthing", ("pending",), "approved")
    assert made not in _expired_entries(index)
    assert proposals.get(index, made)["status"] == "expired"
    assert len(_expired_entries(index)[made]) == 1


EXPIRE_CHILD = textwrap.dedent("""
    import sys, time
    from fleet.index.store import open_index
    from fleet.ops import proposals
    index = open_index(sys.argv[1])
    start = float(sys.argv[2])
    time.sleep(max(0.0, start - time.time()))   # all processes expire at the same moment
    proposals.list_proposals(index)
    index.close()
""")


@pytest.mark.slow
def test_processes_expiring_at_once_write_one_entry_per_proposal(ops_fleet):
    index, work = ops_fleet["index"], str(ops_fleet["work"])
    made = [service.propose(index, agent, "stage", work, {"paths": ["README.md"]}, f"stage {i}")["proposal_id"]
            for i in range(6) for agent in ("claude-code", "codex")]
    _overdue(index, made)
    start = time.time() + 3
    procs = [subprocess.Popen([sys.executable, "-c", EXPIRE_CHILD, str(ops_fleet["db"]), str(start)],
                              env=fleetdeck_env(), stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    expired = _expired_entries(index)
    assert sorted(expired) == sorted(made)
    assert all(len(v) == 1 and v[0]["actor"] == "expiry" for v in expired.values())
    assert verify_log(audit.setup(index.path).dir, {}).ok
