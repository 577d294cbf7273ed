"""Rows to and from sqlite3: cursors' rows as dicts keyed by column, and many rows inserted at once, the
helpers the index's stores share."""

from __future__ import annotations

import sqlite3
from itertools import chain
from typing import Sequence

ROWS_PER_INSERT = 500  # measured best of 50-2,000 for a cold ingest's reflog and event rows (10 and 6 columns)


def all_rows(cur: sqlite3.Cursor) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def first_row(cur: sqlite3.Cursor) -> dict | None:
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


def insert_rows(conn: sqlite3.Connection, head: str, rows: Sequence[tuple]) -> None:
    """`head` (`insert into t (a, b)`) with every one of `rows` (tuples of one width), up to ROWS_PER_INSERT
    rows to a statement. A cold ingest inserts 100,000s of reflog and event rows: `executemany` runs the
    statement once per row, and for `event_rows` (AUTOINCREMENT) each run also rewrites its sequence row, so
    one statement per row cost about twice as much SQLite time for events and a quarter more for lines."""
    if not rows:
        return
    one = f"({', '.join('?' * len(rows[0]))})"
    full = f"{head} values {', '.join([one] * ROWS_PER_INSERT)}" if len(rows) >= ROWS_PER_INSERT else ""
    for start in range(0, len(rows), ROWS_PER_INSERT):
        part = rows[start:start + ROWS_PER_INSERT]
        sql = full if len(part) == ROWS_PER_INSERT else f"{head} values {', '.join([one] * len(part))}"
        conn.execute(sql, list(chain.from_iterable(part)))
