"""The hub's PostgreSQL implementation of the pages' read interface (`fleet.index.reader.FleetRead`), one
machine at a time, over the rows each machine pushed (fleet/team/push.py).

`HubMachine` answers what the local index answers, from the hub's copy: repo rows are the records as pushed,
events, lost commits, presence and proposals their mirrored rows. fleet/views runs over it unchanged, so one
machine's queue, digest and repo timeline on the hub equal those of its own index for the same rows
(fleet/team/hubview.py merges the machines). What the hub does not hold is said, not guessed: stashes and
remotes stay on their machine, commit history and working-tree files are read from git there, and
recoverable commits are as of the machine's last push.

Connections are read-only sessions (`default_transaction_read_only`), one per thread; a machine that shares
names only (`[team] share = "names"`) has its repos keyed by `…/<name>` instead of a path it never sent.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from fleet.errors import FleetError
from fleet.index.freshness import history_progress
from fleet.index.search import COMMIT_KINDS
from fleet.snapshot.events import KIND as DISCARDED
from fleet.team import pg
from fleet.team.hubpass import EVENT, DigestPass
from fleet.team.rows import HIDDEN
from fleet.timespec import iso

PRESENCE_JSON = ("sources", "files", "pids")   # presence columns the local store keeps as JSON text
AHEAD_THREADS = 2                               # a digest's statements run side by side on this many sessions
NO_BACKLOG = {"total": 0, "ids": []}            # a machine's history backlog stays on the machine


class HubConnections:
    """One read-only connection to the hub per thread (handlers run in a thread pool), re-opened when lost."""

    def __init__(self, dsn: str, password: str | None = None) -> None:
        self.dsn, self.password = dsn, password
        self.label = pg.hub_label(dsn)      # parsed once, not for each machine's reader of each request
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()

    def get(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = pg.connect(self.dsn, self.password, autocommit=True, read_only=True)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def query(self, sql: str, args: tuple | list = ()) -> list[tuple]:
        """Rows of one statement; a lost hub or a refused statement is one FleetError line (no password)."""
        try:
            return self.get().execute(sql, args).fetchall()
        except pg.psycopg().Error as exc:
            raise pg.unreachable(self.dsn, exc, self.password) from None

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


def _scope(column: str, ids: list[int] | None) -> tuple[str, list]:
    return ("", []) if ids is None else (f" AND {column} = ANY(%s)", [list(ids)])


class HubDigest:
    """`fleet.index.reader.DigestSource` over one machine's hub rows: the window's queries and the fleet's state
    are answered by a `DigestPass` (fleet/team/hubpass.py), the one of every machine of the request when it
    covers this machine's scope, else one of this machine alone."""

    def __init__(self, machine: "HubMachine", shared: DigestPass | None = None) -> None:
        self.m, self.shared = machine, shared

    def _pass(self, scope: list[int] | None) -> DigestPass:
        if self.shared is not None and self.shared.covers(self.m.name, scope):
            return self.shared
        return DigestPass(self.m.conns, {self.m.name: scope})

    def _q(self, sql: str, args: list) -> list[tuple]:
        return self.m.conns.query(sql, [self.m.name, *args])

    def events(self, start, scope, kinds, limit):
        return self._pass(scope).events(start, kinds, limit)[self.m.name]

    def event_times(self, start, scope, kinds, end):
        return self._pass(scope).event_times(self.m.name, start, kinds, end)

    def groups(self, start, scope, kinds):
        return self._pass(scope).groups(start, kinds)[self.m.name]

    def _whole(self) -> DigestPass:
        return self.shared if self.shared is not None else self._pass(None)

    def names(self, repo_ids):
        return self._whole().names(self.m.name, list(repo_ids))

    def gone_names(self):
        return set(self._whole().repos()[self.m.name][2])

    def scanned(self, scope):
        if scope is None:
            count, errors, _gone = self._whole().repos()[self.m.name]
            return count, [(name, error) for _rid, name, error in errors]
        return self._pass(scope).scanned(scope)[self.m.name]

    def unpushed(self, scope, limit):
        return self._pass(scope).unpushed(limit)[self.m.name]

    def dirty(self, scope, limit):
        return self._pass(scope).dirty(limit)[self.m.name]

    def stashes_before(self, stale, scope, limit):
        return 0, []   # stashes stay on their machine (a stash's message may hold anything)

    def stashes(self, repo_ids):
        return []

    def repo_events(self, repo_id, limit):
        return self._q(f"SELECT e.id, e.ref, e.kind, {EVENT} FROM fleetdeck.events e WHERE e.machine_id = %s "
                       "AND e.repo_id = %s ORDER BY e.at DESC, e.id DESC LIMIT %s", [repo_id, limit])

    def of_kind(self, kind, since, repo_ids):
        seen = self.m.seen
        if seen is not None and kind == DISCARDED and repo_ids is None and since is not None and since >= seen.since:
            return [row for row in seen.discarded if row[2] >= since]
        where, args = _scope("e.repo_id", repo_ids)
        if since is not None:
            where += " AND e.at >= %s"
            args.append(int(since))
        return self._q(f"SELECT r.name, coalesce(r.path, '{HIDDEN}/' || r.name), e.at, e.row->>'old_sha', "
                       "e.row->>'new_sha', e.row->>'identity', e.row->>'message' FROM fleetdeck.events e "
                       "JOIN fleetdeck.repos r USING (machine_id, repo_id) WHERE e.machine_id = %s AND "
                       f"e.kind = %s{where} ORDER BY e.at DESC", [kind, *args])

    def recoverable(self, since, repo_ids):
        """The lost commits as of the machine's last push (it asked its git then; the hub has no git)."""
        return {"commits": self._pass(repo_ids).lost(since)[self.m.name], "errors": [],
                "history": history_progress(self.m)}

    def rewrites(self, start, scope, limit):
        return self._pass(scope).rewrites(start, limit)[self.m.name]


