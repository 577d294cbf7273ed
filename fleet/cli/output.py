"""What every command prints through: JSON on stdout, and tables of plain text cells. Text from repositories
(names, branches, paths, messages) goes through fleet.safetext: as text, never as rich markup, with control
characters made visible."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Iterable

from fleet.safetext import json_safe, visible


def emit_json(value: object) -> None:
    sys.stdout.write(json_safe(json.dumps(value, indent=2, ensure_ascii=False, default=str)) + "\n")
    sys.stdout.flush()


def console():
    """A rich console on stdout for human-readable tables."""
    from rich.console import Console

    return Console(highlight=False)


KEEP_MAX = 40  # a kept column's widest cell; a longer one loses its middle, never its ends


def middle(text: str, width: int = KEEP_MAX) -> str:
    """`text` at most `width` characters, cut in the middle (`r02-dist…ems-notes`): both ends tell rows apart."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def print_table(columns: Iterable[str], rows: Iterable[Iterable[object]], right: tuple[str, ...] = (),
                keep: tuple[str, ...] = ()) -> None:
    """A borderless table of plain text cells (a list is one line each): no cell is read as rich markup, and
    every control character is visible. The `keep` columns (what tells rows apart: a name, an id) are never
    cut or wrapped (past KEEP_MAX, cut in the middle); the other cells wrap to fit the terminal (80 columns
    when piped)."""
    from rich.table import Table
    from rich.text import Text

    columns = list(columns)
    cells = [[("\n".join(map(visible, cell)) if isinstance(cell, list) else visible(cell)) for cell in row]
             for row in rows]
    table = Table(box=None, pad_edge=False)
    for i, col in enumerate(columns):
        if col in keep:
            for row in cells:
                row[i] = middle(row[i])
            widest = max([len(col), *(len(row[i]) for row in cells)])
            table.add_column(col, justify="right" if col in right else "left", no_wrap=True, min_width=widest)
        else:
            table.add_column(col, justify="right" if col in right else "left", overflow="fold")
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    console().print(table)



def shown(text: str) -> str:
    """Repository and agent text for a terminal: every unsafe character made visible (fleet.safetext),
    line by line."""
    return visible(text, keep="\n")


def emit(args: argparse.Namespace, value: dict, text) -> None:
    """JSON with --json, else the text (`text` may be a function of the value, built only when shown)."""
    if getattr(args, "json", False):
        emit_json(value)
    else:
        print(shown(text(value) if callable(text) else text))
