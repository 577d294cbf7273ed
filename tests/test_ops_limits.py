"""The write side bounded under load: a proposal's payload is capped (a patch at most 1 MiB, its arguments at
most 2 MiB as stored), so is what one identity keeps pending; proposals that ended long ago leave the index
(their audit entries stay); `/api/proposals` is paged and lists summary rows, never the payloads; and
`proposals reconcile ID --as failed` is a command that succeeded."""

from __future__ import annotations

import json
import time

import pytest
from starlette.testclient import TestClient

from fleet import audit
from fleet.errors import FleetError
from fleet.ops import proposals, service
from fleet.ops.model import MAX_PATCH_BYTES, MAX_PENDING_BYTES
from tests.fleets.cli import run_cli
from tests.fleets.ops_fleet import build
from web.app import create_app

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuv"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    built = build(tmp_path)
    yield built
    built["index"].close()


def new_file_patch(size: int, name: str = "big.txt") -> str:
    """A patch git accepts that adds one file, about `size` bytes long."""
    lines = max(1, size // 33)        # each added line is 33 bytes
    body = "".join(f"+line {i:06d} of a large new file\n" for i in range(lines))
    return (f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n"
            f"@@ -0,0 +1,{lines} @@\n{body}")


def propose_patch(fleet, patch: str, agent: str = "claude-code") -> dict:
    return service.propose(fleet["index"], agent, "patch", str(fleet["work"]), {"patch": patch}, "apply it")


def test_a_patch_over_one_mib_is_refused(fleet):
    with pytest.raises(FleetError) as caught:
        propose_patch(fleet, new_file_patch(int(3.4 * 1024 * 1024)))
    assert caught.value.code == "LIMIT"
    assert proposals.page(fleet["index"])["total"] == 0
    assert len(new_file_patch(MAX_PATCH_BYTES - 4096).encode()) <= MAX_PATCH_BYTES
    assert propose_patch(fleet, new_file_patch(MAX_PATCH_BYTES - 4096))["status"] == "pending"


def test_arguments_over_the_cap_are_refused_before_any_work(fleet):
    with pytest.raises(FleetError) as caught:
        service.propose(fleet["index"], "claude-code", "commit", str(fleet["work"]),
                        {"message": "x" * (3 * 1024 * 1024)}, "commit")
    assert caught.value.code == "LIMIT" and "stored" in caught.value.message


@pytest.mark.slow
def test_what_one_identity_keeps_pending_is_capped_in_bytes(fleet):
    patch = new_file_patch(900 * 1024)
    made = []
    with pytest.raises(FleetError) as caught:
        for i in range(40):
            made.append(propose_patch(fleet, patch))
    assert caught.value.code == "LIMIT" and "bytes" in caught.value.message
    held = fleet["index"].conn.execute("SELECT sum(length(args) + length(preview)) FROM proposals "
                                       "WHERE status = 'pending'").fetchone()[0]
    assert held <= MAX_PENDING_BYTES and len(made) < 20                  # before the count quota (20) bites
    assert propose_patch(fleet, patch, agent="codex")["status"] == "pending"   # another identity's own quota


@pytest.mark.slow
def test_rotating_unauthenticated_names_share_one_byte_quota(fleet):
    """The issue's attack: large proposals under a new declared name each time. Every unauthenticated
    client is one identity (`unknown`), so the names share the 16 MiB."""
    patch = new_file_patch(900 * 1024)
    made = []
    with pytest.raises(FleetError) as caught:
        for i in range(40):
            made.append(propose_patch(fleet, patch, agent=f"unknown:rotating-{i}"))
    assert caught.value.code == "LIMIT" and "bytes" in caught.value.message and len(made) < 20
    stored = fleet["index"].conn.execute("SELECT sum(length(args) + length(preview)) FROM proposals").fetchone()[0]
    assert stored <= MAX_PENDING_BYTES                                 # the index holds at most the quota


def _ended_long_ago(index, ids: list[str], days: float) -> None:
    with index.write() as conn:
        conn.executemany("UPDATE proposals SET finished_at = ? WHERE id = ?",
                         [(time.time() - days * 86400, p) for p in ids])


def test_the_sweep_prunes_what_ended_long_ago_and_keeps_its_audit_entries(fleet):
    index = fleet["index"]
    work = str(fleet["work"])
    rejected = service.propose(index, "codex", "stage", work, {"paths": ["notes.txt"]}, "stage")["proposal_id"]
    service.reject(index, rejected, "cli", "no")
    completed = service.propose(index, "codex", "stage", work, {"paths": ["README.md"]}, "stage")["proposal_id"]
    service.approve(index, completed, "cli")                         # has a restore point: kept for undo
    recent = service.propose(index, "codex", "stage", work, {"paths": ["notes.txt"]}, "again")["proposal_id"]
    service.reject(index, recent, "cli", "not this either")
    pending = service.propose(index, "codex", "stage", work, {"paths": ["notes.txt"]}, "once more")["proposal_id"]
    _ended_long_ago(index, [rejected, completed], 31)
    assert service.sweep(index) == 1
    left = {r["id"] for r in proposals.page(index)["proposals"]}
    assert left == {completed, recent, pending}
    log = audit.setup(index.path)
    trail = [json.loads(line) for path in sorted(log.dir.glob("*.jsonl")) for line in path.read_text().splitlines()]
    assert any(e.get("proposal_id") == rejected and e.get("event") == "proposal.rejected" for e in trail)
    assert any(e.get("event") == "proposals.pruned" and e["summary"].startswith("1 proposals") for e in trail)
    assert service.sweep(index) == 0


def test_api_proposals_is_paged_and_lists_no_payloads(fleet):
    patch = new_file_patch(900 * 1024)
    made = [propose_patch(fleet, patch, agent=f"agent-{i}")["proposal_id"] for i in range(6)]
    with TestClient(create_app(fleet["db"], TOKEN), base_url="http://127.0.0.1:8765") as client:
        first = client.get("/api/proposals?limit=4", headers=BEARER)
        assert first.status_code == 200
        assert len(first.content) < 64 * 1024, len(first.content)
        body = first.json()
        assert body["total"] == 6 and len(body["proposals"]) == 4 and body["next_cursor"]
        row = body["proposals"][0]
        assert not {"args", "preview", "result"} & set(row)
        assert row["summary"].startswith("apply a patch") and row["href"] == f"/api/proposals/{row['id']}"
        rest = client.get("/api/proposals", params={"limit": 4, "cursor": body["next_cursor"]}, headers=BEARER).json()
        assert len(rest["proposals"]) == 2 and rest["next_cursor"] is None
        assert [r["id"] for r in body["proposals"] + rest["proposals"]] == made      # the queue: oldest first
        whole = client.get(row["href"], headers=BEARER).json()["proposal"]
        assert whole["args"]["patch"] == patch
        assert client.get("/api/proposals?limit=0", headers=BEARER).status_code == 400
        assert client.get("/api/proposals?cursor=nonsense", headers=BEARER).json()["error"]["code"] == "BAD_ARGUMENT"


def test_reconcile_as_failed_exits_zero(fleet):
    index = fleet["index"]
    pid = service.propose(index, "codex", "stage", str(fleet["work"]), {"paths": ["README.md"]}, "stage")["proposal_id"]
    with index.write() as conn:            # its executor died mid-run (a pid:start-time no process has)
        conn.execute("UPDATE proposals SET status = 'executing', worker_start = '1:0' WHERE id = ?", (pid,))
    done = run_cli("proposals", "reconcile", pid, "--as", "failed", "--json", db=fleet["db"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "failed"
