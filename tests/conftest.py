"""Shared fixtures: an isolated HOME and git config for every test run, and fresh index paths."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.gitbuild import configure_home

_SESSION_HOME = Path(tempfile.mkdtemp(prefix="fleetdeck-home-"))
configure_home(_SESSION_HOME)
os.environ["XDG_DATA_HOME"] = str(_SESSION_HOME / ".local" / "share")
os.environ.pop("FLEETDECK_DB", None)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "fleet.db"

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def fleetdeck_argv(*args: str) -> list[str]:
    """argv that runs this checkout's CLI in a subprocess (`python -m fleet` == the `fleetdeck` script)."""
    import sys

    return [sys.executable, "-m", "fleet", *args]


def fleetdeck_env(**extra: str) -> dict[str, str]:
    """Environment for CLI subprocesses: this checkout first on sys.path, the test HOME, plus `extra`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PROJECT_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
