"""The shared fleet fixtures (registered in tests/conftest.py): one per fleet shape several test files use.

A test file that needs another shape keeps a small local fixture that calls the builders in tests/fleets/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.index.store import open_index
from tests.fleets import dashboard_fleet as dashboard
from tests.fleets import mcp_fleet as mcp
from tests.fleets import ops_fleet as ops


@pytest.fixture(scope="module")
def mcp_fleet(tmp_path_factory) -> dict[str, Path]:
    """The MCP fleet (every repo state the per-repo tools read), indexed; built once per test module."""
    return mcp.build_fleet(tmp_path_factory.mktemp("mcp-fleet"))


@pytest.fixture(scope="module")
def empty_index(tmp_path_factory) -> Path:
    """An index file with the schema and no repository, shared by a test module: for tests of refusals
    that come before any repository is read (a 401, a refused Host)."""
    db = tmp_path_factory.mktemp("empty-index") / "fleet.db"
    open_index(db).close()
    return db


@pytest.fixture
def dashboard_fleet(tmp_path: Path):
    """(index, repos): the dashboard fleet indexed into a fresh index, closed after the test."""
    index, repos = dashboard.indexed_fleet(tmp_path)
    yield index, repos
    index.close()


@pytest.fixture
def ops_fleet(tmp_path: Path, monkeypatch):
    """The ops fleet with its open index, no policy override and a private config folder."""
    monkeypatch.delenv("FLEETDECK_POLICY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    built = ops.build(tmp_path)
    yield built
    built["index"].close()
