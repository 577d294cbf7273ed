"""Shared fixtures: an isolated HOME and git config for every test run, and fresh index paths."""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fleets.fixtures import dashboard_fleet, empty_index, mcp_fleet, ops_fleet  # noqa: F401  (shared fixtures)
from tests.fleets.gitbuild import configure_home

_SESSION_HOME = Path(tempfile.mkdtemp(prefix="fleetdeck-home-"))
atexit.register(shutil.rmtree, _SESSION_HOME, True)  # each process's own HOME, not left behind in /tmp
configure_home(_SESSION_HOME)
os.environ["XDG_DATA_HOME"] = str(_SESSION_HOME / ".local" / "share")
os.environ["XDG_CACHE_HOME"] = str(_SESSION_HOME / ".cache")  # the MCP tool definitions' cache
os.environ["FLEETDECK_CHECK_OUTPUTS"] = "1"  # every MCP answer validated against its tool's output model
os.environ.pop("FLEETDECK_DB", None)
# no test notifies the desktop of the person running the tests: the D-Bus tests start a bus of their own
os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)


def _bytecode_folder() -> str:
    """A private folder outside the checkout, kept between runs, for the bytecode of the tests and the product.

    Under PYTHONDONTWRITEBYTECODE (set on the project's machine) pytest rewrote and compiled every test module again
    in each process, each xdist worker included (~70% of an 8 s collection), and every Python child the tests
    start (the CLI, the hooks, the bridges) compiled every module it imports again. A .pyc is checked against its
    source's mtime and size, as Python and pytest always check it. A folder another user could write is not used:
    the run then gets a fresh one of its own, removed at exit.
    """
    folder = Path(tempfile.gettempdir()) / f"fleetdeck-pycache-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = folder.lstat()
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return str(folder)
    except OSError:
        pass
    fresh = tempfile.mkdtemp(prefix="fleetdeck-pycache-")
    atexit.register(shutil.rmtree, fresh, True)
    return fresh


_PYCACHE = _bytecode_folder()
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE
# this process too: the test modules conftest imports after this line are rewritten once, not once per run
sys.dont_write_bytecode = False
sys.pycache_prefix = _PYCACHE


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
