"""The adapters (web/, mcp_bridge/) hold no SQL: every query they need is a method of the index
(fleet/index), the one place a second engine (PostgreSQL, issue 27) has to implement.

Checked by parsing each adapter module (ast): no string that reads as a SQL statement (docstrings aside),
no `.execute*` / `.cursor` on anything, no database driver imported. The tmp_path case proves the check fires.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ("web", "mcp_bridge")
SQL = re.compile(r"\b(select\b[\s\S]+\bfrom|insert\s+(or\s+\w+\s+)?into|update\s+\w+\s+set|delete\s+from"
                 r"|pragma\s+\w+|begin\s+(immediate|exclusive|deferred)|create\s+(table|index|view|trigger))\b",
                 re.IGNORECASE)
DRIVERS = ("sqlite3", "sqlite_utils", "psycopg", "psycopg_pool")
DB_ATTRIBUTES = ("execute", "executemany", "executescript", "cursor")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the Constant nodes that are docstrings (prose may say "select ... from")."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def sql_in(source: str) -> list[str]:
    """What in `source` is SQL or reaches the database under the index: (line, what) descriptions."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and SQL.search(node.value):
            found.append(f"{node.lineno}: SQL string {node.value[:60]!r}")
        elif isinstance(node, ast.Attribute) and node.attr in DB_ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in DRIVERS]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in DRIVERS:
            found.append(f"{node.lineno}: from {node.module} import")
    return found


def violations(root: Path) -> list[str]:
    out = []
    for package in ADAPTERS:
        for path in sorted((root / package).rglob("*.py")):
            out += [f"{path.relative_to(root)}:{hit}" for hit in sql_in(path.read_text(encoding="utf-8"))]
    return out


def test_adapters_hold_no_sql():
    assert violations(ROOT) == []


# The modules of fleet/ outside fleet/index that hold SQL: another program's database read (never the index),
# and the CLI's mapping of sqlite3's errors. A new module with SQL fails; one cleaned must leave the list.
OTHER_DATABASES = {  # agents' own session stores, read-only (fleet/presence/sqlite_ro.py)
    "presence/sqlite_ro.py", "presence/cline.py", "presence/goose.py", "presence/opencode.py",
}
ENGINE_ERRORS = {"cli/__init__.py"}  # maps sqlite3's errors on opening the index to the index's FleetError
HUB = {"team/hubschema.py", "team/pg.py", "team/push.py", "team/verify.py", "team/decisions.py",
       "team/hubread.py", "team/hubpass.py", "team/auditchain.py", "team/listen.py"}  # team mode's PostgreSQL hub: its schema, the push, the hub's reads


def fleet_sql(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in sorted(root.rglob("*.py"))
            if path.relative_to(root).parts[0] != "index" and sql_in(path.read_text(encoding="utf-8"))}


@pytest.mark.slow
def test_sql_in_fleet_lives_in_the_index_but_for_the_listed_modules():
    assert fleet_sql(ROOT / "fleet") == OTHER_DATABASES | ENGINE_ERRORS | HUB


def test_the_check_catches_sql_in_an_adapter(tmp_path):
    """Each form the check knows, planted in a fake adapter tree: every one is caught, prose is not."""
    (tmp_path / "web").mkdir()
    (tmp_path / "mcp_bridge").mkdir()
    (tmp_path / "web" / "clean.py").write_text('"""Select the rows from the index."""\nx = "select a tool"\n')
    (tmp_path / "mcp_bridge" / "tool.py").write_text(
        "import sqlite3\n"
        "def lost(bridge, path):\n"
        "    return bridge.index().conn.execute(\n"
        "        'select id from repos where path = ?', (path,))\n"
        "q = f\"UPDATE proposals SET status = 'x' WHERE id = {1}\"\n")
    assert sorted(violations(tmp_path)) == [
        "mcp_bridge/tool.py:1: import sqlite3",
        "mcp_bridge/tool.py:3: .execute",
        "mcp_bridge/tool.py:4: SQL string 'select id from repos where path = ?'",
        "mcp_bridge/tool.py:5: SQL string \"UPDATE proposals SET status = 'x' WHERE id = \"",
    ]
