"""How tests run this checkout's CLI in a subprocess."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def fleetdeck_argv(*args: str) -> list[str]:
    """argv that runs this checkout's CLI in a subprocess (`python -m fleet` == the `fleetdeck` script)."""
    return [sys.executable, "-m", "fleet", *args]


def fleetdeck_env(**extra: str) -> dict[str, str]:
    """Environment for CLI subprocesses: this checkout first on sys.path, the test HOME, plus `extra`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PROJECT_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def noninteractive_approver(config_home: Path) -> Path:
    """The person's settings file under `config_home` (their XDG_CONFIG_HOME) with `[approval] noninteractive
    = true`: the CLI's `--yes` then decides without asking on a terminal, as a person's own script would."""
    path = config_home / "fleetdeck" / "settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[approval]\nnoninteractive = true\n", encoding="utf-8")
    return path
