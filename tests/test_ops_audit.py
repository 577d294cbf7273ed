"""The write side in the audit log: every state a proposal enters is one entry, decisions carry who decided."""

from __future__ import annotations

import json

from fleet import audit
from fleet.ops import service


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
                    ("proposal.executing", None, None), ("proposal.completed", None, None)]
    theirs = [(e["event"], e.get("decision"), e.get("actor")) for e in entries(index)
              if e["proposal_id"] == other["proposal_id"]]
    assert theirs[-1] == ("proposal.rejected", "rejected", "dashboard")
    first = next(e for e in entries(index) if e["proposal_id"] == made["proposal_id"])
    assert first["agent"]["name"] == "claude-code" and first["op"] == "stage" and first["risk"]
    assert work not in json.dumps(first)  # the repo is a fingerprint, never the path
