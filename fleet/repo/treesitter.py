"""Symbols of JavaScript, TypeScript, Go, Rust and Java files, from tree-sitter's parsers (the optional extra
`fleetdeck[semantic]`: `tree-sitter` and the tree-sitter project's own grammar wheels, no other dependency).

Each language names the node types that define functions, methods and types; a method is qualified by its
class, impl or receiver type (`Type.method`). A symbol's fingerprint is its token sequence without comments
(formatting and comments are not a change); a type's own fingerprint leaves its member symbols out, so one
method's edit reports that method. Without the extra, `available()` is False and callers say so.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

# language -> (grammar module, function returning the language pointer, file extensions)
GRAMMARS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "javascript": ("tree_sitter_javascript", "language", (".js", ".mjs", ".cjs", ".jsx")),
    "typescript": ("tree_sitter_typescript", "language_typescript", (".ts", ".mts", ".cts")),
    "tsx": ("tree_sitter_typescript", "language_tsx", (".tsx",)),
    "go": ("tree_sitter_go", "language", (".go",)),
    "rust": ("tree_sitter_rust", "language", (".rs",)),
    "java": ("tree_sitter_java", "language", (".java",)),
}
# node type -> kind, for nodes that define a symbol by their `name` field
_FUNCTIONS = {"function_declaration", "generator_function_declaration", "function_item", "method_definition",
              "method_declaration", "constructor_declaration"}
_TYPES = {"class_declaration": "class", "abstract_class_declaration": "class", "interface_declaration": "interface",
          "enum_declaration": "enum", "record_declaration": "class", "struct_item": "type", "enum_item": "type",
          "trait_item": "trait", "type_spec": "type", "type_alias_declaration": "type"}
# nodes whose children are walked with the same qualification (export wrappers, Go type groups, Java enums)
_PASS_THROUGH = {"export_statement", "type_declaration", "enum_body_declarations", "class_body", "interface_body",
                 "enum_body", "declaration_list", "field_declaration_list", "object_type", "statement_block"}
_COMMENTS = {"comment", "line_comment", "block_comment"}


def language_of(file: str) -> str | None:
    """The tree-sitter language for a file name, whether or not its grammar is installed."""
    for name, (_, _, exts) in GRAMMARS.items():
        if file.endswith(exts):
            return name
    return None


@functools.cache
def _parser(language: str) -> Any | None:
    try:
        import tree_sitter

        module_name, attr, _ = GRAMMARS[language]
        grammar = importlib.import_module(module_name)
        return tree_sitter.Parser(tree_sitter.Language(getattr(grammar, attr)()))
    except (ImportError, AttributeError, ValueError):
        return None


def available(language: str) -> bool:
    return _parser(language) is not None


def _tokens(node: Any, skip: Callable[[Any], bool]) -> tuple:
    out: list[tuple[str, bytes]] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in _COMMENTS or (current is not node and skip(current)):
            continue
        if current.child_count == 0:
            out.append((current.type, current.text))
        stack.extend(reversed(current.children))
    return tuple(out)


def _receiver(node: Any) -> str | None:
    """The type a Go method is declared on (`func (t *T) M()` -> T)."""
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return None
    stack = [receiver]
    while stack:
        current = stack.pop()
        if current.type == "type_identifier":
            return current.text.decode("utf-8", "replace")
        stack.extend(current.children)
    return None


def symbols(language: str, source: bytes) -> dict[str, dict[str, Any]]:
    """{qualified name: {kind, line, end_line, tree, body}}; ValueError when the file does not parse."""
    parser = _parser(language)
    if parser is None:
        raise LookupError(language)
    tree = parser.parse(source)
    if tree.root_node.has_error:
        error = _first_error(tree.root_node)
        raise ValueError(f"does not parse as {language}" + (f" at line {error}" if error else ""))
    found: dict[str, dict[str, Any]] = {}

    def record(node: Any, name: str, kind: str, members: bool) -> None:
        name_node = node.child_by_field_name("name")
        is_member = (lambda n: n.type in _FUNCTIONS or n.type in _TYPES) if members else (lambda n: False)
        found[name] = {"kind": kind, "line": node.start_point[0] + 1, "end_line": node.end_point[0] + 1,
                       "tree": _tokens(node, is_member),
                       "body": _tokens(node, lambda n: n == name_node or is_member(n))}

    def walk(node: Any, prefix: str, in_type: bool) -> None:
        for child in node.named_children:
            kind = child.type
            name_node = child.child_by_field_name("name")
            name = name_node.text.decode("utf-8", "replace") if name_node is not None else None
            if kind == "method_declaration" and language == "go" and name:
                owner = _receiver(child)
                record(child, f"{owner}.{name}" if owner else name, "method", False)
            elif kind in _FUNCTIONS and name:
                record(child, prefix + name, "method" if in_type else "function", False)
            elif kind in _TYPES and name:
                record(child, prefix + name, _TYPES[kind], True)
                body = child.child_by_field_name("body")
                if body is not None:
                    walk(body, f"{prefix}{name}.", True)
            elif kind == "impl_item":
                target = child.child_by_field_name("type")
                body = child.child_by_field_name("body")
                if target is not None and body is not None:
                    walk(body, target.text.decode("utf-8", "replace") + ".", True)
            elif kind == "mod_item" and name:
                body = child.child_by_field_name("body")
                if body is not None:
                    walk(body, f"{prefix}{name}::", False)
            elif kind in ("lexical_declaration", "variable_declaration") and not in_type:
                for declarator in child.named_children:
                    value = declarator.child_by_field_name("value")
                    dname = declarator.child_by_field_name("name")
                    if value is not None and dname is not None and value.type in (
                            "arrow_function", "function_expression", "function"):
                        record(declarator, prefix + dname.text.decode("utf-8", "replace"), "function", False)
            elif kind in _PASS_THROUGH and kind != "statement_block":
                walk(child, prefix, in_type)

    walk(tree.root_node, "", False)
    return found


def _first_error(node: Any) -> int | None:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "ERROR" or current.is_missing:
            return current.start_point[0] + 1
        stack.extend(reversed(current.children))
    return None
