"""A person's restore (the dashboard's button, `fleetdeck restore`) is audited like a decision: its entry is
written first, and a log that cannot take it means nothing is restored (AUDIT_UNAVAILABLE).

As in tests/test_audit_failclosed.py, the restoring process is a real `fleetdeck restore` whose file-size limit
is the audit segment's size: its appends fail with EFBIG (for root too), smaller files stay writable."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from fleet import audit
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import init_repo, write

PAD_ENTRIES = 9000


def _restore(db: Path, repo: str, snapshot: str, fsize: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return subprocess.run(fleetdeck_argv("--db", str(db), "restore", repo, snapshot, "--yes", "--json"),
                          capture_output=True, text=True, env=fleetdeck_env(), stdin=subprocess.DEVNULL,
                          timeout=120, preexec_fn=limit)


@pytest.mark.slow
def test_restore_needs_its_audit_entry(tmp_path: Path, monkeypatch) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text("[audit]\nsegment_max_bytes = 67108864\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    repo = init_repo(tmp_path / "fleet" / "site")
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(repo.parent)])
    write(repo / "draft.md", "an afternoon of writing\n")
    saved = take(WorkTree(str(repo), str(repo / ".git"), str(repo / ".git")), db, "manual")
    (repo / "draft.md").unlink()
    log = audit.setup(db)
    for i in range(PAD_ENTRIES):
        log.record("tool_call", tool="fleet.repos", agent="padding", args={"n": i}, summary="padding")
    log.sync()
    segment = db.parent / "audit" / "current.jsonl"
    refused = _restore(db, "site", saved["id"][:12], fsize=os.path.getsize(segment))
    assert refused.returncode == 1 and "[AUDIT_UNAVAILABLE]" in refused.stderr
    assert not (repo / "draft.md").exists()                          # nothing restored without its entry
    done = _restore(db, "site", saved["id"][:12])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == ["draft.md"]
    assert (repo / "draft.md").read_text() == "an afternoon of writing\n"
    events = [json.loads(line) for line in segment.read_text().splitlines() if '"snapshot.restore"' in line]
    assert events and events[-1]["actor"] == "cli"
