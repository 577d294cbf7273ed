"""Every error code raised anywhere in fleet/, web/ and mcp_bridge/ is a row of fleet.errors.Code (the table
that carries its HTTP status), every row is raised somewhere (a stale row would hide a removed code), and the
failure envelope is written out only in fleet/errors.py (every surface calls `envelope`).

Checked by parsing every module (ast). A code is the literal given as the code of: `FleetError(...)`, any
class derived from it (GitError, ...) and `super().__init__(...)` inside one; the bridge's `failure(code, ...)`,
the dashboard's `refusal(scope, code, ...)` and `json_error(code, ...)`, `envelope(code, ...)`; and a
function's parameter named `code` that it passes on as one of these (its default, a `code=` keyword, or the
positional argument in its place). Both sides of a conditional count. The tmp_path cases plant each form
and see the check fire.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from fleet.errors import Code

KNOWN = {c.value for c in Code}

ROOT = Path(__file__).resolve().parent.parent
TREES = ("fleet", "web", "mcp_bridge")
BASE_ERRORS = {"FleetError"}
# callables whose code is a positional argument other than the first
CODE_AT = {"failure": 0, "json_error": 0, "envelope": 0, "refusal": 1}


def _literals(node: ast.AST | None) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)] \
        if node is not None else []


def _name(func: ast.AST) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _init_code_at(cls: ast.ClassDef) -> int | None | bool:
    """Where a class's own __init__ takes `code` (None: it takes none), or False when it defines no __init__."""
    for n in cls.body:
        if isinstance(n, ast.FunctionDef) and n.name == "__init__":
            names = [a.arg for a in n.args.args[1:]]
            return names.index("code") if "code" in names else None
    return False


@functools.lru_cache(maxsize=None)
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's tree, parsed and walked once per run: the passes below go over the same ~400
    modules (read only) three times, and walking them was half the check's time."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def raised_codes(roots: list[Path]) -> dict[str, list[str]]:
    """code -> where it is raised ("path:line"), over every module under `roots`."""
    trees = {path: _nodes(path) for root in roots for path in sorted(root.rglob("*.py"))}
    classes = {n.name: n for nodes in trees.values() for n in nodes if isinstance(n, ast.ClassDef)}
    errors: dict[str, int | None] = {name: 0 for name in BASE_ERRORS}  # error class -> where its code goes
    grew = True
    while grew:  # classes derived (at any depth) from FleetError, with where their constructor takes the code
        grew = False
        for name, cls in classes.items():
            base = next((_name(b) for b in cls.bases if _name(b) in errors), None)
            if name not in errors and base is not None:
                own = _init_code_at(cls)
                errors[name], grew = errors[base] if own is False else own, True
    code_at = dict(CODE_AT, **{name: at for name, at in errors.items() if at is not None})
    takes_code: set[str] = set()
    passes = dict(code_at)
    for nodes in trees.values():  # functions whose `code` parameter becomes an error's code
        for n in nodes:
            names = [a.arg for a in n.args.args] if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            if "code" in names and n.name != "__init__" and any(
                    isinstance(c, ast.Call) and (at := passes.get(_name(c.func) or "")) is not None
                    and len(c.args) > at and isinstance(c.args[at], ast.Name) and c.args[at].id == "code"
                    for c in ast.walk(n)):
                code_at.setdefault(n.name, names.index("code") - (names[:1] in (["self"], ["cls"])))
                takes_code.add(n.name)
    out: dict[str, list[str]] = {}

    def add(values: list[str], path: Path, line: int) -> None:
        root = next(r for r in roots if r in path.parents)
        for value in values:
            out.setdefault(value, []).append(f"{path.relative_to(root.parent).as_posix()}:{line}")

    for path, nodes in trees.items():
        for n in nodes:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in takes_code:
                args = n.args.args[len(n.args.args) - len(n.args.defaults):]
                add([v for a, d in zip(args, n.args.defaults) if a.arg == "code" for v in _literals(d)], path, n.lineno)
            base_at = next((errors[_name(b)] for b in getattr(n, "bases", []) if _name(b) in errors), None)
            if isinstance(n, ast.ClassDef) and base_at is not None:
                for call in ast.walk(n):
                    if isinstance(call, ast.Call) and _name(call.func) == "__init__" and call.args \
                            and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call) \
                            and _name(call.func.value.func) == "super":
                        add(_literals(call.args[base_at] if len(call.args) > base_at else None), path, call.lineno)
            if not isinstance(n, ast.Call):
                continue
            at = code_at.get(_name(n.func) or "")
            if at is None:
                continue
            add([v for k in n.keywords if k.arg == "code" for v in _literals(k.value)], path, n.lineno)
            if len(n.args) > at and not isinstance(n.args[at], ast.Starred):
                add(_literals(n.args[at]), path, n.lineno)
    return out


