"""The fleet index: one SQLite file (WAL) that every surface reads and the scanner/watcher writes.

Repo rows are updated in place on every re-read; reflog lines are appended once and kept after git expires
them, so the index remembers what git forgot. Writes take `BEGIN IMMEDIATE` so a second process writing a
small row (a proposal, a presence sighting) waits on the busy timeout instead of failing.

This is storage only: it never runs git, never reads git's files and never scores. `fleet.index.scan.ingest`
orchestrates a write (read -> score -> read reflogs -> one write transaction -> record events). The file holds paths, branch names and commit messages, so it is
created 0600 in a 0700 folder; a file fleetdeck cannot use (corrupt, truncated, a directory, read-only) is
refused up front with one `FleetError` naming it and saying what to do.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import stat
import threading
import time
from contextlib import contextmanager
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, NamedTuple


from fleet.errors import FleetError
from fleet.index.agents import AgentRows
from fleet.index import fresh
from fleet.index.digestq import DigestQueries
from fleet.index.presence import PresenceRows
from fleet.index.proposals import ProposalRows
from fleet.index.restore_points import RestorePointRows
from fleet.index.sqlrows import insert_values
from fleet.timespec import iso
from fleet.xdg import data_home

_REFLOG_INSERT = "insert into reflog (repo_id, ref, old_sha, new_sha, identity, at, tz, message, kind)"
_REFLOG_INSERT_ID = "insert into reflog (id, repo_id, ref, old_sha, new_sha, identity, at, tz, message, kind)"
_MARK_INSERT = "insert or replace into repo_marks (repo_id, mark)"  # a record's watch mark (`_mark_row`)
REFLOG_IDS_KEY = "reflog_ids_upto"  # meta: the highest reflog line id ever given (lines may have been pruned since)

if TYPE_CHECKING:
    from sqlite_utils import Database

    from fleet.git.layout import Found      # a type only: an agent's hook opens the index and loads no git reader

BUSY_TIMEOUT_MS = 5000
# The number of migrations in fleet/index/schema.py; an index at this version opens without loading them.
SCHEMA_VERSION = 15
HISTORY_KEY = "history_backlog"  # meta: {total, ids} of the repos stored before their reflog history
PREDICTION_KEY = "prediction_backlog"  # meta: {total, ids} of the repos stored before their merge prediction
JSON_COLUMNS = ("operation_detail", "predicted_conflicts", "reasons")
BOOL_COLUMNS = ("bare", "detached", "upstream_gone", "gone")
_REPO_COLUMNS = (
    "path", "root", "name", "bare", "gitdir", "branch", "detached", "head", "head_ref", "upstream",
    "upstream_gone", "ahead", "behind", "staged", "unstaged", "untracked", "conflicted", "stashes",
    "operation", "operation_detail", "predicted_conflicts", "last_activity", "scanned_at", "error",
)


def is_busy(exc: BaseException) -> bool:
    """Whether `exc` is the engine saying another process holds the write lock too long (the surfaces answer
    INDEX_BUSY): the one place that knows how SQLite words it."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def default_db_path() -> Path:
    env = os.environ.get("FLEETDECK_DB")
    if env:
        return Path(env)
    return data_home() / "fleetdeck" / "fleet.db"


def open_index(db_path: str | os.PathLike[str] | None = None) -> "Index":
    """Open (creating and migrating as needed) the index at `db_path`, `$FLEETDECK_DB` or the default."""
    return Index(Path(db_path) if db_path else default_db_path())


