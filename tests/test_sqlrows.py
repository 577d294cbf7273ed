"""fleet.index.sqlrows.insert_rows and insert_values: every row inserted, in order, with few distinct statements."""

from __future__ import annotations

import sqlite3

import pytest

from fleet.index.sqlrows import ROWS_PER_INSERT, insert_rows, insert_values


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


@pytest.mark.parametrize("count", [1, ROWS_PER_INSERT + 3])
def test_insert_values_with_a_tail_takes_the_rows_as_a_table_in_order(count: int) -> None:
    """The events' insert: (value, key) bound a row, the rest joined from another table, ids in the rows' order."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("create table src (id integer primary key, name text)")
    conn.execute("create table t (id integer primary key autoincrement, name text, v integer, src integer)")
    conn.executemany("insert into src (id, name) values (?, ?)", [(n, f"line {n}") for n in range(2 * count)])
    keys = list(range(2 * count - 1, 0, -2))  # descending: the join must not order them by src's id
    values = [x for k in keys for x in (k * 10, k)]
    insert_values(conn, "insert into t (name, v, src) select s.name, v.column1, s.id from (", 2, values,
                  ") v cross join src s on s.id = v.column2")
    assert conn.execute("select name, v, src from t order by id").fetchall() == [(f"line {k}", k * 10, k) for k in keys]


def test_a_none_binds_null_through_the_adapter_the_index_registers() -> None:
    """sqlite3 looks for an adapter of every None it binds: the index registers one (no AttributeError raised
    and cleared a None), and what is stored is still NULL."""
    assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)](None) is None
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("create table t (a)")
    insert_rows(conn, "insert into t (a)", [(None,), (1,)])
    assert conn.execute("select typeof(a) from t order by rowid").fetchall() == [("null",), ("integer",)]
