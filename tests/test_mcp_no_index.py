"""`fleetdeck mcp` on an index that does not exist yet, through the official stdio client: the server starts,
creates no database, answers every call that needs the index with NO_INDEX ("run `fleetdeck scan ROOT`"),
and serves the index as soon as a scan has made it (no restart)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import init_repo
from tests.fleets.mcp_fleet import error_of, ok


@pytest.mark.slow
@pytest.mark.parametrize("mode,how", [("legacy", "flag"), ("auto", "env")])
async def test_missing_index_is_a_coded_error_then_served_once_scanned(tmp_path: Path, mode: str, how: str):
    db = tmp_path / "nowhere" / "fleet.db"
    argv = fleetdeck_argv(*(["--db", str(db)] if how == "flag" else []), "mcp")
    env = fleetdeck_env(**({"FLEETDECK_DB": str(db)} if how == "env" else {}))
    root = tmp_path / "root"
    repo = init_repo(root / "alpha", commits=2)
    async with Client(StdioServerParameters(command=argv[0], args=argv[1:], env=env), mode=mode) as client:
        assert "fleet.radar" in {t.name for t in (await client.list_tools()).tools}
        for name, args in (("fleet.radar", {}), ("fleet.repos", {"limit": 1}), ("repo.brief", {"repo": str(repo)}),
                           ("repo.history", {"repo": "alpha"})):
            code, message = error_of(await client.call_tool(name, args))
            assert code == "NO_INDEX", (name, code, message)
            assert "fleetdeck scan ROOT" in message and str(db) in message
        assert not db.exists()   # (the audit log beside it records these calls: fleet/audit's rule)
        scan = subprocess.run(fleetdeck_argv("--db", str(db), "scan", str(root)), env=fleetdeck_env(),
                              capture_output=True, text=True, timeout=120)
        assert scan.returncode == 0, scan.stderr
        repos = ok(await client.call_tool("fleet.repos", {}))
        assert [r["name"] for r in repos["repos"]] == ["alpha"]
        assert ok(await client.call_tool("repo.history", {"repo": "alpha"}))["commits"]
