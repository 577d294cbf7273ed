"""Layers that hold: nothing under fleet/ imports the adapters (web, mcp_bridge) or their frameworks.

Checked by parsing every module's imports (ast), at any depth (function-level imports included), plus
`importlib.import_module("…")` / `__import__("…")` with a literal name. The one allowed exception is the
CLI's composition root: `fleetdeck serve` and `fleetdeck mcp` import their adapter lazily in fleet/cli/serve.py.
And the CLI is the top: no module outside fleet/cli/ imports it (no argparse in the domain packages).
"""

from __future__ import annotations

import ast
from pathlib import Path

FLEET = Path(__file__).resolve().parent.parent / "fleet"
FORBIDDEN = ("starlette", "uvicorn", "sse_starlette", "mcp", "web", "mcp_bridge")
# (module file, enclosing function, imported module): the composition root's lazy imports.
ALLOWED = {
    ("cli/serve.py", "cmd_serve", "web.server"),
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
    (tmp_path / "cli" / "serve.py").write_text("def cmd_serve():\n    from web.server import serve\n")
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


def test_no_domain_package_imports_the_cli_or_argparse(tmp_path: Path):
    assert not cli_importers(FLEET)
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "output.py").write_text("import argparse\nimport fleet.index\n")
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "commands.py").write_text("import argparse\n"
                                                  "def _index(args):\n    from fleet.cli.args import index_for\n")
    assert cli_importers(tmp_path) == ["fleet/ops/commands.py: <module> imports argparse",
                                       "fleet/ops/commands.py: _index imports fleet.cli.args"]
