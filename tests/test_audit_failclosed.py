"""Audit fails closed for decisions: when the audit log cannot be written, an approval (and the execution it
starts) is refused with AUDIT_UNAVAILABLE, unless the person set `[audit] allow_degraded_writes = true`; and
`fleetdeck audit status` / `audit verify`, run afterwards in other processes, say the log is degraded.

The approving process is a real `fleetdeck proposals approve` whose file-size limit is the audit segment's
current size: its appends fail with EFBIG (RLIMIT_FSIZE bites for root too, where a chmod would not), while
the index and the repository (smaller files) stay writable."""

from __future__ import annotations

import json
import os
import resource
import subprocess

import pytest

from fleet import audit
from fleet.ops import proposals, service
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import build

pytestmark = pytest.mark.slow

PAD_ENTRIES = 9000   # the segment grows past anything the index or git writes in one approval


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    settings = tmp_path / "settings.toml"
    settings.write_text("[approval]\nnoninteractive = true\n[audit]\nsegment_max_bytes = 67108864\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    built = build(tmp_path)
    built["settings"] = settings
    log = audit.setup(built["db"])
    for i in range(PAD_ENTRIES):
        log.record("tool_call", tool="fleet.repos", agent="padding", args={"n": i}, summary="padding")
    log.sync()
    yield built
    built["index"].close()


def _cli(fleet, *args: str, fsize: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return run_cli(*args, db=fleet["db"], preexec_fn=limit, process=True)  # its own file size limit


def _full(fleet) -> int:
    """RLIMIT_FSIZE at the audit segment's size: every append to it fails (the disk is "full" for it)."""
    size = os.path.getsize(fleet["db"].parent / "audit" / "current.jsonl")
    assert size > os.path.getsize(fleet["db"]) * 4
    return size


def _stage_proposal(fleet) -> str:
    return service.propose(fleet["index"], "claude-code", "stage", str(fleet["work"]), {"paths": ["README.md"]},
                           "stage the readme")["proposal_id"]


def test_an_approval_with_an_unwritable_audit_log_is_refused_and_status_and_verify_say_degraded(fleet):
    pid = _stage_proposal(fleet)
    approved = _cli(fleet, "proposals", "approve", pid, "--yes", fsize=_full(fleet))
    assert approved.returncode == 1, approved.stdout + approved.stderr
    assert "AUDIT_UNAVAILABLE" in approved.stderr
    assert git(fleet["work"], "diff", "--cached", "--name-only") == ""         # nothing ran
    assert proposals.get(fleet["index"], pid)["status"] == "pending"            # nothing was decided
    status = _cli(fleet, "audit", "status", "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["state"] == "degraded"
    (spell,) = info["degraded"]
    assert spell["lost"] >= 1 and spell["alive"] is False and "file too large" in spell["error"].lower()
    text = _cli(fleet, "audit", "status")
    assert "DEGRADED" in text.stdout
    verify = _cli(fleet, "audit", "verify")
    assert verify.returncode == 4, verify.stdout + verify.stderr
    assert "DEGRADED" in verify.stdout and "intact" in verify.stdout
    assert json.loads(_cli(fleet, "audit", "verify", "--json").stdout)["degraded"]


def test_allow_degraded_writes_lets_the_person_approve_and_it_still_shows(fleet):
    fleet["settings"].write_text("[approval]\nnoninteractive = true\n[audit]\nsegment_max_bytes = 67108864\n"
                                 "allow_degraded_writes = true\n")
    pid = _stage_proposal(fleet)
    approved = _cli(fleet, "proposals", "approve", pid, "--yes", fsize=_full(fleet))
    assert approved.returncode == 0, approved.stderr
    assert git(fleet["work"], "diff", "--cached", "--name-only").split() == ["README.md"]
    assert json.loads(_cli(fleet, "audit", "status", "--json").stdout)["state"] == "degraded"
    assert _cli(fleet, "audit", "verify").returncode == 4


def test_the_next_append_that_works_records_the_gap_and_clears_the_state(fleet):
    pid = _stage_proposal(fleet)
    assert _cli(fleet, "proposals", "approve", pid, "--yes", fsize=_full(fleet)).returncode == 1
    approved = _cli(fleet, "proposals", "approve", pid, "--yes")
    assert approved.returncode == 0, approved.stderr
    assert json.loads(_cli(fleet, "audit", "status", "--json").stdout)["state"] == "ok"
    verify = _cli(fleet, "audit", "verify")
    assert verify.returncode == 0 and "DEGRADED" not in verify.stdout
