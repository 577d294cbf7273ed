"""Layers that hold: nothing under fleet/ imports the adapters (web, mcp_bridge) or their frameworks, the
modules under fleet/ stand in an ordered list of layers that every import points down (or across, inside a
layer), and no two modules import each other, directly or in a circle.

Checked by parsing every module's imports (ast), at any depth (function-level imports included), plus
`importlib.import_module("…")` / `__import__("…")` with a literal name for the adapters. The one allowed
exception is the CLI's composition root: `fleetdeck serve` and `fleetdeck mcp` import their adapter lazily
in fleet/cli/serve.py. And the CLI is the top: no module outside fleet/cli/ imports it (no argparse in the
domain packages). The import graph itself is tests/layergraph.py (run it to see the numbers).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.layergraph import borrowed, circles, edges, module_graph, modules, rank, upward

FLEET = Path(__file__).resolve().parent.parent / "fleet"
# Bottom to top: a module may import its own layer and the layers before it, never one after it. A module
# belongs to the longest name listed that is it or a package holding it.
LAYERS: list[tuple[str, ...]] = [
    ("fleet", "fleet.errors"),                    # the version; the one error type and its codes
    ("fleet.timespec", "fleet.caps", "fleet.words", "fleet.fsio", "fleet.xdg",
     "fleet.procinfo"),                           # primitives: time formats, caps, wording, atomic files, XDG, /proc
    ("fleet.git",),                               # the hardened runner, git's own files read safely, parsers
    ("fleet.settings", "fleet.attention",
     "fleet.safetext"),                           # the settings file; the reason ladder; the display rule
    ("fleet.repo",),                              # live reads of one repository (no index)
    ("fleet.index",),                             # SQLite: schema, stores, ingest, and lookups through it (target)
    ("fleet.agents", "fleet.presence",
     "fleet.patch"),                              # agent credentials; agent presence; patch files
    ("fleet.audit",),                             # the signed, hash-chained audit log
    ("fleet.snapshot",),                          # the safety net: snapshots, discarded work, restore
    ("fleet.ops",),                               # the write side: catalog, policy, proposals, executor
    ("fleet.inbox", "fleet.views",
     "fleet.team"),                               # what needs a person; the pages' models; team mode's hub
    ("fleet.notify", "fleet.watch",
     "fleet.agenthooks"),                         # notifications; the watcher; fleetdeck inside agents' hooks
    ("fleet.cli", "fleet.demo", "fleet.demolife",
     "fleet.__main__"),                           # the composition root, and the demo fleet it builds
]
# Imports inside a function: each module allowed some, with why (start-up cost). No circle hides behind one.
LAZY = {
    "fleet.cli": "a command imports what it runs: `fleetdeck --help` and every other command stay fast",
    "fleet.agenthooks.run": "the hook runs before every agent tool call: the snapshot machinery and the guard "
                            "load only for a call that needs them",
    "fleet.audit": "cryptography loads when the log is opened or verified, not with `from fleet import audit`",
    "fleet.presence": "an agent's hook records presence without loading every detector (refresh)",
    "fleet.index.digestq": "the index's digest queries load git's runner only when recoverable commits are asked "
                           "for (an agent's hook opens the index)",
    "fleet.index.store": "an agent's hook opens the index: sqlite_utils (migrations) and git's readers load only "
                         "when a scan stores repositories",
}
FORBIDDEN = ("starlette", "uvicorn", "sse_starlette", "mcp", "web", "mcp_bridge")
# (module file, enclosing function, imported module): the composition root's lazy imports.
ALLOWED = {
    ("cli/serve.py", "_serve_local", "web.server"),   # `serve`: the dashboard (cmd_serve pauses the collector around it)
    ("cli/serve.py", "_serve_hub", "web.server"),   # `serve --team`: the hub's dashboard
    ("cli/serve.py", "cmd_mcp", "mcp_bridge.bridge"),   # the index, credential and audit checks, SDK-free
    ("cli/serve.py", "cmd_mcp", "mcp_bridge.sdk"),
    ("cli/serve.py", "cmd_mcp", "mcp_bridge.server"),
}


def imports(source: str) -> list[tuple[str | None, str]]:
    """(enclosing function or None, imported module) for every import in `source`, at any depth."""
    found: list[tuple[str | None, str]] = []

    def visit(node: ast.AST, func: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            scope = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Import):
                found.extend((scope, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((scope, child.module))
            elif (isinstance(child, ast.Call) and child.args and isinstance(child.args[0], ast.Constant)
                  and isinstance(child.args[0].value, str)
                  and ((isinstance(child.func, ast.Attribute) and child.func.attr == "import_module")
                       or (isinstance(child.func, ast.Name) and child.func.id == "__import__"))):
                found.append((scope, child.args[0].value))
            visit(child, scope)

    visit(ast.parse(source), None)
    return found


def violations(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for func, module in imports(path.read_text(encoding="utf-8")):
            if module.split(".")[0] in FORBIDDEN and (rel, func, module) not in ALLOWED:
                out.append(f"fleet/{rel}: {func or '<module>'} imports {module}")
    return out


@pytest.mark.slow
def test_fleet_imports_no_adapter_and_no_framework():
    assert not violations(FLEET)


def test_the_allowed_exceptions_exist_and_are_the_only_ones():
    """The composition root's lazy imports are where the allow-list says (a stale entry would hide a move)."""
    seen = {("cli/serve.py", func, module) for func, module in imports((FLEET / "cli/serve.py").read_text())}
    assert ALLOWED <= seen
    assert {entry[0] for entry in ALLOWED} == {"cli/serve.py"}