class HubPresence:
    """`fleet.index.reader.PresenceSource`: the machine's agents the hub has not expired yet."""

    def __init__(self, machine: "HubMachine") -> None:
        self.m = machine

    def rows(self, repo: str | None = None) -> list[dict]:
        held = self.m.seen.presence if self.m.seen is not None else [r[0] for r in self.m.conns.query(
            "SELECT row FROM fleetdeck.presence WHERE machine_id = %s AND expires_at > now()", [self.m.name])]
        found = [self._stored(r) for r in held]
        return [r for r in found if repo is None or r["repo"] == repo]

    def _stored(self, row: dict) -> dict:
        """The row as the local store holds it (its lists as JSON text), keyed by the repo's shown path."""
        out = {k: (json.dumps(v) if k in PRESENCE_JSON else v) for k, v in row.items()}
        out["repo"] = self.m.shown_path(row["repo"])
        return out


class HubPending:
    """`fleet.index.reader.PendingSource`: the machine's mirrored proposals still pending."""

    def __init__(self, machine: "HubMachine") -> None:
        self.m = machine

    def pending_by_repo(self, now: float) -> list[tuple[str, str, str, str]]:
        if self.m.seen is not None:
            return [(self.m.shown_path(repo), pid, op, agent) for repo, pid, op, agent, due in self.m.seen.pending
                    if due > now]
        rows = self.m.conns.query(
            "SELECT row->>'repo', id, row->>'op', row->>'agent' FROM fleetdeck.proposals WHERE machine_id = %s "
            "AND status = 'pending' AND expires_at > %s ORDER BY created_at", [self.m.name, now])
        return [(self.m.shown_path(repo), pid, op, agent) for repo, pid, op, agent in rows]


