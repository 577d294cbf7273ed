"""Pushing this machine's rows to the hub: the transactional outbox's sending side.

A push reads what the hub lacks from the local index (fleet/index/outbox.py), sends it in batches — each a
hub transaction: `COPY` into a temp table, then `INSERT … ON CONFLICT` keyed by (machine, natural key), a
repo record replaced only by a newer generation — and moves the local cursors only after the hub committed.
A push cut short (the hub stopped, the network gone) is sent again from the old cursors and lands once.
The last transaction of a push calls `fleetdeck.pushed()`: the machine's freshness and one NOTIFY.

`Pusher` runs pushes in a thread of its own (serve, watch and demo start one when this machine joined a
hub), with timeouts and backoff, so a hub that is down, slow or blackholed never slows the watcher, the
dashboard or the MCP bridge; its outcome is kept in the index's meta for `team status` and the dashboard.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.audit.config import resolve as audit_config
from fleet.audit.read import entries_after
from fleet.audit.segments import ACTIVE
from fleet.errors import FleetError
from fleet.index import outbox
from fleet.index.lost import lost_commits
from fleet.index.store import Index, open_index
from fleet.presence.store import read_rows as presence_rows
from fleet.team import auditchain, hubschema, pg, rows
from fleet.team.config import TeamConfig
from fleet.team.decisions import settle_waiting
from fleet.timespec import iso

log = logging.getLogger("fleetdeck.team")

BATCH_ROWS = 20_000
PRESENCE_TTL_S = 180        # the hub forgets an agent's presence this long after the last push that held it
HEARTBEAT_S = 60            # a quiet machine still tells the hub it is alive this often
DECISIONS_EVERY_S = 2       # how often the pusher asks the hub for decisions addressed to this machine
STATUS_KEY = "team.status"

# (hub table, its columns as pushed). Temp tables take these columns; the upsert writes them.
COLUMNS = {
    "repos": ("machine_id", "repo_id", "name", "path", "generation", "score", "gone", "record"),
    "branches": ("machine_id", "repo_id", "name", "row"),
    "worktrees": ("machine_id", "repo_id", "path", "row"),
    "submodules": ("machine_id", "repo_id", "path", "row"),
    "events": ("machine_id", "id", "repo_id", "ref", "kind", "at", "row"),
    "lost": ("machine_id", "repo_id", "sha", "dropped_at", "row"),
    "presence": ("machine_id", "agent", "repo", "session", "state", "row"),
    "proposals": ("machine_id", "id", "status", "created_at", "expires_at", "row"),
    "audit": ("machine_id", "chain", "seq", "hash", "entry", "line"),
}
UPSERT = {
    "repos": ("ON CONFLICT (machine_id, repo_id) DO UPDATE SET name = EXCLUDED.name, path = EXCLUDED.path, "
              "generation = EXCLUDED.generation, score = EXCLUDED.score, gone = EXCLUDED.gone, "
              "record = EXCLUDED.record, pushed_at = now() WHERE fleetdeck.repos.generation < EXCLUDED.generation "
              "RETURNING repo_id"),
    "proposals": ("ON CONFLICT (machine_id, id) DO UPDATE SET status = EXCLUDED.status, "
                  "created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, row = EXCLUDED.row"),
}


@dataclass
class Batch:
    """One hub transaction's rows, and the local cursor moves and digests it makes true once committed."""

    tables: dict[str, list[tuple]] = field(default_factory=dict)
    moves: dict[str, int] = field(default_factory=dict)
    sent: dict[str, dict[str, str | None]] = field(default_factory=dict)
    replace_presence: bool = False
    lost_repos: list[int] = field(default_factory=list)
    rewound: int | None = None       # the index's rewind this batch settles (cleared once committed)
    resend_from: int | None = None   # the hub's events from this id on are deleted and sent again
    instance: str | None = None      # the first batch: the index file these rows come from
    chain: str | None = None         # the audit log's chain on the hub, when audit rows are in the batch
    chain_end: Any = None            # where the batch's last audit entry was read (fleet.audit.read.Where)
    more: bool = False

    def count(self) -> dict[str, int]:
        return {t: len(r) for t, r in self.tables.items() if r and t not in outbox.REPO_CHILDREN}


