"""Rows of a sqlite3 cursor as dicts keyed by column: the one converter the index's stores share."""

from __future__ import annotations

import sqlite3


def all_rows(cur: sqlite3.Cursor) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def first_row(cur: sqlite3.Cursor) -> dict | None:
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))
