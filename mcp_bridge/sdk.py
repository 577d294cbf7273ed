"""What importing the MCP SDK costs `fleetdeck mcp`, cut: its server half only, and no collector passes over it.

`import mcp.server` first runs the package's `mcp/__init__.py`, which imports the SDK's client stack
(`mcp.client`: Client, ClientSession, the stdio and HTTP transports) only to re-export names: ~8% of the
SDK's import, paid on every connect. `without_client()` puts the package in `sys.modules` from its own spec
without running that file (`importlib.util.module_from_spec`, the step the import system takes before it
executes a module), so the submodules the server imports (`mcp.server`, `mcp.shared`, `mcp.types`) load
as usual and bind themselves on it. The first time anything asks the package for a name it does not have
yet (`from mcp import Client`, `mcp.__all__`), its module `__getattr__` (PEP 562) runs `mcp/__init__.py` in
it, once: the package is then exactly what a plain import makes, only later.

It does nothing, leaving the plain import, when `mcp` is already imported or its `__init__` is more than
imports and `__all__` (a later SDK that configured something there would need it run first): checked on
the file at every start. tests/test_mcp_sdk_split.py holds both sides: the real `fleetdeck mcp` answers a
tool call without ever importing `mcp.client`, and the package completes on demand.

`start_up()` (both, before the first import of the SDK) and `serving()` (once start-up is over) are how
`fleetdeck mcp` uses them; the garbage collector's part is in their docstrings.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import sys
import threading
import types


def start_up() -> None:
    """What `fleetdeck mcp` does before it imports anything of the SDK: the server half only (`without_client`),
    with the cyclic garbage collector paused until it serves (`serving`). Importing the SDK makes ~130,000
    long-lived objects (its pydantic protocol models) and next to no garbage, and the collector, run by
    allocation counts, walked them again and again: about a tenth of the import's CPU."""
    gc.disable()
    without_client()


def serving() -> None:
    """Start-up is over: what it made lives as long as the process, so it is moved out of every later
    collection (`gc.freeze`, whose documentation describes this use), then the collector runs again. The few
    hundred objects of import-time garbage in it (temporary classes and functions) stay."""
    gc.freeze()
    gc.enable()


def only_imports(source: str) -> bool:
    """True when a module's body is a docstring, imports, and `__all__` (with `#` comments): running it
    binds names and has no other effect of its own."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if (isinstance(node, (ast.Assign, ast.AnnAssign))
                and [getattr(t, "id", None) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
                == ["__all__"]):
            continue
        return False
    return True


def without_client(name: str = "mcp") -> bool:
    """Make `name` (the SDK's package) importable piecemeal, its `__init__` deferred to first use (see the
    module's docstring). True when it did; False when it left the plain import in place."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    loader = spec.loader if spec is not None else None
    if spec is None or not spec.submodule_search_locations or not spec.origin or loader is None \
            or not hasattr(loader, "exec_module"):
        return False
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            if not only_imports(fh.read()):
                return False
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    package = importlib.util.module_from_spec(spec)
    package.__getattr__ = _completer(package, loader)
    sys.modules[name] = package
    return True


def _completer(package: types.ModuleType, loader) -> object:
    """The package's `__getattr__`: runs its `__init__` once, then answers as the complete package would."""
    lock = threading.RLock()
    started = False

    def __getattr__(attr: str) -> object:
        nonlocal started
        with lock:  # another thread waits for the run; this one, re-entering during it, sees a partial package
            if not started:
                started = True
                try:
                    loader.exec_module(package)
                finally:
                    if package.__dict__.get("__getattr__") is __getattr__:
                        del package.__dict__["__getattr__"]
        try:
            return package.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {package.__name__!r} has no attribute {attr!r}") from None

    return __getattr__
