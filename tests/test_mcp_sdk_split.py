"""`fleetdeck mcp` loads the SDK's server half only (mcp_bridge/sdk.py): the real server, driven by the official
stdio client, answers a tool call without `mcp.client` ever entering its `sys.modules` (and serves with the
garbage collector on, start-up's objects frozen out of it); the deferred package
completes into what a plain import makes; and the trick steps aside (the plain import) when it cannot hold.
Controls make each check able to fail: a plain import of `mcp.server` does load the client."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import mcp
import pytest
from mcp import Client, StdioServerParameters, stdio_client

from mcp_bridge.sdk import only_imports
from tests.fleets.cli import PROJECT_ROOT, fleetdeck_env
from tests.fleets.mcp_fleet import ok

# `python -m fleet mcp`, with the process's module table written to stderr as its last act.
SERVER = ("import atexit, gc, json, runpy, sys\n"
          "atexit.register(lambda: print('MODULES ' + json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
          "atexit.register(lambda: print('GC', gc.isenabled(), gc.get_freeze_count(), file=sys.stderr))\n"
          "sys.argv = ['fleetdeck', 'mcp']\n"
          "runpy.run_module('fleet', run_name='__main__', alter_sys=True)\n")


def python(code: str, **env: str) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=fleetdeck_env(**env))
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def client_modules(names: list[str]) -> list[str]:
    return [m for m in names if m == "mcp.client" or m.startswith("mcp.client.")]


@pytest.mark.slow  # a stdio bridge and the official client, started and waited on (~4-9 s)
async def test_the_stdio_server_answers_without_ever_importing_the_sdk_client(mcp_fleet, tmp_path):
    errlog = tmp_path / "stderr.txt"
    params = StdioServerParameters(command=sys.executable, args=["-c", SERVER],
                                   env=fleetdeck_env(FLEETDECK_DB=str(mcp_fleet["_db"]),
                                                     XDG_CACHE_HOME=str(tmp_path / "cache")))
    with open(errlog, "w") as err:
        for mode in ("auto", "legacy"):
            async with Client(stdio_client(params, errlog=err), mode=mode) as client:
                assert "fleet.radar" in {t.name for t in (await client.list_tools()).tools}
                assert ok(await client.call_tool("fleet.radar", {"limit": 1}))["entries"]
    tables = [json.loads(line[len("MODULES "):]) for line in errlog.read_text().splitlines()
              if line.startswith("MODULES ")]
    assert len(tables) == 2  # both sessions ended normally and wrote their module table
    for modules in tables:
        assert {"mcp", "mcp.server.lowlevel.server", "mcp.server.stdio", "mcp_bridge.tools_fleet"} <= set(modules)
        assert client_modules(modules) == []
    # The collector ran again while serving, with start-up's objects (the SDK's models) frozen out of it.
    collector = [line.split() for line in errlog.read_text().splitlines() if line.startswith("GC ")]
    assert [(enabled, int(frozen) > 50_000) for _gc, enabled, frozen in collector] == [("True", True)] * 2
    control = python("import json, sys, mcp.server; print(json.dumps(sorted(sys.modules)))")
    assert "mcp.client.client" in client_modules(json.loads(control.stdout))  # what the plain import does


@pytest.mark.slow
def test_the_deferred_package_completes_into_the_plain_one():
    """Server modules first, then `from mcp import Client`: the package ends with exactly the names (and the
    same objects) a plain `import mcp` gives, and no `__getattr__` of ours is left on it."""
    names = "sorted(k for k in vars(mcp) if not k.startswith('__') or k == '__all__')"
    split = python("import json, sys\n"
                   "from mcp_bridge.sdk import without_client\n"
                   "assert without_client()\n"
                   "import mcp.server, mcp.server.stdio, mcp.shared.message, mcp.types\n"
                   "import mcp\n"
                   "assert not [m for m in sys.modules if m.startswith('mcp.client')]\n"
                   "from mcp import Client, stdio_client\n"
                   "import mcp.client.client\n"
                   "assert Client is mcp.client.client.Client and mcp.stdio_server is mcp.server.stdio.stdio_server\n"
                   "assert '__getattr__' not in vars(mcp)\n"
                   f"print(json.dumps({names}))")
    plain = python(f"import json, mcp\nprint(json.dumps({names}))")
    assert json.loads(split.stdout) == json.loads(plain.stdout)
    assert "Client" in json.loads(plain.stdout)


def test_it_steps_aside_when_the_package_is_loaded_or_its_init_does_more_than_import(tmp_path):
    pkg = tmp_path / "sdkpkg"
    (pkg / "client").mkdir(parents=True)
    (pkg / "client" / "__init__.py").write_text("import sys\nsys.modules['sdkpkg'].CLIENT_LOADED = True\n")
    (pkg / "server.py").write_text("SERVER = 1\n")
    (pkg / "__init__.py").write_text('"""A package."""\nfrom .client import *\n__all__ = ["server"]\n')
    probe = ("import sys\nfrom mcp_bridge.sdk import without_client\n"
             "print(without_client('sdkpkg'))\n"
             "import sdkpkg.server\n"
             "print('sdkpkg.client' in sys.modules)\n"
             "print(sdkpkg.__all__, 'sdkpkg.client' in sys.modules, getattr(sdkpkg, 'CLIENT_LOADED', False))\n"
             "print(without_client('sdkpkg'))\n")
    path = f"{tmp_path}:{PROJECT_ROOT}"
    assert python(probe, PYTHONPATH=path).stdout.splitlines() == ["True", "False", "['server'] True True", "False"]
    (pkg / "__init__.py").write_text("from .client import *\nCONFIGURED = True\n")  # more than imports
    assert python(probe.replace("sdkpkg.__all__", "sdkpkg.CONFIGURED"), PYTHONPATH=path).stdout.splitlines() == [
        "False", "True", "True True True", "False"]


def test_the_sdk_package_init_is_still_imports_only():
    """The condition the trick runs under, on the installed SDK: if a release puts anything but imports and
    `__all__` in `mcp/__init__.py`, `fleetdeck mcp` falls back to the plain import, and this says so."""
    source = Path(mcp.__file__).read_text(encoding="utf-8")
    assert only_imports(source), "mcp/__init__.py now runs code of its own: mcp_bridge/sdk.py falls back"
    assert not only_imports(source + "\nimport logging\nlogging.basicConfig()\n")
    assert not only_imports("__all__ = []\nx: int = 1\n") and only_imports('"""doc"""\n__all__: list = []\n')
    assert any(isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("client")
               for node in ast.parse(source).body)  # it does import the client half: the reason for the trick