def test_the_checker_sees_every_kind_of_import(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text(
        "import os\n"
        "def f():\n    from starlette.responses import Response\n"
        "class C:\n    def m(self):\n        import mcp.types\n"
        "def g():\n    import importlib\n    importlib.import_module('web.app')\n"
        "x = __import__('uvicorn')\n"
        "def cmd_serve():\n    from mcp_bridge.server import run_stdio\n")
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "serve.py").write_text("def _serve_local():\n    from web.server import serve\n")
    found = violations(tmp_path)
    assert found == ["fleet/sub/a.py: f imports starlette.responses", "fleet/sub/a.py: m imports mcp.types",
                     "fleet/sub/a.py: g imports web.app", "fleet/sub/a.py: <module> imports uvicorn",
                     "fleet/sub/a.py: cmd_serve imports mcp_bridge.server"]


def cli_importers(root: Path) -> list[str]:
    """Modules outside root/cli/ that import the CLI (fleet.cli or any of its modules) or argparse."""
    return [f"fleet/{path.relative_to(root).as_posix()}: {func or '<module>'} imports {module}"
            for path in sorted(root.rglob("*.py")) if path.relative_to(root).parts[0] not in ("cli", "__main__.py")
            for func, module in imports(path.read_text(encoding="utf-8"))
            if module in ("fleet.cli", "argparse") or module.startswith("fleet.cli.")]


@pytest.mark.slow
def test_no_domain_package_imports_the_cli_or_argparse(tmp_path: Path):
    assert not cli_importers(FLEET)
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "output.py").write_text("import argparse\nimport fleet.index\n")
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "commands.py").write_text("import argparse\n"
                                                  "def _index(args):\n    from fleet.cli.args import index_for\n")
    assert cli_importers(tmp_path) == ["fleet/ops/commands.py: <module> imports argparse",
                                       "fleet/ops/commands.py: _index imports fleet.cli.args"]


def layer_problems(root: Path, layers: list[tuple[str, ...]], lazy: dict[str, str]) -> list[str]:
    """Modules in no layer, imports that point up, circles between modules, function-level imports of a
    module that has no stated reason for them."""
    found = edges(root)
    out = [f"{module}: in no layer" for module in modules(root) if rank(module, layers) is None]
    out += sorted({f"{e.source} ({e.func or '<module>'}) imports {e.target}: up the layers"
                   for e in upward(found, layers)})
    out += [f"circle: {' -> '.join(c)}" for c in circles(module_graph(found))]
    out += sorted({f"{e.source} ({e.func}) imports {e.target} inside a function"
                   for e in found if e.func and not _listed(e.source, lazy)})
    return out


def _listed(module: str, lazy: dict[str, str]) -> str | None:
    return next((name for name in lazy if module == name or module.startswith(name + ".")), None)


@pytest.mark.slow
def test_every_import_points_down_the_layers_and_no_module_circle():
    assert layer_problems(FLEET, LAYERS, LAZY) == []


@pytest.mark.slow
def test_every_lazy_allowance_is_used():
    """A stale entry would let a new function-level import in unseen."""
    lazy_sources = {e.source for e in edges(FLEET) if e.func}
    assert {name for name in LAZY if not any(_listed(m, {name: ""}) for m in lazy_sources)} == set()


def test_the_layer_checker_fails_on_each_kind_of_problem(tmp_path: Path):
    root = tmp_path / "fleet"
    (root / "low").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "low" / "__init__.py").write_text("")
    (root / "low" / "a.py").write_text("from fleet.high import b\n")                 # up the layers
    (root / "low" / "c.py").write_text("def f():\n    from fleet.low import d\n")   # lazy, no reason; a circle
    (root / "low" / "d.py").write_text("from fleet.low.c import f\n"
                                      "from typing import TYPE_CHECKING\n"
                                      "if TYPE_CHECKING:\n    from fleet.high import b\n")  # annotations only
    (root / "high.py").write_text("import fleet.low.d\n")
    (root / "stray.py").write_text("")
    layers = [("fleet", "fleet.low"), ("fleet.high",)]
    assert layer_problems(root, layers, {}) == [
        "fleet.stray: in no layer",
        "fleet.low.a (<module>) imports fleet.high: up the layers",
        "circle: fleet.low.c -> fleet.low.d",
        "fleet.low.c (f) imports fleet.low.d inside a function",
    ]
    (root / "low" / "c.py").write_text("def f():\n    import os\n")
    (root / "low" / "a.py").write_text("")
    (root / "stray.py").unlink()
    assert layer_problems(root, layers, {}) == []


@pytest.mark.slow
def test_every_name_is_imported_from_its_home(tmp_path: Path):
    """A moved function leaves no name behind: nobody imports it from a module that only imports it."""
    readers = [FLEET.parent / name for name in ("fleet", "web", "mcp_bridge", "tests", "bench")]
    assert borrowed(FLEET, readers) == []
    root = tmp_path / "fleet"
    root.mkdir()
    (root / "timespec.py").write_text("def iso(ts):\n    return str(ts)\n")
    (root / "record.py").write_text("from fleet.timespec import iso\n__all__ = ['read']\nfrom os import read\n")
    (root / "user.py").write_text("from fleet.record import iso, read\nfrom fleet.timespec import iso as iso2\n")
    assert borrowed(root, [root]) == ["fleet/user.py:1 takes iso from fleet.record"]