class Push:
    """One push of `index`'s backlog to the hub over `conn`, as machine `config.machine`."""

    def __init__(self, index: Index, config: TeamConfig, conn: Any, audit_dir: Path | None,
                 batch_rows: int = BATCH_ROWS) -> None:
        self.index, self.config, self.conn, self.audit_dir = index, config, conn, audit_dir
        self.batch_rows = batch_rows
        repos = outbox.repo_names(index)
        self.share = config.sharing(index.roots() + [path for _, path in repos.values()])
        self.names = {path: name for name, path in repos.values()}
        self.ids = {path: rid for rid, (_, path) in repos.items()}
        self.lost_read: set[int] | None = set()  # repos whose lost commits this push has read (None: all)
        # (the audit log's chain, the seq pushed up to, where that entry was read and its hash)
        self.chain: tuple[str | None, int, auditchain.Seen | None] | None = None

    def run(self) -> dict[str, int]:
        """Send every batch; {table: rows sent}. FleetError HUB_UNREACHABLE when the hub goes away midway
        (what was committed stays committed, and its cursors moved)."""
        sent: dict[str, int] = {}
        first = True
        while True:
            batch = self._batch(first)
            if first:
                batch.instance = str(self.index.meta("instance"))
            first = False
            if batch.tables or batch.replace_presence or not batch.more or batch.instance:
                self._send(batch)
            outbox.advance(self.index, batch.moves, batch.sent, batch.rewound)
            if batch.chain is not None:
                auditchain.keep(self.index, batch.chain, batch.tables["audit"][-1], batch.chain_end)
            for table, n in batch.count().items():
                sent[table] = sent.get(table, 0) + n
            if not batch.more:
                return sent

    # --- reading the outbox ---------------------------------------------------------------------

    def _batch(self, first: bool) -> Batch:
        machine, share, batch = self.config.machine, self.share, Batch()
        if first:
            repos = self.index.changed_records(outbox.cursor(self.index, "repos"))
            if repos:
                made = [rows.repo(machine, r, share) for r in repos]
                batch.tables["repos"] = [row for row, _ in made]
                for table in outbox.REPO_CHILDREN:
                    batch.tables[table] = [c for _, children in made for c in children[table]]
                batch.moves["repos"] = max(r["generation"] or 0 for r in repos)
            self._presence(batch)
            self._proposals(batch)
        after = outbox.cursor(self.index, "events")
        if first:
            batch.rewound = outbox.rewound(self.index)
            if batch.rewound is not None and batch.rewound <= after:
                batch.resend_from, after = batch.rewound, batch.rewound - 1
        events = outbox.events_after(self.index, after, self.batch_rows)
        if events:
            batch.tables["events"] = [rows.event(machine, e, share) for e in events]
            batch.moves["events"] = events[-1]["id"]
            self._lost(batch, sorted({e["repo_id"] for e in events}), first and after == 0)
        audit = self._audit(batch)
        batch.more = len(events) == self.batch_rows or audit == self.batch_rows
        return batch

    def _presence(self, batch: Batch) -> None:
        current = {}
        for row in presence_rows(self.index):
            hub_row = rows.presence(self.config.machine, row, self.share)
            current["\0".join(hub_row[1:4])] = (hub_row, rows.digest(hub_row[4:]))
        held = outbox.sent(self.index, "presence")
        beat = time.time() - outbox.cursor(self.index, "presence_beat") >= HEARTBEAT_S
        if {k: d for k, (_, d) in current.items()} == held and not beat:
            return
        batch.replace_presence = True
        batch.tables["presence"] = [r for r, _ in current.values()]
        batch.sent["presence"] = {**{k: None for k in held}, **{k: d for k, (_, d) in current.items()}}
        batch.moves["presence_beat"] = int(time.time())

    def _proposals(self, batch: Batch) -> None:
        held = outbox.sent(self.index, "proposals")
        changed, digests = [], {}
        for row in outbox.proposals(self.index):
            hub_row = rows.proposal(self.config.machine, row, self.names, self.share)
            d = rows.digest(hub_row[2:])
            if held.get(row["id"]) != d:
                changed.append(hub_row)
                digests[row["id"]] = d
        if changed:
            batch.tables["proposals"] = changed
            batch.sent["proposals"] = digests

    def _lost(self, batch: Batch, repo_ids: list[int], everything: bool) -> None:
        """The lost commits of the repos these events touched (all repos on a first push), replaced whole. Read
        once per repo and push: they come from every event the index holds, not only this batch's, so a backlog
        sent in many batches does not read them again for each (the next push reads a repo's anew)."""
        if self.lost_read is None:
            return
        if not everything:
            repo_ids = [rid for rid in repo_ids if rid not in self.lost_read]
            if not repo_ids:
                return
        found = lost_commits(self.index, repo_ids=None if everything else repo_ids)
        if everything:
            self.lost_read = None
        else:
            self.lost_read.update(repo_ids)
        ids = self.ids
        touched = set(ids.values()) if everything else set(repo_ids)  # a first push replaces the machine's set
        batch.lost_repos = sorted(touched)
        held = outbox.sent(self.index, "lost")
        new = {}
        batch.tables["lost"] = []
        for commit in found["commits"]:
            rid = ids[commit["path"]]
            row = rows.lost(self.config.machine, rid, commit, self.share)
            batch.tables["lost"].append(row)
            new[f"{rid}:{commit['sha']}"] = rows.digest(row[3:])
        gone = {k: None for k in held if int(k.split(":")[0]) in touched and k not in new}
        batch.sent["lost"] = {**gone, **new}

    def _audit(self, batch: Batch) -> int:
        """The audit entries the hub lacks, of the log's chain (a recreated log: a new chain, from seq 1)."""
        if self.audit_dir is None:
            return 0
        if self.chain is None:
            self.chain = auditchain.known(self.index, self.audit_dir)
        chain, after, seen = self.chain
        if chain is None:
            if self.conn is None:
                return 0
            try:
                found = auditchain.resolve(self.conn, self.config.machine, self.audit_dir, after)
            except pg.psycopg().Error as exc:
                raise self._refused(exc) from None
            if found is None:
                return 0
            chain, after = found
            self.chain = (chain, after, None)
        pending, where = [], None
        for entry, line, where in entries_after(self.audit_dir, after, seen):
            pending.append(rows.audit(self.config.machine, chain, entry, line, self.share))
            if len(pending) == self.batch_rows:
                break
        if pending:
            batch.tables["audit"] = pending
            batch.moves["audit"] = pending[-1][2]
            batch.chain, batch.chain_end = chain, where
            self.chain = (chain, pending[-1][2], (where, pending[-1][3]))
        return len(pending)

    # --- writing to the hub ---------------------------------------------------------------------

    def _send(self, batch: Batch) -> None:
        pg_module = pg.psycopg()
        machine = self.config.machine
        try:
            with self.conn.transaction():
                cur = self.conn.cursor()
                if batch.instance is not None:
                    self._adopt(cur, batch.instance)
                for table in COLUMNS:
                    if table in batch.tables:
                        self._copy(cur, table, batch.tables.get(table, []))
                if "repos" in batch.tables:
                    cur.execute(f"INSERT INTO fleetdeck.repos ({_cols('repos')}) SELECT {_cols('repos')} "
                                f"FROM t_repos {UPSERT['repos']}")
                    written = [r[0] for r in cur.fetchall()]
                    for table in outbox.REPO_CHILDREN:
                        cur.execute(f"DELETE FROM fleetdeck.{table} WHERE machine_id = %s AND repo_id = ANY(%s)",
                                    (machine, written))
                        cur.execute(f"INSERT INTO fleetdeck.{table} ({_cols(table)}) SELECT {_cols(table)} "
                                    f"FROM t_{table} WHERE repo_id = ANY(%s) ON CONFLICT DO NOTHING", (written,))
                if batch.replace_presence:
                    cur.execute("DELETE FROM fleetdeck.presence WHERE machine_id = %s", (machine,))
                    cur.execute(f"INSERT INTO fleetdeck.presence ({_cols('presence')}, expires_at) SELECT "
                                f"{_cols('presence')}, now() + make_interval(secs => %s) FROM t_presence "
                                "ON CONFLICT DO NOTHING", (PRESENCE_TTL_S,))
                if "lost" in batch.tables:
                    cur.execute("DELETE FROM fleetdeck.lost WHERE machine_id = %s AND repo_id = ANY(%s)",
                                (machine, batch.lost_repos))
                if batch.resend_from is not None:
                    cur.execute("DELETE FROM fleetdeck.events WHERE machine_id = %s AND id >= %s",
                                (machine, batch.resend_from))
                for table in ("events", "lost", "proposals", "audit"):
                    if batch.tables.get(table):
                        cur.execute(f"INSERT INTO fleetdeck.{table} ({_cols(table)}) SELECT {_cols(table)} "
                                    f"FROM t_{table} {UPSERT.get(table, 'ON CONFLICT DO NOTHING')}")
                if not batch.more:
                    cur.execute("SELECT fleetdeck.pushed(%s)", (self.config.share,))
        except pg_module.Error as exc:
            raise self._refused(exc) from None

    def _refused(self, exc: Exception) -> FleetError:
        """The hub's refusal as one line: an older schema than this fleetdeck's says what the admin runs."""
        if isinstance(exc, (pg.psycopg().errors.UndefinedFunction, pg.psycopg().errors.UndefinedColumn)):
            return FleetError("HUB_REFUSED", f"the hub {pg.hub_label(self.config.hub)} has an older schema than this "
                                             "fleetdeck: an admin runs `fleetdeck team init ADMIN_DSN` once")
        return pg.unreachable(self.config.hub, exc, self.config.password())

    def _adopt(self, cur: Any, instance: str) -> None:
        """Make `instance` the hub's record of this machine's index; when another index file pushed before (this
        one was rebuilt: its repo and event ids start again), that file's rows go first, in this transaction."""
        cur.execute("SELECT fleetdeck.adopt_instance(%s)", (instance,))
        before = cur.fetchone()[0]
        if before is not None and before != instance:
            for table in hubschema.INDEX_TABLES:  # the repos' children go with them (ON DELETE CASCADE)
                cur.execute(f"DELETE FROM fleetdeck.{table} WHERE machine_id = %s", (self.config.machine,))

    @staticmethod
    def _copy(cur: Any, table: str, data: list[tuple]) -> None:
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS t_{table} ON COMMIT DELETE ROWS AS "
                    f"SELECT {_cols(table)} FROM fleetdeck.{table} WITH NO DATA")
        with cur.copy(f"COPY t_{table} ({_cols(table)}) FROM STDIN") as copy:
            for row in data:
                copy.write_row(row)