class Index:
    """A handle on the index database; safe to share between threads of one process.

    `conn` is the sqlite3 connection everything uses; `db` wraps it in sqlite-utils for the migrations
    (imported only when the schema is behind: it costs more start-up time than the rest of a CLI call).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        _prepare_file(path)
        self.lock = threading.RLock()
        try:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
                                   isolation_level=None)
        except sqlite3.Error as exc:
            raise unusable(path, exc) from None
        self.conn = conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = OFF")
            if self.schema_version != SCHEMA_VERSION:
                self._migrate()
        except sqlite3.Error as exc:
            conn.close()
            raise unusable(path, exc) from None

    @cached_property
    def db(self) -> "Database":
        from sqlite_utils import Database

        return Database(self.conn)

    @cached_property
    def agents(self) -> AgentRows:
        """The agents' credentials (`fleet.index.agents`)."""
        return AgentRows(self)

    @cached_property
    def digest(self) -> DigestQueries:
        """The digest's named queries (`fleet.index.digestq`)."""
        return DigestQueries(self)

    @cached_property
    def presence(self) -> PresenceRows:
        """The presence tables' named queries (`fleet.index.presence`)."""
        return PresenceRows(self)

    @cached_property
    def proposals(self) -> ProposalRows:
        """The proposals table's named queries (`fleet.index.proposals`)."""
        return ProposalRows(self)

    @cached_property
    def restore_points(self) -> RestorePointRows:
        """The restore points' named queries (`fleet.index.restore_points`)."""
        return RestorePointRows(self)

    def _migrate(self) -> None:
        with os.fdopen(os.open(str(self.path) + ".migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)) as lockfile:
            fcntl.flock(lockfile, fcntl.LOCK_EX)
            # a new index: the migrations' end state in one step, without sqlite-utils (fleet.index.fresh)
            if self.schema_version == 0 and fresh.VERSION == SCHEMA_VERSION and fresh.create(self.conn):
                return
            from fleet.index.schema import migrations

            if migrations.pending(self.db):
                migrations.apply(self.db)
            self.conn.execute(f"PRAGMA user_version = {len(migrations.applied(self.db))}")

    @property
    def schema_version(self) -> int:
        """How many migrations this index has applied (kept in `PRAGMA user_version`)."""
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken with BEGIN IMMEDIATE (no read-to-write upgrade failures). Called
        inside another `write()` of this handle, it joins that transaction."""
        with self.lock:
            conn = self.conn
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def busy_timeout(self, ms: int) -> Iterator[None]:
        """Wait at most `ms` for another process's write lock inside the block (the index's usual wait is
        seconds: right for the scanner, wrong for bookkeeping beside an answer)."""
        old = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        self.conn.execute(f"PRAGMA busy_timeout = {int(ms)}")
        try:
            yield
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(old)}")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (BEGIN DEFERRED: one consistent view across its statements, and no write lock,
        so it never waits on a writer); inside another `read()` or `write()` of this handle, it joins that."""
        with self.lock:
            conn = self.conn
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    # --- meta: small named settings and states (JSON values) ----------------------------------------

    def meta(self, key: str, default: object = None) -> object:
        """The JSON value stored under `key`, or `default` when there is none (or it is not JSON)."""
        row = self.conn.execute("select value from meta where key = ?", (key,)).fetchone()
        if row is None:
            return default
        try:
            return json.loads(row[0])
        except (TypeError, ValueError):
            return default

    def set_meta(self, key: str, value: object) -> None:
        """Store `value` (JSON) under `key`, replacing what was there."""
        with self.write() as conn:
            conn.execute("insert or replace into meta (key, value) values (?, ?)", (key, json.dumps(value)))

    def meta_text(self, key: str) -> str | None:
        """The value stored under `key` as it is (text a caller wrote with `set_meta_texts`), or None."""
        row = self.conn.execute("select value from meta where key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def meta_like(self, prefix: str) -> list[tuple[str, str]]:
        """(key, value as stored) of every key starting with `prefix` (a LIKE pattern), by key."""
        return self.conn.execute("select key, value from meta where key like ? order by key",
                                 (prefix + "%",)).fetchall()

    def set_meta_texts(self, values: dict[str, str | None]) -> None:
        """Store each value as it is under its key, in one transaction; None deletes the key."""
        with self.write() as conn:
            conn.executemany("delete from meta where key = ?", [(k,) for k, v in values.items() if v is None])
            conn.executemany("insert or replace into meta (key, value) values (?, ?)",
                             [(k, v) for k, v in values.items() if v is not None])

    def take_meta(self, key: str) -> str | None:
        """Delete `key` and return the value it held (None: there was none): a one-use value used up once."""
        with self.write() as conn:
            row = conn.execute("delete from meta where key = ? returning value", (key,)).fetchone()
        return None if row is None else row[0]

    def add_meta_expiring(self, prefix: str, key: str, until: float, now: float) -> None:
        """Store `key` valid until `until` (unix seconds, its value), dropping the keys under `prefix` that
        expired before `now` in the same transaction."""
        with self.write() as conn:
            conn.execute("delete from meta where key like ? and cast(value as real) < ?", (prefix + "%", now))
            conn.execute("insert into meta (key, value) values (?, ?)", (key, repr(until)))

    # --- roots ---------------------------------------------------------------------------------

    def roots(self) -> list[str]:
        return [r[0] for r in self.conn.execute("select path from roots order by path")]

    def add_root(self, path: str | os.PathLike[str]) -> str:
        real = os.path.realpath(path)
        with self.write() as conn:
            conn.execute("insert or ignore into roots (path, added_at) values (?, ?)", (real, iso(time.time())))
        return real

    def remove_root(self, path: str | os.PathLike[str]) -> bool:
        real = os.path.realpath(path)
        with self.write() as conn:
            cur = conn.execute("delete from roots where path = ? or path = ?", (real, os.fspath(path)))
        return cur.rowcount > 0

    # --- writing repos ---------------------------------------------------------------------------

    def store_repos(self, items: list[tuple[Found, dict, list[dict]]]) -> list[int]:
        """Store many (found, record, reasons) in one transaction (a scan writes in batches: far fewer
        commits): the repo rows, their branches, worktrees, ..., and the reflog lines appended since the last
        read. `reasons` is the record's attention list, highest first (its score ranks the radar)."""
        from fleet.index import reflogs     # git's files: an agent's hook opens the index and reads none

        prepared = reflogs.read(self.prepare(items))
        with self.write():
            return [s.repo_id for s in self.store_prepared(reflogs.recheck(self, prepared)[0])]

    def prepare(self, items: list[tuple[Found, dict, list[dict]]]) -> list["Prepared"]:
        """The rows `store_prepared` writes, built without the write lock, with the reflog files the index
        has read of each repo (as it stood just now); the ingest then reads the lines appended since
        (`fleet.index.reflogs`)."""
        state = self.reflog_state([found.path for found, _, _ in items])
        return [Prepared(found, record, _repo_row(found, record, reasons), *state.get(found.path, (None, {})),
                         None, None) for found, record, reasons in items]

    def reflog_state(self, paths: list[str]) -> dict[str, tuple[int, dict[str, tuple[int, int]]]]:
        """{path: (repo id, {ref: (inode, size read up to)})} of the repos the index holds at `paths`."""
        ids = dict(self.conn.execute(f"select path, id from repos where path in ({', '.join('?' * len(paths))})",
                                     paths).fetchall()) if paths else {}
        known = self.reflog_files(list(ids.values()))
        return {path: (repo_id, known.get(repo_id, {})) for path, repo_id in ids.items()}

    def store_prepared(self, prepared: list["Prepared"]) -> list["Stored"]:
        """Write prepared repos in one transaction (the caller's `write()`, or one of its own); `prepared` must
        stand as the index does inside it (`fleet.index.reflogs.recheck` under the same write lock)."""
        with self.write() as conn:
            gen = _next_generation(conn)
            appends = _Appends(conn)
            stored = [self._store(conn, p, gen, appends) for p in prepared]
            appends.flush()
            _update_backlog(conn, HISTORY_KEY, add=[s.repo_id for s in stored if s.prepared.deferred and s.first],
                            done=[s.repo_id for s in stored if s.prepared.logs is not None])
            pending = {s.repo_id for s in stored if _pending(s.prepared.record)}
            _update_backlog(conn, PREDICTION_KEY, add=sorted(pending),
                            done=[s.repo_id for s in stored if s.repo_id not in pending])
            return stored

    def store_history(self, prepared: list["Prepared"], unread: list[int] = ()) -> list["Stored"]:
        """Inside the caller's `write()`: append the reflog lines of repos in the history backlog, read as a
        first read (`prepared`: all their lines, against no known file), and take them off the backlog with
        the `unread` ids (nothing to read). A repo that left the backlog meanwhile (a full read stored its
        lines) is left alone: its `Stored` says nothing was written."""
        with self.write() as conn:
            waiting = set(_backlog(conn, HISTORY_KEY)["ids"])
            held = self.reflog_files([p.repo_id for p in prepared])
            appends = _Appends(conn)
            stored = [self._store_lines(conn, p, p.repo_id, True, appends)
                      if p.repo_id in waiting and p.repo_id not in held else Stored(p, p.repo_id, False, None, 0)
                      for p in prepared]
            appends.flush()
            _update_backlog(conn, HISTORY_KEY, add=[], done=[p.repo_id for p in prepared] + list(unread))
            return stored

    def history_backlog(self) -> dict:
        """`{total, ids}`: the repos stored before their reflog history was read (`ids`, still waiting) out of
        the `total` stored so since the backlog was last empty."""
        return _backlog(self.conn, HISTORY_KEY)

    def prediction_backlog(self) -> dict:
        """`{total, ids}`: the repos stored with a merge prediction not made yet (`ids`: their stored
        `predicted_conflicts` is a `fleet.repo.record.pending_prediction`) out of the `total` stored so since
        the backlog was last empty. Every store of a repo keeps it in step with the stored column."""
        return _backlog(self.conn, PREDICTION_KEY)

    def store_predictions(self, made: list[tuple[int, str, dict | None, list[dict]]], unread: list[int] = ()) -> list[int]:
        """Store merge predictions made for repos of the prediction backlog: (repo id, the pending prediction
        they were made for as the index stores it, the prediction, the record's reasons with it), one
        transaction, and take them off the backlog with the `unread` ids (nothing to predict: gone, or no
        longer as read). A repo stored again meanwhile (its stored prediction is no longer that one) is left
        alone. Returns the ids written (a new generation: every surface re-ranks them)."""
        with self.write() as conn:
            gen = _next_generation(conn)
            written = [repo_id for repo_id, pending, prediction, reasons in made if conn.execute(
                "update repos set predicted_conflicts = ?, reasons = ?, score = ?, generation = ?"
                " where id = ? and predicted_conflicts = ?",
                (None if prediction is None else json.dumps(prediction, sort_keys=True), json.dumps(reasons),
                 reasons[0]["score"] if reasons else 0, gen, repo_id, pending)).rowcount]
            _update_backlog(conn, PREDICTION_KEY, add=[], done=[m[0] for m in made] + list(unread))
            return written

    def _store(self, conn: sqlite3.Connection, p: "Prepared", gen: int, appends: "_Appends") -> "Stored":
        record = p.record
        row = dict(p.row, generation=gen)
        new = p.repo_id is None
        if not new:
            repo_id = p.repo_id
            sets = ", ".join(f"{c} = ?" for c in row)
            conn.execute(f"update repos set {sets}, gone = 0, gone_at = null where id = ?", (*row.values(), repo_id))
        else:
            row["first_seen"] = iso(time.time())
            cols = ", ".join(row)
            cur = conn.execute(f"insert into repos ({cols}) values ({', '.join('?' * len(row))})",
                               tuple(row.values()))
            repo_id = cur.lastrowid
        if "branches" in record:
            self._replace_children(conn, repo_id, record, new, appends)
        appends.add(_MARK_INSERT, [_mark_row(repo_id, record.get("watch_mark"))])
        if p.logs is None:
            return Stored(p, repo_id, new, None, 0)
        return self._store_lines(conn, p, repo_id, new, appends)

    def _store_lines(self, conn: sqlite3.Connection, p: "Prepared", repo_id: int, new: bool,
                     appends: "_Appends") -> "Stored":
        """Append `p`'s reflog lines to `repo_id` (`new`: it holds none yet) and note the files read (inserted
        at `appends.flush`)."""
        first, count = appends.lines(repo_id, p.logs, new)
        appends.add("insert or replace into reflog_files (repo_id, ref, inode, size)",
                    [(repo_id, ref, inode, end) for ref, inode, end, _ in p.logs])
        vanished = set(p.known) - {s[0] for s in p.stats}
        if vanished:
            appends.flush()  # a repo stored twice in one write ends as its last read said
            conn.executemany("delete from reflog_files where repo_id = ? and ref = ?",
                             [(repo_id, ref) for ref in vanished])
        return Stored(p, repo_id, new, first, count)

    def _replace_children(self, conn: sqlite3.Connection, repo_id: int, record: dict, new: bool,
                          appends: "_Appends") -> None:
        tables = {
            "branches": [(repo_id, b["name"], b["head"], b["upstream"], b["upstream_ref"],
                          int(b["upstream_gone"]), b["ahead"], b["behind"], int(b["current"]))
                         for b in record.get("branches", [])],
            "worktrees": [(repo_id, w["path"], w["id"], w["branch"], w["head"], int(w["detached"]),
                           int(w["locked"]), w["lock_reason"], int(w["prunable"]), w["prunable_reason"],
                           w["staged"], w["unstaged"], w["untracked"], w["conflicted"], w["operation"],
                           w["error"]) for w in record.get("worktrees", [])],
            "submodules": [(repo_id, s["path"], s["name"], s["url"], s["recorded"], s["checked_out"],
                            s["state"], s.get("error")) for s in record.get("submodules", [])],
            "stashes": [(repo_id, s["index"], s["sha"], s["message"], s["at"])
                        for s in record.get("stash_list", [])],
            "remotes": [(repo_id, r["name"], r["url"]) for r in record.get("remotes", [])],
        }
        if not new:  # a repo stored for the first time has no old rows (a cold scan saves 5 statements)
            appends.flush()  # a repo stored twice in one write ends as its last read said
            for table in tables:
                conn.execute(f"delete from {table} where repo_id = ?", (repo_id,))
        for table, rows in tables.items():
            appends.add(f"insert into {table}", rows)

    def mark_read(self, reads: list[tuple[str, int, int, bytes]]) -> None:
        """(scanned_at, id, generation, watch mark) of repos read again and found exactly as stored: only
        `scanned_at` and the mark move (no new generation: nothing a listing shows has changed), and only where
        the row is still of that generation — else another writer stored it after it was compared, with its own
        mark, and this one must not vouch for that record."""
        if reads:
            with self.write() as conn:
                for at, repo_id, generation, mark in reads:
                    if conn.execute("update repos set scanned_at = ? where id = ? and generation = ?",
                                    (at, repo_id, generation)).rowcount:
                        _set_mark(conn, repo_id, mark)

    def watch_marks(self, ids: list[int]) -> dict[int, bytes]:
        """{repo id: the watch mark taken before the read its stored record came from} (absent: none)."""
        if not ids:
            return {}
        return dict(self.conn.execute(f"select repo_id, mark from repo_marks where mark is not null and repo_id in"
                                      f" ({', '.join('?' * len(ids))})", ids).fetchall())

    def mark_gone(self, paths: list[str]) -> int:
        """Flag repositories that disappeared from disk; their rows and history stay."""
        if not paths:
            return 0
        now = iso(time.time())
        with self.write() as conn:
            gen = _next_generation(conn)
            cur = conn.executemany("update repos set gone = 1, gone_at = ?, generation = ? where path = ? and gone = 0",
                                   [(now, gen, p) for p in paths])
        return cur.rowcount

    def ids_of(self, paths: list[str]) -> list[int]:
        """Ids of the repos at `paths`."""
        if not paths:
            return []
        return [r[0] for r in self.conn.execute(
            f"select id from repos where path in ({', '.join('?' * len(paths))})", paths)]

    # --- reading -----------------------------------------------------------------------------------

    def generation(self) -> int:
        """The newest change counter value; it grows with every repo write."""
        return self.conn.execute("select ifnull(max(generation), 0) from repos").fetchone()[0]

    def changed_since(self, gen: int) -> list[int]:
        """Ids of repos written after change counter `gen` (see `generation()`)."""
        return [r[0] for r in self.conn.execute("select id from repos where generation > ?", (gen,))]

    def summaries(self, include_gone: bool = False) -> list[dict]:
        """Flat repo rows (no nested lists): the fast path for listings."""
        return self.rows(where="" if include_gone else "gone = 0")

    def changed_rows(self, gen: int) -> list[dict]:
        """Flat rows of the repos written after change counter `gen`, gone ones too."""
        return self.rows(where="generation > ?", args=(gen,))

    def changed_records(self, gen: int) -> list[dict]:
        """Full records of the repos written after change counter `gen`, gone ones too, oldest change first
        (team mode's outbox sends them in that order)."""
        rows = self.rows(where="generation > ?", args=(gen,), order="generation")
        children = self._children([r["id"] for r in rows])
        return [_full(r, children) for r in rows]

    def row_at(self, path: str) -> dict | None:
        """The flat row of the repo at exactly `path` (gone or not), None when there is none."""
        found = self.rows(where="path = ?", args=(path,))
        return found[0] if found else None

    def rows(self, where: str = "", args: tuple | list = (), order: str = "path", limit: int | None = None,
             offset: int = 0) -> list[dict]:
        """Flat repo rows matching a trusted SQL `where` (values always bound through `args`)."""
        sql = "select * from repos" + (f" where {where}" if where else "") + f" order by {order}"
        params = list(args)
        if limit is not None:
            sql += " limit ? offset ?"
            params += [limit, offset]
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [_decode(dict(zip(names, row))) for row in cur.fetchall()]

    def count(self, where: str = "gone = 0", args: tuple | list = ()) -> int:
        return self.conn.execute(f"select count(*) from repos where {where}", list(args)).fetchone()[0]

    def repos(self, include_gone: bool = False) -> list[dict]:
        """Full repo records (as fleet.repo.record.read_repo reads them), with branches, worktrees, submodules and stashes."""
        rows = self.summaries(include_gone)
        children = self._children([r["id"] for r in rows] if include_gone else None)
        return [_full(r, children) for r in rows]

    def repo(self, key: int | str) -> dict | None:
        """One full record by id, fleet name, or path."""
        conn = self.conn
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            repo_id: int | None = int(key)
        else:
            repo_id = self.repo_id(key, os.path.realpath(key) if os.path.isabs(key) else key)
        cur = conn.execute("select * from repos where id = ?", (repo_id,))
        row = cur.fetchone()
        if row is None:
            return None
        record = _decode(dict(zip([d[0] for d in cur.description], row)))
        return _full(record, self._children([record["id"]]))

    def reflog_files(self, ids: list[int]) -> dict[int, dict[str, tuple[int, int]]]:
        """{repo id: {ref: (inode, size read up to)}} of the reflog files the index has read for `ids`."""
        known: dict[int, dict[str, tuple[int, int]]] = {}
        if ids:
            for repo_id, ref, inode, size in self.conn.execute(
                    "select repo_id, ref, inode, size from reflog_files where repo_id in"
                    f" ({', '.join('?' * len(ids))})", ids):
                known.setdefault(repo_id, {})[ref] = (inode, size)
        return known

    def records(self, paths: list[str]) -> dict[str, dict]:
        """Full records of the repos at exactly `paths` (gone ones too), by path: one query per table for a
        whole batch (the start-up re-check compares a chunk at a time)."""
        return {r["path"]: r for r in self._records("path", paths)}

    def records_of(self, ids: list[int]) -> list[dict]:
        """Full records of the repos with `ids` (gone ones too), by path: one query per table for a batch."""
        return self._records("id", ids)

    def _records(self, column: str, keys: list) -> list[dict]:
        if not keys:
            return []
        rows = self.rows(where=f"{column} in ({', '.join('?' * len(keys))})", args=keys)
        children = self._children([r["id"] for r in rows])
        return [_full(r, children) for r in rows]

    def _children(self, ids: list[int] | None) -> dict[str, dict[int, list[dict]]]:
        conn = self.conn
        out: dict[str, dict[int, list[dict]]] = {}
        for table, order in (("branches", "name"), ("worktrees", "path"), ("submodules", "path"),
                             ("stashes", "idx"), ("remotes", "name")):
            if ids is None:
                cur = conn.execute(f"select * from {table} order by repo_id, {order}")
            else:
                marks = ", ".join("?" * len(ids))
                cur = conn.execute(f"select * from {table} where repo_id in ({marks}) order by repo_id, {order}",
                                   ids)
            names = [d[0] for d in cur.description]
            grouped: dict[int, list[dict]] = {}
            for row in cur.fetchall():
                item = dict(zip(names, row))
                grouped.setdefault(item.pop("repo_id"), []).append(item)
            out[table] = grouped
        return out

    def known_paths(self) -> list[str]:
        return [r[0] for r in self.conn.execute("select path from repos where gone = 0")]

    def git_dirs(self) -> list[tuple[str, str]]:
        """(path, git dir) of every repo not gone, most recently active first."""
        return self.conn.execute(
            "select path, gitdir from repos where gone = 0 order by last_activity desc, path").fetchall()

    def recently_active(self, since: str, limit: int) -> list[str]:
        """Paths of the repos not gone with activity at or after `since` (ISO), most recent first."""
        return [r[0] for r in self.conn.execute(
            "select path from repos where gone = 0 and last_activity >= ? order by last_activity desc limit ?",
            (since, limit))]

    def repo_id(self, name_or_path: str, path: str | None = None) -> int | None:
        """The id of the repo with fleet name `name_or_path` or at that path (`path`: the path as the caller
        normalised it), a live one before a gone one; None when there is none."""
        row = self.conn.execute("select id from repos where path = ? or name = ? order by gone, id limit 1",
                                (name_or_path if path is None else path, name_or_path)).fetchone()
        return None if row is None else row[0]

    def live_path(self, name: str) -> str | None:
        """The path of the live repo with fleet name `name` (the oldest when two share it), None if none."""
        row = self.conn.execute("select path from repos where name = ? and gone = 0 order by id limit 1",
                                (name,)).fetchone()
        return None if row is None else row[0]

    def name_at(self, path: str) -> str | None:
        """The fleet name of the repo at exactly `path`, None when the index has none there."""
        row = self.conn.execute("select name from repos where path = ?", (path,)).fetchone()
        return None if row is None else row[0]

    def live_names(self) -> dict[str, str]:
        """{path: fleet name} of every repo not gone."""
        return dict(self.conn.execute("select path, name from repos where gone = 0").fetchall())

    def state_of(self, path: str) -> tuple[int, str, bool] | None:
        """(id, git dir, gone) of the repo at `path`, None when the index has none there."""
        row = self.conn.execute("select id, gitdir, gone from repos where path = ?", (path,)).fetchone()
        return None if row is None else (row[0], row[1], bool(row[2]))


class Prepared(NamedTuple):
    """A repo ready to store: its row and the reflog lines read against the index's `known` files."""

    found: Found
    record: dict
    row: dict                 # the repos row, but for `generation` and `first_seen` (given under the lock)
    repo_id: int | None       # its id in the index when prepared (None: the index did not hold it)
    known: dict[str, tuple[int, int]]  # ref -> (inode, size) of each reflog file as last read
    stats: list[tuple] | None  # reflog_stats of the record (None: vanished or not read yet, no history read)
    logs: list[tuple[str, int, int, list[tuple]]] | None  # (ref, inode, end, new lines) of each file read
    deferred: bool = False    # a new repo stored before its history (it joins the history backlog)


class Stored(NamedTuple):
    """What `store_prepared` wrote for one prepared repo."""

    prepared: Prepared
    repo_id: int
    first: bool               # stored for the first time (with all its lines, unless deferred)
    first_line: int | None    # the id of its first line appended now; they run on without gaps
    lines: int                # how many lines were appended


def _repo_row(found: Found, record: dict, reasons: list[dict]) -> dict:
    from fleet.git.layout import repo_name      # a scan's: an agent's hook opens the index and loads no git reader

    row = {col: record.get(col) for col in _REPO_COLUMNS}
    row["name"] = repo_name(found.path, found.root)
    for col in JSON_COLUMNS:
        if row.get(col) is not None:
            row[col] = json.dumps(row[col], sort_keys=True)
    for col in BOOL_COLUMNS:
        if col in row and row[col] is not None:
            row[col] = int(bool(row[col]))
    row["score"] = reasons[0]["score"] if reasons else 0
    row["reasons"] = json.dumps(reasons)
    return row


def _pending(record: dict) -> bool:
    """Whether the record's merge prediction is still to be made (`fleet.repo.record.pending_prediction`)."""
    prediction = record.get("predicted_conflicts")
    return isinstance(prediction, dict) and bool(prediction.get("pending"))


def _backlog(conn: sqlite3.Connection, key: str) -> dict:
    row = conn.execute("select value from meta where key = ?", (key,)).fetchone()
    value = json.loads(row[0]) if row else None
    return value if isinstance(value, dict) else {"total": 0, "ids": []}


def _update_backlog(conn: sqlite3.Connection, key: str, add: list[int], done: list[int]) -> None:
    """Inside a write: `add` joins the backlog under `key` (the history's or the predictions'), `done` leaves
    it; an empty backlog is no record."""
    if not add and not done:
        return
    backlog = _backlog(conn, key)
    waiting = set(backlog["ids"])
    if not add and not waiting.intersection(done):
        return
    ids = sorted((waiting | set(add)) - set(done))
    if ids:
        conn.execute("insert or replace into meta (key, value) values (?, ?)",
                     (key, json.dumps({"total": backlog["total"] + len(set(add) - waiting), "ids": ids})))
    else:
        conn.execute("delete from meta where key = ?", (key,))


class _Appends:
    """The rows one write of repos appends, inserted together (`flush`, at the write's end or before rows are
    deleted or the index is asked which lines it holds), many to a statement and table (`insert_values`): a cold
    scan's write of 24 repos inserts their reflog lines, branches, remotes, read files and marks in ~10
    statements where one `executemany` a repo and table took ~150. The reflog lines' ids run on in order
    past every id ever given (`next_reflog_id`, asked once, under the write lock): the write's first line is
    inserted with its id, and every later one without, which SQLite gives the id one past the largest held:
    the line's before it (a given id is bound and checked to be free for each line, 3% of a cold ingest's
    instructions). The rows wait laid end to end: no tuple kept per row (each one also work for the garbage
    collector)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.next_id: int | None = None  # the id the next line takes (asked once a write)
        self.given = False                # whether a line was given its id (the write's first is)
        self.rows: dict[str, tuple[int, list]] = {}  # statement head (`insert into t (a, b)`) -> (width, values)

    def add(self, head: str, rows: list[tuple]) -> None:
        """Insert `rows` (tuples of one width) with `head` at the flush."""
        if rows:
            self.rows.setdefault(head, (len(rows[0]), []))[1].extend(chain.from_iterable(rows))

    def lines(self, repo_id: int, logs: list[tuple], new: bool) -> tuple[int | None, int]:
        """Give ids to the lines of `logs` (`new`: the repo holds none yet, else lines it holds are left out);
        (first id, how many)."""
        conn, nid, first, count = self.conn, self.next_id, None, 0
        for ref, _inode, _end, lines in logs:
            if not lines:
                continue
            if nid is None:
                nid = next_reflog_id(conn)
            if not new:  # a twin has the same time: only held lines within the new lines' span (the (repo_id, at) index)
                from fleet.index import reflogs

                self.flush()
                lines = reflogs.once(lines, set(conn.execute(
                    "select old_sha, new_sha, at, message from reflog where repo_id = ? and at between ? and ?"
                    " and ref = ?", (repo_id, min(ln[3] for ln in lines), max(ln[3] for ln in lines), ref))))
            if first is None:
                first = nid
            count += len(lines)
            if lines and not self.given:  # the write's first line: its id given, the others' follow it
                self.add(_REFLOG_INSERT_ID, [(nid, repo_id, ref) + lines[0]])
                self.given, lines, nid = True, lines[1:], nid + 1
            # tuple + tuple: a third cheaper than a display with *line, for every line a cold scan stores
            self.add(_REFLOG_INSERT, [(repo_id, ref) + line for line in lines])
            nid += len(lines)
        self.next_id = nid
        return (first if count else None), count

    def flush(self) -> None:
        for head, (width, values) in self.rows.items():
            insert_values(self.conn, head, width, values)
        self.rows = {}


def _prepare_file(path: Path) -> None:
    """Make `path` a private index file (0600 in a 0700 folder) or refuse it with a clear FleetError.

    The folder is created 0700; the default folder (ours) is tightened when it is looser. An existing file
    is tightened to 0600 (its -wal/-shm too: SQLite gives those the database file's mode), checked to be a
    regular, writable file and, when no write-ahead log could be extending it, not shorter than its header
    says (a truncated copy would otherwise open and fail later, query by query).
    """
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if folder == data_home() / "fleetdeck":
            _tighten(folder, 0o700)
        st = os.stat(path)
    except FileNotFoundError:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass  # another process created it meanwhile
        except OSError as exc:
            raise unusable(path, exc) from None
        return
    except OSError as exc:
        raise unusable(path, exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise unusable(path, IsADirectoryError() if stat.S_ISDIR(st.st_mode) else None)
    for name in (str(path), f"{path}-wal", f"{path}-shm"):
        _tighten(Path(name), 0o600)
    if not os.access(path, os.W_OK):
        raise unusable(path, PermissionError())
    problem = _header_problem(path, st.st_size)
    if problem:
        raise unusable(path, None, problem)


def _tighten(path: Path, mode: int) -> None:
    """Drop group/other permission bits from a file or folder we own (nothing when it is not ours)."""
    try:
        st = os.stat(path)
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
    except OSError:
        pass


def _header_problem(path: Path, size: int) -> str | None:
    """Why the file cannot be a whole SQLite database, judging by its 100-byte header (None: it may be).

    Read only while no connection has the database open anywhere (no `-shm` file): closing any descriptor
    of the file drops every POSIX lock this process holds on it, and a connection of ours that lost its
    lock lets another process delete the write-ahead log under it.
    """
    if size == 0 or os.path.lexists(f"{path}-shm") or os.path.lexists(f"{path}-wal"):
        return None  # a new, empty database, or one that is open (or was not closed cleanly): SQLite knows
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
        return "is not an SQLite database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[92:96] == header[24:28]  # the page count is only meaningful when these agree
    if valid and pages and size < pages * page_size:
        return f"is truncated ({size} bytes where its header says {pages * page_size})"
    return None


def unusable(path: Path, exc: BaseException | None, problem: str | None = None) -> FleetError:
    """The one error for an index file fleetdeck cannot use: which file, what is wrong, what to do."""
    aside = "move it aside (its history cannot be rebuilt from git) and run `fleetdeck scan` to start a new one"
    if os.path.isdir(path):
        text = "is a directory, not a database file: move it away or pass --db PATH (or set FLEETDECK_DB)"
    elif "locked" in str(exc) or "busy" in str(exc):
        text = "is busy: another process held its write lock too long; try again"
    elif (path.exists() and not os.access(path, os.W_OK)) or "readonly" in str(exc):
        text = "is read-only: make it (and its folder) writable, or pass --db PATH"
    elif not os.access(path.parent, os.W_OK | os.X_OK):
        text = f"cannot be written: its folder {path.parent} is read-only; make it writable or pass --db PATH"
    elif problem:
        text = f"{problem}: {aside}"
    elif isinstance(exc, sqlite3.Error):
        text = f"is unusable ({exc}): {aside}"
    else:
        text = f"cannot be opened ({getattr(exc, 'strerror', None) or exc}): check the path or pass --db PATH"
    return FleetError("BAD_PATH", f"the index {path} {text}")


def _mark_row(repo_id: int, mark: bytes | None) -> tuple[int, bytes | None]:
    """The `repo_marks` row keeping `mark` as the watch mark of the record stored for `repo_id` (none: b"" or
    None, stored as NULL)."""
    return repo_id, mark or None


def _set_mark(conn: sqlite3.Connection, repo_id: int, mark: bytes | None) -> None:
    conn.execute(f"{_MARK_INSERT} values (?, ?)", _mark_row(repo_id, mark))


def _next_generation(conn: sqlite3.Connection) -> int:
    """A fleet-wide change counter: readers ask `generation > last seen` to learn which repos changed."""
    return conn.execute("select ifnull(max(generation), 0) + 1 from repos").fetchone()[0]


def next_reflog_id(conn: sqlite3.Connection) -> int:
    """The id of the next reflog line (the write lock is held): past every line held and every line
    `prune_events` deleted. A reused id would sit at or below what events (`event_cursor`) and the search
    index (`reflog_search_upto`) have already passed, and the new line would never reach either."""
    return conn.execute(
        "select max(ifnull((select max(id) from reflog), 0),"
        " ifnull((select cast(value as integer) from meta where key = ?), 0)) + 1", (REFLOG_IDS_KEY,)).fetchone()[0]


def _decode(row: dict) -> dict:
    for col in JSON_COLUMNS:
        if row.get(col) is not None:
            row[col] = json.loads(row[col])
    for col in BOOL_COLUMNS:
        if col in row and row[col] is not None:
            row[col] = bool(row[col])
    return row


def _full(row: dict, children: dict[str, dict[int, list[dict]]]) -> dict:
    rid = row["id"]
    branches = children["branches"].get(rid, [])
    for b in branches:
        for col in ("upstream_gone", "current"):
            b[col] = bool(b[col])
    worktrees = children["worktrees"].get(rid, [])
    for w in worktrees:
        for col in ("detached", "locked", "prunable"):
            w[col] = bool(w[col])
    row["branches"] = branches
    row["worktrees"] = worktrees
    row["submodules"] = children["submodules"].get(rid, [])
    row["stash_list"] = [{"index": s["idx"], "sha": s["sha"], "message": s["message"], "at": s["at"]}
                         for s in children["stashes"].get(rid, [])]
    row["remotes"] = children["remotes"].get(rid, [])
    return row
