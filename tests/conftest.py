"""Shared fixtures: an isolated HOME and git config for every test run, and fresh index paths."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.fleets.fixtures import dashboard_fleet, empty_index, mcp_fleet, ops_fleet  # noqa: F401  (shared fixtures)
from tests.fleets.gitbuild import configure_home

_SESSION_HOME = Path(tempfile.mkdtemp(prefix="fleetdeck-home-"))
configure_home(_SESSION_HOME)
os.environ["XDG_DATA_HOME"] = str(_SESSION_HOME / ".local" / "share")
os.environ["XDG_CACHE_HOME"] = str(_SESSION_HOME / ".cache")  # the MCP tool definitions' cache
os.environ["FLEETDECK_CHECK_OUTPUTS"] = "1"  # every MCP answer validated against its tool's output model
os.environ.pop("FLEETDECK_DB", None)
# no test notifies the desktop of the person running the tests: the D-Bus tests start a bus of their own
os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
# The tests start Python hundreds of times (the CLI, the hooks, the bridges): each reuses the bytecode the first
# compiled, as an installed fleetdeck does (pip byte-compiles it), kept in a folder of this run, never in the
# checkout. Under PYTHONDONTWRITEBYTECODE every child would compile every module it imports again.
_PYCACHE = tempfile.mkdtemp(prefix="fleetdeck-pycache-")
atexit.register(shutil.rmtree, _PYCACHE, True)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "fleet.db"


_BROWSER_TESTS = Path(__file__).parent / "browser"


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every browser test is slow (Chromium, a served dashboard): the rule holds for a file that forgets the mark."""
    for item in items:
        if _BROWSER_TESTS in item.path.parents and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
