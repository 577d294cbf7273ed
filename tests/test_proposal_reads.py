"""Reading proposals takes no write lock, and an approval takes few write transactions (real SQLite, counted
with sqlite3's trace callback on every connection the process opens).

A dashboard polls the proposals list and a proposal's page; each read used to be a write transaction (it
expired what was due first), so polling queued behind the scanner's writes and an approval took a dozen.
Expiry is now one sweep that runs only when something is due; a read of nothing due writes nothing.
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from fleet.errors import FleetError
from fleet.ops import proposals, service
from tests.fleets.ops_fleet import propose
from tests.test_ops_audit import entries

WRITE_BEGINS = ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE")


@pytest.fixture
def writes(ops_fleet, monkeypatch):
    """A list that gets every write transaction begun from now on, on any connection of this process."""
    seen: list[str] = []

    def trace(sql: str) -> None:
        if sql.strip().upper().startswith(WRITE_BEGINS):
            seen.append(sql)

    connect = sqlite3.connect

    def traced(*args, **kwargs):
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    ops_fleet["index"].conn.set_trace_callback(trace)
    return seen


def _reads(index, proposal_id: str) -> None:
    """What a dashboard's polling and an agent's `operation.status` read."""
    proposals.get(index, proposal_id)
    proposals.list_proposals(index)
    proposals.list_proposals(index, status="pending")
    proposals.page(index, limit=10)
    proposals.change_stamp(index)
    proposals.orphaned_approved(index)
    service.show(index, proposal_id)


def test_reading_proposals_with_nothing_due_writes_nothing(ops_fleet, writes):
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    writes.clear()
    _reads(ops_fleet["index"], made["proposal_id"])
    assert writes == []


def test_reads_go_on_while_another_process_holds_the_write_lock(ops_fleet, tmp_path):
    """The scanner (here: another connection) holds the write lock; the dashboard's reads still answer."""
    index = ops_fleet["index"]
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    other = sqlite3.connect(str(ops_fleet["db"]), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with index.busy_timeout(50):
            _reads(index, made["proposal_id"])
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_an_approval_takes_few_write_transactions(ops_fleet, writes):
    """Approve and run a `stage`: approved, executing, the restore point, its link, the state after, the
    result, the index refresh (its store and its events) each commit once, and no read adds one (it took 10
    when each read was a write transaction)."""
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    writes.clear()
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed"
    assert len(writes) <= 8, writes


def test_a_due_expiry_is_one_sweep_and_one_audit_entry(ops_fleet, writes):
    index = ops_fleet["index"]
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})["proposal_id"]
    with index.write() as conn:
        conn.execute("update proposals set expires_at = ? where id = ?", (time.time() - 1, made))
    writes.clear()
    _reads(index, made)
    _reads(index, made)
    assert len(writes) == 1     # the first read expired it; the others found nothing due
    assert proposals.get(index, made)["status"] == "expired"
    assert [e["event"] for e in entries(index) if e.get("proposal_id") == made].count("proposal.expired") == 1
    with pytest.raises(FleetError):
        service.approve(index, made, "cli")
