"""`fleetdeck demo` shows the write side: the demo's agents leave pending proposals to approve."""

from __future__ import annotations

import pytest

from fleet.demo import DEMO_PROPOSALS, build_demo_fleet, seed_proposals
from fleet.index.store import open_index
from fleet.ops import proposals, service
from tests.fleets.gitbuild import git


@pytest.mark.slow
def test_demo_has_pending_proposals_a_person_can_approve(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    roots = build_demo_fleet(tmp_path / "demo")
    ids = seed_proposals(tmp_path / "fleet.db", roots)
    assert len(ids) == len(DEMO_PROPOSALS)
    with open_index(tmp_path / "fleet.db") as index:
        rows = proposals.list_proposals(index, "pending")["proposals"]
        assert {r["op"] for r in rows} == {"commit", "discard", "submodule_pointer", "merge"}
        assert {r["risk"] for r in rows} == {"medium", "high"}
        commit = next(r for r in rows if r["op"] == "commit")
        done = service.approve(index, commit["id"], "cli")
        assert done["status"] == "completed", done["error"]
    mobile = tmp_path / "demo" / "fleet" / "oss" / "mobile-app"
    assert git(mobile, "log", "-1", "--format=%s").strip() == "Name the package"
