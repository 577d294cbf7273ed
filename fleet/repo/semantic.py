"""Which functions, classes and methods a change added, removed or changed, per file — from parsers, never
from guesses.

Python is parsed with its own `ast`, JavaScript, TypeScript, Go, Rust and Java with tree-sitter when the
optional extra `fleetdeck[semantic]` is installed (fleet.repo.treesitter), on both sides (the blobs at the two commits, read with `cat-file`, so no
filter or textconv of the repository runs). A symbol is `changed` when its syntax tree differs (formatting
and comments do not count; docstrings do); a class's own tree leaves its methods out, so one method's edit
reports that method, not the class. A rename is a removal plus an addition; when the added symbol's tree is
identical to a removed one's apart from the name, the addition says so (`same_body_as`), which is a fact of
the two trees rather than a guess. Files in any other language (or without the extra), binary files, files too large to parse and
files that do not parse are listed with `supported: false`, the reason, and the `diff.refs` arguments that
give their text diff.
"""

from __future__ import annotations

import ast
import os
import warnings
from typing import Any, NotRequired, TypedDict

from fleet.caps import DEFAULT_CAP, cap, check_int
from fleet.git.layout import Found
from fleet.git.revs import resolve_range
from fleet.git.run import out, text
from fleet.repo import treesitter
from fleet.repo.diffs import RefPair, path_spec

MAX_PARSE_BYTES = 1024 * 1024
PYTHON = (".py", ".pyi", ".pyw")
_STATUS = {"A": "added", "D": "deleted", "M": "modified", "T": "type_changed", "R": "renamed", "C": "copied"}


class Symbol(TypedDict):
    name: str
    kind: str
    line: int
    end_line: int | None


class AddedSymbol(Symbol):
    same_body_as: str | None


class ChangedSymbol(Symbol):
    old_line: int


class SemanticFile(TypedDict):
    path: str
    old_path: str | None
    status: str
    language: str | None
    supported: bool
    reason: NotRequired[str | None]
    text_diff: NotRequired[dict | None]
    added: NotRequired[list[AddedSymbol] | None]
    removed: NotRequired[list[Symbol] | None]
    changed: NotRequired[list[ChangedSymbol] | None]


class SemanticDiff(RefPair):
    supported: bool
    files: list[SemanticFile]
    file_count: int
    supported_count: int


def _symbols(source: bytes) -> dict[str, dict[str, Any]]:
    """{qualified name: {kind, line, end_line, tree, body}} of the classes, methods and top-level functions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in the file are its business
        module = ast.parse(source)
    found: dict[str, dict[str, Any]] = {}

    def visit(nodes: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = "method" if in_class else "function"
                found[prefix + node.name] = _entry(node, kind, ast.dump(node))
            elif isinstance(node, ast.ClassDef):
                own = ast.ClassDef(**{**{f: getattr(node, f) for f in node._fields},
                                      "body": [n for n in node.body if not isinstance(
                                          n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]})
                found[prefix + node.name] = _entry(node, "class", ast.dump(own))
                visit(node.body, f"{prefix}{node.name}.", True)
            elif isinstance(node, (ast.If, ast.Try)) and not prefix:
                # definitions under `if TYPE_CHECKING:` / `try: import` fallbacks are still module symbols
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []), prefix, in_class)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body, prefix, in_class)

    visit(module.body, "", False)
    return found


def _entry(node: ast.AST, kind: str, tree: str) -> dict[str, Any]:
    renamed = ast.dump(node).replace(f"name={getattr(node, 'name', '')!r}", "name=''", 1)
    return {"kind": kind, "line": node.lineno, "end_line": node.end_lineno, "tree": tree, "body": renamed}


def _blob(path: str, sha: str, file: str) -> bytes | None:
    """The file's bytes at `sha`, or None when it is larger than MAX_PARSE_BYTES."""
    size = text(out(path, ["cat-file", "-s", f"{sha}:{file}"])).strip()
    if int(size or 0) > MAX_PARSE_BYTES:
        return None
    return out(path, ["cat-file", "blob", f"{sha}:{file}"], max_bytes=MAX_PARSE_BYTES + 1)


