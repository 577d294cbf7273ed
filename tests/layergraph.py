"""The import graph of fleet/, from the ast of every module: what tests/test_layers.py checks, as numbers.

An edge is one import statement naming a fleet module (module level or inside a function: both run), plus
the packages above that module whose `__init__` the import runs first. Imports under `if TYPE_CHECKING:`
never run and are no edges (annotations only). Run as a script (`python tests/layergraph.py`) it prints
the circles between modules, the pairs of packages that import each other, the imports that point up the
layer order and the count of function-level imports.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

FLEET = Path(__file__).resolve().parent.parent / "fleet"


@dataclass(frozen=True)
class Edge:
    source: str        # importing module, dotted (fleet.repo.record)
    target: str        # imported fleet module, dotted
    func: str | None   # enclosing function, None at module level
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root.name, *parts])


def modules(root: Path) -> dict[str, Path]:
    return {module_name(root, path): path for path in sorted(root.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` is or lies inside (`fleet.a.b.func` → `fleet.a.b`)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def edges(root: Path = FLEET) -> list[Edge]:
    known = modules(root)
    prefix = root.name
    out: list[Edge] = []
    for source, path in known.items():
        def add(name: str, func: str | None, line: int) -> None:
            if name.split(".")[0] != prefix or not (target := _resolve(name, known)) or target == source:
                return
            out.append(Edge(source, target, func, line))
            parent = target.rpartition(".")[0]
            while parent and parent != prefix:  # fleet/__init__ only holds the version
                if parent in known and parent != source and not source.startswith(parent + "."):
                    out.append(Edge(source, parent, func, line))
                parent = parent.rpartition(".")[0]

        def visit(node: ast.AST, func: str | None) -> None:
            for child in ast.iter_child_nodes(node):
                scope = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
                if isinstance(child, ast.If) and _type_checking(child.test):
                    for other in child.orelse:
                        visit(ast.Module(body=[other], type_ignores=[]), scope)
                    continue
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        add(alias.name, scope, child.lineno)
                elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                    for alias in child.names:  # `from fleet.git import run` imports the module fleet.git.run
                        add(f"{child.module}.{alias.name}", scope, child.lineno)
                visit(child, scope)

        visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return out


def _type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def borrowed(root: Path, readers: list[Path]) -> list[str]:
    """`from fleet.x import name` where fleet.x only imports `name` itself (a name passed along, not its home),
    for every file under `readers`. A package's `__init__` and a module's `__all__` export on purpose."""
    known = modules(root)
    passed: dict[str, set[str]] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exported = {elt.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                    for elt in getattr(node.value, "elts", ()) if isinstance(elt, ast.Constant)}
        if path.name != "__init__.py":
            passed[module] = {(alias.asname or alias.name).split(".")[0] for node in tree.body
                              if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names} - exported
    out = []
    for base in readers:
        for path in sorted(base.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module in passed:
                    out += [f"{path.relative_to(base.parent)}:{node.lineno} takes {alias.name} from {node.module}"
                            for alias in node.names if alias.name in passed[node.module]
                            and f"{node.module}.{alias.name}" not in known]
    return out


def package(module: str) -> str:
    """fleet.repo.record → fleet.repo; fleet.errors → fleet.errors (a top-level module is its own package)."""
    return ".".join(module.split(".")[:2])


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                strong(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return sorted(found)


def module_graph(found: list[Edge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for edge in found:
        graph.setdefault(edge.source, set()).add(edge.target)
    return graph


def mutual_packages(found: list[Edge]) -> list[tuple[str, str]]:
    pairs = {(package(e.source), package(e.target)) for e in found if package(e.source) != package(e.target)}
    return sorted((a, b) for a, b in pairs if a < b and (b, a) in pairs)


def rank(module: str, layers: list[tuple[str, ...]]) -> int | None:
    """The index of the layer holding `module` (its longest listed prefix, the root package itself only by
    name), None when no layer lists it."""
    best: tuple[int, int] | None = None
    for at, members in enumerate(layers):
        for member in members:
            if module == member or ("." in member and module.startswith(member + ".")):
                if best is None or len(member) > best[1]:
                    best = (at, len(member))
    return None if best is None else best[0]


def upward(found: list[Edge], layers: list[tuple[str, ...]]) -> list[Edge]:
    """Imports whose target sits in a higher layer than their source."""
    out = []
    for edge in found:
        low, high = rank(edge.source, layers), rank(edge.target, layers)
        if low is not None and high is not None and high > low:
            out.append(edge)
    return out


def function_level(root: Path = FLEET) -> int:
    """Import statements inside a function anywhere under `root`, fleet modules or not."""
    count = 0
    for path in modules(root).values():
        for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count += sum(isinstance(n, (ast.Import, ast.ImportFrom))
                             for n in ast.walk(func) if n is not func)
    return count


def main() -> None:
    sys.path.insert(0, str(FLEET.parent))
    from tests.test_layers import LAYERS

    found = edges()
    mod = circles(module_graph(found))
    print(f"circles between modules: {len(mod)}")
    for c in mod:
        print("  " + " ".join(c))
    pkg_graph: dict[str, set[str]] = {}
    for e in found:
        if package(e.source) != package(e.target):
            pkg_graph.setdefault(package(e.source), set()).add(package(e.target))
    print(f"circles between packages: {len(circles(pkg_graph))}")
    for c in circles(pkg_graph):
        print("  " + " ".join(c))
    pairs = mutual_packages(found)
    print(f"package pairs importing each other: {len(pairs)}")
    for a, b in pairs:
        print(f"  {a} <-> {b}")
    up = upward(found, LAYERS)
    print(f"imports pointing up the layer order: {len(up)}")
    for e in up:
        print(f"  {e.source}:{e.line} ({e.func or '<module>'}) -> {e.target}")
    print(f"function-level imports: {function_level()} "
          f"(of fleet modules: {sum(e.func is not None for e in found)})")


if __name__ == "__main__":
    main()
