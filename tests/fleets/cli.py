"""How tests run this checkout's CLI in a subprocess: `run_cli`, the one way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def run_cli(*args: str, db: Path | str | None = None, stdin: str | bytes | None = None, text: bool = True,
            env: dict[str, str] | None = None, timeout: float = 120, **popen: Any) -> subprocess.CompletedProcess:
    """Run this checkout's CLI in a subprocess, as a person's shell or an agent's would: `--db db` first when
    given, `stdin` as its input (else no input at all: /dev/null, never the test runner's terminal), output
    captured (text unless `text=False`), `env` added to `fleetdeck_env()`. `popen` passes through
    (`cwd`, `check`, `start_new_session`, `preexec_fn`)."""
    argv = fleetdeck_argv(*(("--db", str(db)) if db is not None else ()), *args)
    return subprocess.run(argv, input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                          capture_output=True, text=text, env=fleetdeck_env(**(env or {})), timeout=timeout,
                          **popen)


def noninteractive_approver(config_home: Path) -> Path:
    """The person's settings file under `config_home` (their XDG_CONFIG_HOME) with `[approval] noninteractive
    = true`: the CLI's `--yes` then decides without asking on a terminal, as a person's own script would."""
    path = config_home / "fleetdeck" / "settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[approval]\nnoninteractive = true\n", encoding="utf-8")
    return path