def _cols(table: str) -> str:
    return ", ".join(COLUMNS[table])


def hub_connection(dsn: str, machine: str, password: str | None) -> Any:
    """A connection to the hub as `machine`, checked to be the machine the hub knows this login as."""
    conn = pg.connect(dsn, password)
    try:
        who = conn.execute("SELECT fleetdeck.current_machine()").fetchone()[0]
        conn.commit()
    except pg.psycopg().Error as exc:
        conn.close()
        raise pg.unreachable(dsn, exc, password) from None
    if who != machine:
        conn.close()
        raise FleetError("UNAUTHORIZED", f"the hub at {pg.hub_label(dsn)} knows this login as "
                                         f"{who or 'no enrolled machine'}, not {machine}")
    return conn


def push_once(index: Index, config: TeamConfig, batch_rows: int = BATCH_ROWS) -> tuple[dict[str, int], list[dict]]:
    """Connect, push the whole backlog, act on the decisions the hub holds for this machine (and push what they
    changed), disconnect: ({table: rows sent}, the decisions settled). The outcome is kept for `team status`."""
    try:
        conn = hub_connection(config.hub, config.machine, config.password())
        try:
            sent = Push(index, config, conn, _audit_dir(index), batch_rows).run()
            settled = settle_waiting(index, config, conn)
            if settled:
                for table, n in Push(index, config, conn, _audit_dir(index), batch_rows).run().items():
                    sent[table] = sent.get(table, 0) + n
        finally:
            conn.close()
    except FleetError as exc:
        record(index, error=exc.message)
        raise
    record(index, error=None)
    return sent, settled