class HubSearch:
    """The index's search (`fleet.index.search`) over one machine's hub rows: branch names, and the reflog
    lines the machine pushed as events (a commit on the checked-out branch once, under the branch's ref, as
    the local search reports it). Commit subjects from recent history are read from git on the machine: not
    here. Matching is the same case-insensitive substring test."""

    def __init__(self, machine: "HubMachine") -> None:
        self.m = machine

    def branches(self, query: str, ids: list[int] | None, limit: int) -> tuple[list[dict], int]:
        where, args = _scope("repo_id", ids)
        sql = f"FROM fleetdeck.branches WHERE machine_id = %s AND strpos(lower(name), lower(%s)) > 0{where}"
        count = self.m.conns.query(f"SELECT count(*) {sql}", [self.m.name, query, *args])[0][0]
        rows = self.m.conns.query(f"SELECT repo_id, name, row->>'head', row->>'upstream' {sql} ORDER BY name "
                                  "COLLATE \"C\", repo_id LIMIT %s", [self.m.name, query, *args, limit])
        return [{"kind": "branch", "repo_id": r[0], "ref": "refs/heads/" + r[1], "name": r[1], "sha": r[2],
                 "upstream": r[3], "text": r[1], "at": None} for r in rows], count

    def events(self, query: str, commits: bool, ids: list[int] | None, limit: int) -> tuple[list[dict], int]:
        """Commit events whose subject matches (`commits`), or the other events whose message does."""
        where, args = _scope("repo_id", ids)
        text = ("CASE WHEN row->>'message' LIKE 'commit%%: %%' THEN substr(row->>'message', "
                "strpos(row->>'message', ': ') + 2) ELSE row->>'message' END") if commits else "row->>'message'"
        sql = (f"FROM fleetdeck.events WHERE machine_id = %s AND row->>'reflog_id' IS NOT NULL AND "
               f"{'' if commits else 'NOT '}(kind = ANY(%s)) AND strpos(lower({text}), lower(%s)) > 0{where}")
        params = [self.m.name, list(COMMIT_KINDS), query, *args]
        count = self.m.conns.query(f"SELECT count(*) {sql}", params)[0][0]
        rows = self.m.conns.query(f"SELECT repo_id, ref, row->>'old_sha', row->>'new_sha', at, {text}, kind, "
                                  f"row->>'identity' {sql} ORDER BY at DESC, repo_id LIMIT %s", [*params, limit])
        return [{"kind": "commit" if commits else "reflog", "source": "reflog", "repo_id": repo_id, "ref": ref,
                 "sha": new, "old_sha": old, "event": kind, "text": message, "identity": identity, "at": iso(at)}
                for repo_id, ref, old, new, at, message, kind, identity in rows], count


@dataclass(frozen=True)
class Seen:
    """What one request reads of every machine at once (a handful of statements instead of some per machine):
    each machine's change counter, agents present, pending proposals and the day's discarded work."""

    generation: int
    presence: list[dict]
    pending: list[tuple]
    discarded: list[tuple]
    since: float        # the discarded work is from this time on


class HubMachine:
    """`fleet.index.reader.FleetRead` over machine `name`'s rows on the hub (see the module's docstring); with
    `seen`, what `Hub.seen` read for this request stands in for its own statements, and with `digest_pass`
    the digest's queries are asked once for all the machines of the request (`Hub.in_one_pass`)."""

    def __init__(self, conns: HubConnections, name: str, names_only: bool, instance: str,
                 seen: Seen | None = None, digest_pass: DigestPass | None = None) -> None:
        self.conns, self.name, self.names_only, self.instance, self.seen = conns, name, names_only, instance, seen
        self.path = f"hub:{conns.label}#{name}"
        self.digest = HubDigest(self, digest_pass)
        self.presence = HubPresence(self)
        self.proposals = HubPending(self)
        self.search = HubSearch(self)

    def shown_path(self, path_or_name: str) -> str:
        """A repo as this machine's rows name it: its path, or (names only) `…/<name>`."""
        return f"{HIDDEN}/{path_or_name}" if self.names_only else path_or_name

    def _q(self, sql: str, args: tuple | list = ()) -> list[tuple]:
        return self.conns.query(sql, [self.name, *args])

    def _row(self, record: dict) -> dict:
        if self.names_only:
            record.update(path=self.shown_path(record["name"]), root=HIDDEN, gitdir=None)
        return record

    def generation(self) -> int:
        if self.seen is not None:
            return self.seen.generation
        return self._q("SELECT coalesce(max(generation), 0) FROM fleetdeck.repos WHERE machine_id = %s")[0][0]

    def changed_since(self, gen: int) -> list[int]:
        return [r[0] for r in self._q("SELECT repo_id FROM fleetdeck.repos WHERE machine_id = %s AND "
                                      "generation > %s", [gen])]

    def _rows(self, where: str, args: list) -> list[dict]:
        return [self._row(r[0]) for r in self._q(
            f"SELECT record FROM fleetdeck.repos WHERE machine_id = %s{where} ORDER BY coalesce(path, name) "
            "COLLATE \"C\"", args)]

    def summaries(self, include_gone: bool = False) -> list[dict]:
        return self._rows("" if include_gone else " AND NOT gone", [])

    def changed_rows(self, gen: int) -> list[dict]:
        return self._rows(" AND generation > %s", [gen])

    def repo_id(self, name_or_path: str, path: str | None = None) -> int | None:
        key = name_or_path if path is None else path
        if self.names_only and key.startswith(HIDDEN + "/"):
            key = key[len(HIDDEN) + 1:]
        found = self._q("SELECT repo_id FROM fleetdeck.repos WHERE machine_id = %s AND (path = %s OR name = %s) "
                        "ORDER BY gone, repo_id LIMIT 1", [key, name_or_path])
        return found[0][0] if found else None

    def repo(self, key: int | str) -> dict | None:
        repo_id = int(key) if isinstance(key, int) or str(key).isdigit() else self.repo_id(str(key))
        found = self._q("SELECT record FROM fleetdeck.repos WHERE machine_id = %s AND repo_id = %s", [repo_id])
        if not found:
            return None
        record = self._row(found[0][0])
        for table, order in (("branches", "name"), ("worktrees", "path"), ("submodules", "path")):
            record[table] = [r[0] for r in self._q(
                f"SELECT row FROM fleetdeck.{table} WHERE machine_id = %s AND repo_id = %s ORDER BY {order} "
                "COLLATE \"C\"", [repo_id])]
        record.update(stash_list=[], remotes=[])
        return record

    def repo_names(self) -> dict[int, tuple[str, str]]:
        """{repo id: (name, path as shown)} of every repo the machine pushed, gone ones too."""
        return {rid: (name, path or self.shown_path(name)) for rid, name, path in self._q(
            "SELECT repo_id, name, path FROM fleetdeck.repos WHERE machine_id = %s")}

    def roots(self) -> list[str]:
        return sorted(r[0] for r in self._q("SELECT DISTINCT record->>'root' FROM fleetdeck.repos WHERE "
                                            "machine_id = %s AND NOT gone AND record ? 'root'")) or \
            ([HIDDEN] if self.names_only else [])

    def meta(self, key: str, default: object = None) -> object:
        return self.instance if key == "instance" else default

    def history_backlog(self) -> dict:
        return dict(NO_BACKLOG)

    def prediction_backlog(self) -> dict:
        return dict(NO_BACKLOG)