def _compare(old: dict[str, dict], new: dict[str, dict]) -> dict[str, list[dict]]:
    removed = [{"name": n, "kind": s["kind"], "line": s["line"], "end_line": s["end_line"]}
               for n, s in old.items() if n not in new]
    by_body = {old[r["name"]]["body"]: r["name"] for r in removed}
    added = []
    for n, s in new.items():
        if n in old:
            continue
        twin = by_body.get(s["body"])
        added.append({"name": n, "kind": s["kind"], "line": s["line"], "end_line": s["end_line"],
                      "same_body_as": twin})
    changed = [{"name": n, "kind": s["kind"], "line": s["line"], "end_line": s["end_line"],
                "old_line": old[n]["line"]}
               for n, s in new.items() if n in old and old[n]["tree"] != s["tree"]]
    return {"added": added, "removed": removed, "changed": changed}


def _unsupported(entry: dict, reason: str, base: str, head: str) -> dict:
    return {**entry, "supported": False, "reason": reason,
            "text_diff": {"tool": "diff.refs", "arguments": {"base": base, "head": head,
                                                            "path_filter": entry["path"]}}}


def _language(file: str) -> str | None:
    return "python" if file.endswith(PYTHON) else treesitter.language_of(file)


def _parse(language: str, data: bytes) -> dict[str, dict[str, Any]]:
    return _symbols(data) if language == "python" else treesitter.symbols(language, data)


def _file(path: str, status: str, old_path: str | None, new_path: str, sides: dict) -> dict[str, Any]:
    language = _language(new_path)
    entry = {"path": new_path, "old_path": old_path if old_path != new_path else None, "status": status,
             "language": language}
    base, head = sides["diff_from"], sides["head_sha"]
    if language is None or (old_path and _language(old_path) != language):
        ext = os.path.splitext(new_path)[1] or "no extension"
        return _unsupported(entry, f"no parser for {ext} files", base, head)
    if language != "python" and not treesitter.available(language):
        return _unsupported(entry, f"no {language} parser installed (pip install 'fleetdeck[semantic]')",
                            base, head)
    trees = []
    for sha, file, present in ((base, old_path or new_path, status != "added"), (head, new_path, status != "deleted")):
        if not present:
            trees.append({})
            continue
        data = _blob(path, sha, file)
        if data is None:
            return _unsupported(entry, f"larger than {MAX_PARSE_BYTES} bytes", base, head)
        if b"\0" in data[:8000]:
            return _unsupported(entry, "binary", base, head)
        side = "base" if sha == base else "head"
        try:
            trees.append(_parse(language, data))
        except SyntaxError as exc:
            where = f" at line {exc.lineno}" if exc.lineno else ""
            return _unsupported(entry, f"does not parse as Python on the {side} side{where}", base, head)
        except ValueError as exc:
            return _unsupported(entry, f"{exc} on the {side} side", base, head)
    return {**entry, "supported": True, **_compare(*trees)}


def diff_semantic(found: Found, base: str, head: str | None = None, path_filter: str | None = None,
                  max_files: int = DEFAULT_CAP) -> SemanticDiff:
    """Per changed file from `base` to `head` (default HEAD; `base` may be `a..b` or `a...b`): the symbols
    added, removed and changed, or `supported: false` with the reason and the text-diff arguments."""
    check_int(max_files, "max_files", 1, 1000)
    path = found.path
    sides = resolve_range(path, base, head)
    spec = path_spec(path_filter)
    raw = text(out(path, ["diff", "-z", "--name-status", "-M", "--no-ext-diff", sides["diff_from"],
                          sides["head_sha"], *spec]))
    fields = raw.split("\0")
    changes: list[tuple[str, str | None, str]] = []
    i = 0
    while i < len(fields) - 1:
        code = fields[i]
        if code[:1] in ("R", "C"):
            changes.append((_STATUS[code[0]], fields[i + 1], fields[i + 2]))
            i += 3
        elif code:
            changes.append((_STATUS.get(code[0], "modified"), None, fields[i + 1]))
            i += 2
        else:
            i += 1
    kept, info = cap(changes, max_files)
    files = [_file(path, status, old, new, sides) for status, old, new in kept]
    return {**sides, "supported": all(f["supported"] for f in files), "files": files, "file_count": len(changes),
            "supported_count": sum(1 for f in files if f["supported"]), **info}