def _audit_dir(index: Index) -> Path | None:
    audit = audit_config(index.path)
    return audit.dir if audit.enabled else None


def record(index: Index, error: str | None) -> None:
    """Keep the last attempt's outcome in meta (`team status`, the dashboard)."""
    status = dict(index.meta(STATUS_KEY, {}) or {})
    status["last_attempt_at"] = iso(time.time())
    status["connected"] = error is None
    status["last_error"] = error
    if error is None:
        status["last_push_at"] = status["last_attempt_at"]
    index.set_meta(STATUS_KEY, status)


class Pusher:
    """Pushes in a daemon thread for as long as serve/watch run: when the index changed, and at least every
    HEARTBEAT_S; on failure it backs off (1 s doubling to 60 s) and keeps the error for `team status`."""

    def __init__(self, db_path: str | Path, config: TeamConfig) -> None:
        self.db_path, self.config = db_path, config
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="fleetdeck-team-push", daemon=True)

    def start(self) -> "Pusher":
        self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        self.thread.join(timeout)

    def _loop(self) -> None:
        index = open_index(self.db_path)
        audit = _audit_dir(index)   # the settings file is read once, not at every poll
        conn, seen, last, asked, backoff = None, None, 0.0, 0.0, 1.0
        try:
            while not self.stop_event.is_set():
                mark = change_mark(index, audit)
                wait = self.config.push_interval_s
                push = mark != seen or time.time() - last >= HEARTBEAT_S
                due = time.time() - asked >= DECISIONS_EVERY_S
                if push or due:
                    try:
                        conn = conn or hub_connection(self.config.hub, self.config.machine,
                                                             self.config.password())
                        if push:
                            Push(index, self.config, conn, audit).run()
                            record(index, error=None)
                            seen, last = mark, time.time()
                        if due:
                            asked = time.time()
                            if settle_waiting(index, self.config, conn):
                                seen = None       # what the decisions changed goes out on the next turn
                                wait = 0
                        backoff = 1.0
                    except FleetError as exc:
                        log.warning("team push: %s", exc.message)
                        record(index, error=exc.message)
                        if conn is not None:
                            conn.close()
                        conn, wait, backoff = None, backoff, min(backoff * 2, 60.0)
                self.stop_event.wait(wait)
        finally:
            if conn is not None:
                conn.close()
            index.close()