class Hub:
    """The hub as the dashboard reads it: its machines (with their freshness) and each one's `HubMachine`."""

    def __init__(self, dsn: str, password: str | None = None) -> None:
        self.conns = HubConnections(dsn, password)
        self._machines: dict[tuple[str, bool, str], HubMachine] = {}
        self.memo: dict = {}                  # the views' answers kept while the rows they came from hold
        self.memo_lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None

    def _pool(self) -> ThreadPoolExecutor:
        """The threads a digest's statements are asked ahead on (each keeps its own read-only session)."""
        with self.memo_lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(max_workers=AHEAD_THREADS, thread_name_prefix="hub-digest")
            return self._threads

    @property
    def label(self) -> str:
        return self.conns.label

    def check(self) -> None:
        """That this login may read the whole hub (a machine's own login sees its rows only: refused)."""
        found = self.conns.query("SELECT pg_has_role(current_user, 'fleetdeck_hub', 'member') OR "
                                 "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)")
        if not found[0][0]:
            raise FleetError("UNAUTHORIZED", f"the login for the hub at {self.label} is not a member of "
                                             "fleetdeck_hub: a hub dashboard reads with a dashboard login")

    def machines(self) -> list[dict]:
        """Every enrolled machine: name, share, when it enrolled, last pushed and left (ISO or None)."""
        rows = self.conns.query("SELECT name, share, enrolled_at, last_push_at, left_at, "
                                "extract(epoch FROM now() - last_push_at), instance FROM fleetdeck.machines "
                                "ORDER BY name")
        return [{"name": n, "share": share or "paths", "enrolled_at": _iso(enrolled), "last_push_at": _iso(pushed),
                 "left_at": _iso(left), "age_s": None if age is None else round(float(age), 1),
                 "instance": instance}
                for n, share, enrolled, pushed, left, age, instance in rows]

    def machine(self, row: dict) -> HubMachine:
        """The reader of one machine's rows; a new one when the machine's index file is another (a rebuilt
        index numbers its repos and generations afresh: the ranked queue of the old one must not be kept)."""
        key = (row["name"], row["share"] == "names", f"{row['enrolled_at']}/{row['instance']}")
        if key not in self._machines:
            self._machines[key] = HubMachine(self.conns, row["name"], key[1], f"{key[0]}@{key[2]}")
        return self._machines[key]

    def seen(self, rows: list[dict], since: float) -> list[HubMachine]:
        """A reader of each machine in `rows` for one request, with what `Seen` holds read once for all of them
        (the discarded work from `since` on)."""
        names = [r["name"] for r in rows]
        generations = dict(self.conns.query(
            "SELECT m, (SELECT coalesce(max(generation), 0) FROM fleetdeck.repos WHERE machine_id = m) "
            "FROM unnest(%s::text[]) AS m", [names]))
        presence: dict[str, list] = {}
        for name, row in self.conns.query("SELECT machine_id, row FROM fleetdeck.presence WHERE expires_at > now()"):
            presence.setdefault(name, []).append(row)
        pending: dict[str, list] = {}
        for name, *row in self.conns.query(
                "SELECT machine_id, row->>'repo', id, row->>'op', row->>'agent', expires_at FROM fleetdeck.proposals "
                "WHERE status = 'pending' ORDER BY created_at"):
            pending.setdefault(name, []).append(tuple(row))
        discarded: dict[str, list] = {}
        for name, *row in self.conns.query(
                f"SELECT e.machine_id, r.name, coalesce(r.path, '{HIDDEN}/' || r.name), e.at, e.row->>'old_sha', "
                "e.row->>'new_sha', e.row->>'identity', e.row->>'message' FROM fleetdeck.events e JOIN "
                "fleetdeck.repos r USING (machine_id, repo_id) WHERE e.kind = %s AND e.at >= %s ORDER BY e.at DESC",
                [DISCARDED, int(since)]):
            discarded.setdefault(name, []).append(tuple(row))
        out = []
        for row in rows:
            m = self.machine(row)
            out.append(HubMachine(self.conns, m.name, m.names_only, m.instance,
                                  Seen(generations.get(row["name"], 0), presence.get(row["name"], []),
                                       pending.get(row["name"], []), discarded.get(row["name"], []), int(since))))
        return out

    def in_one_pass(self, scopes: list[tuple[dict, list[int] | None]],
                    ahead: list[Callable[[DigestPass], Any]] = ()) -> list[HubMachine]:
        """A reader of each machine of (freshness row, its repo ids or None) whose digest queries are asked
        of the hub once for all of them (fleet/team/hubpass.py); those of `ahead` started at once, side by side
        on the hub's threads (`DigestPass.ask_ahead`)."""
        shared = DigestPass(self.conns, {row["name"]: scope for row, scope in scopes})
        if ahead:
            shared.ask_ahead(self._pool(), list(ahead))
        readers = [self.machine(row) for row, _ in scopes]
        return [HubMachine(self.conns, m.name, m.names_only, m.instance, digest_pass=shared) for m in readers]

    def proposals(self, machines: list[str], limit: int) -> list[tuple[str, dict]]:
        """(machine, mirrored row) of the newest `limit` proposals of `machines`."""
        return self.conns.query("SELECT machine_id, row FROM fleetdeck.proposals WHERE machine_id = ANY(%s) "
                                "ORDER BY created_at DESC LIMIT %s", [machines, limit])

    def audit(self, machine: str, limit: int) -> list[dict]:
        """The newest `limit` audit entries of `machine` as the hub holds them, newest first (its newest chain
        first: a log recreated on the machine is another chain), each with its `chain`."""
        return [{**r[0], "chain": r[1]} for r in self.conns.query(
            "SELECT entry, chain FROM fleetdeck.audit WHERE machine_id = %s ORDER BY "
            "min(entry->>'at') OVER (PARTITION BY chain) DESC, chain, seq DESC LIMIT %s", [machine, limit])]

    def proposal(self, machine: str, proposal_id: str) -> dict | None:
        """Machine `machine`'s mirrored proposal `proposal_id` (None: it pushed none)."""
        found = self.conns.query("SELECT row FROM fleetdeck.proposals WHERE machine_id = %s AND id = %s",
                                 [machine, proposal_id])
        return found[0][0] if found else None

    def decisions(self, machine: str, proposal_id: str) -> list[dict]:
        """Every decision made on the hub for that proposal, oldest first, with its outcome (None: waiting for
        the machine)."""
        keys = ("id", "action", "reason", "approver", "key_id", "made_at", "outcome", "outcome_reason", "settled_at")
        found = self.conns.query(f"SELECT {', '.join(keys)} FROM fleetdeck.decisions WHERE machine_id = %s AND "
                                 "proposal_id = %s ORDER BY id", [machine, proposal_id])
        return [{**dict(zip(keys, r)), "made_at": _iso(r[5]), "settled_at": _iso(r[8])} for r in found]

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)     # what was asked ahead is answered (a view may be waiting for it)
            self._threads = None
        self.conns.close()


def _iso(stamp: Any) -> str | None:
    return None if stamp is None else iso(stamp.timestamp())
