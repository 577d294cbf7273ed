"""fleet.index.sqlrows.insert_rows: every row inserted, in order, with few distinct statements."""

from __future__ import annotations

import sqlite3

import pytest

from fleet.index.sqlrows import ROWS_PER_INSERT, insert_rows


@pytest.mark.parametrize("count", [0, 1, 3, ROWS_PER_INSERT - 1, ROWS_PER_INSERT, ROWS_PER_INSERT + 1, 1000])
def test_insert_rows_inserts_every_row_in_order(count: int) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("create table t (id integer primary key autoincrement, a integer, b text)")
    rows = [(n, f"row {n}") for n in range(count)]
    insert_rows(conn, "insert into t (a, b)", rows)
    assert conn.execute("select a, b from t order by id").fetchall() == rows


def test_insert_rows_prepares_at_most_nine_statements_whatever_the_counts() -> None:
    """A long-running process must not keep a prepared statement for every count it ever inserted."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("create table t (a integer)")
    sizes: set[int] = set()
    conn.set_trace_callback(lambda sql: sizes.add(sql.count("(")))
    for count in range(1, 2 * ROWS_PER_INSERT):
        insert_rows(conn, "insert into t (a)", [(n,) for n in range(count)])
    assert len(sizes) <= 9
    assert conn.execute("select count(*) from t").fetchone()[0] == sum(range(1, 2 * ROWS_PER_INSERT))
