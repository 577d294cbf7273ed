"""A non-editable install works: the wheel holds every package, template and static asset, and runs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.fleets.cli import PROJECT_ROOT, copy_checkout

pytestmark = pytest.mark.slow  # every test builds a wheel with pip first (~4-20 s), one installs it in a venv


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = copy_checkout(tmp_path_factory.mktemp("source") / "fleetdeck")  # built as a fresh clone builds
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return next(out.glob("fleetdeck-*.whl"))


def test_wheel_contains_every_package_and_asset(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("fleet", "web", "mcp_bridge", "templates"):
        assert f"{package}/__init__.py" in names
    source_packages = {str(p.parent.relative_to(PROJECT_ROOT)) for pkg in ("fleet", "web", "mcp_bridge")
                       for p in (PROJECT_ROOT / pkg).rglob("__init__.py")}
    for package in source_packages:
        assert f"{package}/__init__.py" in names, f"{package} missing from the wheel"
    for asset in list((PROJECT_ROOT / "templates").rglob("*.html")) + list((PROJECT_ROOT / "web").rglob("static/*")):
        assert str(asset.relative_to(PROJECT_ROOT)) in names, asset
    assert any(n.endswith("entry_points.txt") for n in names)


def test_installed_wheel_runs_outside_the_checkout(wheel: Path, tmp_path: Path):
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    code = ("import fleet, jinja2, importlib.resources as r; "
            "assert fleet.__file__.startswith(%r), fleet.__file__; "
            "print(sorted(p.name for p in r.files('templates').iterdir() if p.name.endswith('.html')))") % str(target)
    check = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stderr
    version = subprocess.run([sys.executable, "-m", "fleet", "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("fleetdeck "), version.stderr
    made = subprocess.run([sys.executable, "-m", "fleet", "--db", str(tmp_path / "fleet.db"), "roots", "add",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr     # a read of a missing index creates none: make an empty one
    digest = subprocess.run([sys.executable, "-m", "fleet", "--db", str(tmp_path / "fleet.db"), "digest",
                             "--format", "html"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert digest.returncode == 0 and "No activity" in digest.stdout, digest.stderr  # templates load from the wheel


def test_pipx_installs_the_wheel_as_a_working_command(wheel: Path, tmp_path: Path):
    """The README's `pipx install fleetdeck-*.whl`: an isolated venv with the `fleetdeck` command on PATH
    (dependencies from the package index pip is configured with)."""
    pytest.importorskip("pipx")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
               PIPX_MAN_DIR=str(tmp_path / "man"), PIPX_DEFAULT_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-m", "pipx", "install", str(wheel)], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    command = tmp_path / "bin" / "fleetdeck"
    version = subprocess.run([str(command), "--version"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("fleetdeck "), version.stderr
    (tmp_path / "empty").mkdir()
    scan = subprocess.run([str(command), "--db", str(tmp_path / "f.db"), "scan", str(tmp_path / "empty")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert scan.returncode == 0, scan.stderr
    repos = subprocess.run([str(command), "--db", str(tmp_path / "f.db"), "repos", "--json"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    assert repos.returncode == 0 and repos.stdout.strip() == "[]", repos.stderr