def status(index: Index, config: TeamConfig | None) -> dict[str, Any]:
    """`team status --json`: who, where, whether the last attempt reached the hub, and what waits."""
    kept = dict(index.meta(STATUS_KEY, {}) or {})
    if config is None:
        return {"machine": None, "hub": None, "connected": False, "backlog": {}, "last_push_at":
                kept.get("last_push_at"), "last_error": None}
    return {"machine": config.machine, "hub": pg.hub_label(config.hub), "connected": bool(kept.get("connected")),
            "backlog": backlog(index, config), "last_push_at": kept.get("last_push_at"),
            "last_error": kept.get("last_error")}


def change_mark(index: Index, audit: Path | None) -> tuple:
    """The index's change mark and the audit log's active segment (size, mtime): a push is due when it moves."""
    try:
        st = (audit / ACTIVE).stat() if audit else None
    except OSError:
        st = None
    return outbox.change_mark(index), (st.st_size, st.st_mtime_ns) if st else None


def backlog(index: Index, config: TeamConfig) -> dict[str, int]:
    """Rows the hub does not hold yet, per table (what a push would send now)."""
    audit = _audit_dir(index)
    push = Push(index, config, None, audit)
    probe = Batch()
    push._proposals(probe)
    return {"repos": outbox.pending_repos(index, outbox.cursor(index, "repos")),
            "events": outbox.pending_events(index, outbox.cursor(index, "events")),
            "proposals": len(probe.tables.get("proposals", [])),
            "audit": sum(1 for _ in entries_after(audit, *auditchain.known(index, audit)[1:])) if audit else 0}