@pytest.fixture(scope="module")
def product_codes() -> dict[str, list[str]]:
    """raised_codes over fleet/, web/ and mcp_bridge/: one walk for the two checks of the table."""
    return raised_codes([ROOT / t for t in TREES])


@pytest.mark.slow
def test_every_code_raised_is_in_the_table(product_codes):
    unknown = {code: where for code, where in product_codes.items() if code not in KNOWN}
    assert not unknown, f"add these to fleet.errors.Code (with their HTTP status): {unknown}"


@pytest.mark.slow
def test_every_row_of_the_table_is_raised_somewhere(product_codes):
    assert KNOWN - set(product_codes) == set()


def test_the_check_sees_every_way_a_code_is_given(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        "from fleet.errors import FleetError\n"
        "class Mine(FleetError):\n    def __init__(self, m):\n        super().__init__('P_SUPER', m)\n"
        "class Coded(FleetError):\n    pass\n"
        "def f(x):\n    raise FleetError('P_LITERAL' if x else 'BAD_ARGUMENT', 'no')\n"
        "def g():\n    raise Coded('P_DERIVED', 'no') if Mine else Mine('a message, not a code')\n"
        "def h(scope):\n    return refusal(scope, 'P_REFUSAL', 'no')\n"
        "def opener(path, code='P_DEFAULT'):\n    raise FleetError(code, path)\n"
        "def k():\n    opener('x', 'P_POSITIONAL')\n    opener('x', code='P_KEYWORD')\n"
        "    return failure('P_FAILURE', 'no'), json_error('P_JSON', 'no'), envelope('P_ENVELOPE', 'no')\n")
    found = raised_codes([tmp_path / "pkg"])
    assert {c for c in found if c not in KNOWN} == {
        "P_SUPER", "P_LITERAL", "P_DERIVED", "P_REFUSAL", "P_DEFAULT", "P_POSITIONAL", "P_KEYWORD", "P_FAILURE",
        "P_JSON", "P_ENVELOPE"}
    assert found["P_LITERAL"] == ["pkg/a.py:8"] and "BAD_ARGUMENT" in found


def inline_envelopes(roots: list[Path]) -> list[str]:
    """`{"error": {"code": ...}}` written out anywhere but fleet/errors.py (every surface calls envelope())."""
    out = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if path == ROOT / "fleet" / "errors.py":
                continue
            for n in _nodes(path):
                if isinstance(n, ast.Dict) and any(
                        isinstance(k, ast.Constant) and k.value == "error" and isinstance(v, ast.Dict)
                        and any(isinstance(kk, ast.Constant) and kk.value == "code" for kk in v.keys)
                        for k, v in zip(n.keys, n.values)):
                    out.append(f"{path.relative_to(root.parent).as_posix()}:{n.lineno}")
    return out


def test_one_envelope_everywhere(tmp_path: Path):
    assert inline_envelopes([ROOT / t for t in TREES]) == []
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "api.py").write_text("def refuse(exc):\n"
                                             "    return {'error': {'code': exc.code, 'message': 'x'}}\n")
    assert inline_envelopes([tmp_path / "web"]) == ["web/api.py:2"]
