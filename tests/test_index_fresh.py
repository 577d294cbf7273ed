"""A new index made in one step (fleet/index/fresh.py) is the index its migrations make: the same schema, the
same migrations recorded as applied, the same rows, and it takes every later migration as a migrated one
does. When a migration is added, the first test fails until fresh.py's constants are made again."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from fleet.index import fresh
from fleet.index.store import SCHEMA_VERSION, Index, open_index


def _migrated(path: Path, monkeypatch) -> Index:
    """An index made through every migration (the path fresh.py skips), as before it existed."""
    with monkeypatch.context() as patch:
        patch.setattr(fresh, "create", lambda conn: False)
        index = open_index(path)
    assert "sqlite_utils" in sys.modules
    return index


def _rows(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    """Every row of every table (the per-file and per-moment values left out: the instance id, when each
    migration was recorded)."""
    tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table' order by name")]
    out = {}
    for table in tables:
        if table == "_sqlite_migrations":
            out[table] = conn.execute("select id, migration_set, name from _sqlite_migrations order by id").fetchall()
        elif table == "meta":
            out[table] = conn.execute("select key from meta order by key").fetchall()
        else:
            out[table] = sorted(conn.execute(f'select * from "{table}"').fetchall(), key=repr)
    return out


def test_a_new_index_is_the_one_its_migrations_make(tmp_path: Path, monkeypatch) -> None:
    made = open_index(tmp_path / "fresh.db")
    migrated = _migrated(tmp_path / "migrated.db", monkeypatch)
    assert fresh.VERSION == SCHEMA_VERSION, "a migration was added: make fleet/index/fresh.py's constants again"
    master = "select type, name, tbl_name, sql from sqlite_master order by rowid"
    assert made.conn.execute(master).fetchall() == migrated.conn.execute(master).fetchall()
    assert fresh.schema_of(migrated.conn) == (list(fresh.STATEMENTS), list(fresh.MIGRATIONS), list(fresh.SEQUENCES))
    assert made.schema_version == migrated.schema_version == SCHEMA_VERSION
    assert _rows(made.conn) == _rows(migrated.conn)
    instance = made.meta("instance")
    assert isinstance(instance, str) and len(instance) == 16 and instance != migrated.meta("instance")
    from fleet.index.schema import migrations
    assert not migrations.pending(made.db) and [m.name for m in migrations.applied(made.db)] == list(fresh.MIGRATIONS)
    made.close()
    migrated.close()


def test_a_new_index_takes_a_later_migration_and_a_file_in_use_is_never_remade(tmp_path: Path) -> None:
    """A migration added after these constants runs over a fresh index as over a migrated one; an index that
    holds anything (a half-made one, another fleetdeck's) is migrated, never given the statements again."""
    made = open_index(tmp_path / "fresh.db")
    from sqlite_utils import Migrations

    later = Migrations("fleetdeck")
    for name in fresh.MIGRATIONS:
        later(name=name)(lambda db: None)

    @later(name="m999_later")
    def _later(db) -> None:
        db["later"].create({"id": int}, pk="id")

    later.apply(made.db)
    assert "later" in made.db.table_names() and [m.name for m in later.applied(made.db)][-1] == "m999_later"
    made.close()
    again = open_index(tmp_path / "fresh.db")        # opened again: at its version, nothing is made or run
    assert again.schema_version == SCHEMA_VERSION and "later" in again.db.table_names()
    again.close()
    conn = sqlite3.connect(tmp_path / "fresh.db", isolation_level=None)
    assert fresh.create(conn) is False                # not empty: refused, nothing written
    conn.close()


def test_opening_a_new_index_imports_no_sqlite_utils(tmp_path: Path) -> None:
    """What the one-step path is for: a cold `serve` or `scan` makes its index without importing sqlite-utils."""
    code = ("import sys; from fleet.index.store import open_index; open_index(sys.argv[1]); "
            "print('sqlite_utils' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "new.db")], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "False"
