"""Rows to and from sqlite3: cursors' rows as dicts keyed by column, and many rows inserted at once, the
helpers the index's stores share."""

from __future__ import annotations

import sqlite3
from itertools import chain
from typing import Sequence

# None bound as a parameter is NULL either way, but CPython's sqlite3 looks for an adapter of every value not
# an exact int, float, str or bytearray, and finding none it looks up `__adapt__` and `__conform__`, raising
# and clearing an AttributeError for each (~2,900 instructions a None; ~1,300 with this adapter): a cold
# ingest binds a None for every unset column of its repos, branches and worktrees and for the first line of
# each reflog (0.7% of its instructions). Process-wide, as sqlite3's adapters are: a None still binds NULL.
sqlite3.register_adapter(type(None), lambda value: value)

ROWS_PER_INSERT = 256  # a power of two; 50-2,000 rows a statement measured alike for a cold ingest's rows


def all_rows(cur: sqlite3.Cursor) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def first_row(cur: sqlite3.Cursor) -> dict | None:
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


def insert_rows(conn: sqlite3.Connection, head: str, rows: Sequence[tuple]) -> None:
    """`head` (`insert into t (a, b)`) with every one of `rows` (tuples of one width), many rows to a
    statement. A cold ingest inserts 100,000s of reflog and event rows: `executemany` runs the statement once
    per row, and for `event_rows` (AUTOINCREMENT) each run also rewrites its sequence row, so one statement
    per row cost about twice as much SQLite time for events and a quarter more for lines. The statements hold
    ROWS_PER_INSERT rows, then halves of it for the rest: sqlite3 keeps each prepared statement (~1 KB a row
    of 10 columns), and a statement for every length of the rest held ~50 MB in a long-running process; these
    are at most 9 per table."""
    if rows:
        insert_values(conn, head, len(rows[0]), list(chain.from_iterable(rows)))


def insert_values(conn: sqlite3.Connection, head: str, width: int, values: list, tail: str = "") -> None:
    """`insert_rows` of the rows laid end to end in `values`, `width` values each: a caller gathering many
    rows keeps no tuple per row (100,000s of them, each one also work for the garbage collector). With a
    `tail`, `head values (...), ... tail` is any statement over the rows as a table (`insert ... select ...
    from (` ... `) v join ...`)."""
    one = f"({', '.join('?' * width)})"
    count = len(values) // width
    start, size = 0, ROWS_PER_INSERT
    while start < count:
        while size > count - start:
            size //= 2
        conn.execute(f"{head} values {', '.join([one] * size)}{tail}", values[start * width:(start + size) * width])
        start += size
