"""The digest's queries (`fleet.index.reader.DigestSource`) for many machines at once: one set-based statement
per query, grouped by machine, instead of a dozen statements of each machine in turn.

A `DigestPass` covers some machines, each with its scope (repo ids, or None for all of it). Every method
answers for all of them ({machine: what that machine's own `DigestSource` method answers}) and is asked of the
hub once per pass: `fleet.team.hubread.HubDigest` (one machine's source) takes its answer from the pass its
machine belongs to, so fleet/views runs unchanged over each machine while the hub is asked once for all. A
machine's newest events, its unpushed branches and the like are each machine's first rows (a LATERAL per
machine over the indexes of migration 0006), so the answers are those of the machine's own queries.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Executor, Future
from typing import Any, Callable

from fleet.team.rows import HIDDEN

# An event's columns as the local `events` view gives them, from the pushed row.
EVENT = ("e.row->>'old_sha', e.row->>'new_sha', e.at, e.row->>'identity', e.row->>'message', "
         "(e.row->>'rewrote')::int")
LIVE = "NOT r.gone AND NOT coalesce(r.bare, true)"       # a repo whose branches the digest lists
AHEAD = "(b.ahead > 0 OR (b.upstream IS NULL AND b.head IS NOT NULL))"   # a branch ahead of its upstream, or never pushed
UNPUSHED = f"{LIVE} AND {AHEAD}"
# The digest's order of unpushed branches (the local index's), over the columns of the pass's statement.
UNPUSHED_ORDER = 'upstream IS NULL, ahead DESC NULLS LAST, repo COLLATE "C", branch COLLATE "C", repo_id'


def scope_key(scope: list[int] | None) -> tuple[int, ...] | None:
    """A scope as a pass compares it (the set of repo ids it names)."""
    return None if scope is None else tuple(sorted(set(scope)))


class DigestPass:
    """The digest's queries over `scopes` ({machine: its repo ids or None}), each asked of the hub once."""

    def __init__(self, conns: Any, scopes: dict[str, list[int] | None]) -> None:
        self.conns = conns
        self.scopes = {name: scope_key(scope) for name, scope in scopes.items()}
        self.machines = list(self.scopes)
        self._memo: dict[tuple, Future] = {}
        self._names: dict[str, dict[int, str | None]] = {}
        self._lock = threading.Lock()
        self._ahead: Executor | None = None      # set while `ask_ahead` runs: statements go to its threads

    def covers(self, machine: str, scope: list[int] | None) -> bool:
        return self.scopes.get(machine, ()) == scope_key(scope)

    def ask_ahead(self, pool: Executor, asks: list[Callable[["DigestPass"], Any]]) -> None:
        """Start the statements of `asks` (each calls a method of the pass) on `pool`'s threads, each thread with
        its own session, so the hub runs them side by side while the caller goes on; the view's own call of the
        same method and arguments later waits for that answer instead of asking again (an ask that no view
        makes costs its statement and nothing else)."""
        self._ahead = pool
        try:
            for ask in asks:
                ask(self)
        finally:
            self._ahead = None

    def _once(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """The answer of `key`, computed once (by the first caller, or on a thread of `ask_ahead`)."""
        with self._lock:
            found = self._memo.get(key)
            mine = found is None
            if mine:
                found = self._memo[key] = Future()
        if mine and self._ahead is not None:
            try:
                self._ahead.submit(_settle, found, compute)
                return None
            except RuntimeError:      # its threads were shut down (the hub closed): asked here, never left unanswered
                pass
        if mine:
            _settle(found, compute)
        return found.result()

    def _grouped(self, sql: str, args: list) -> dict[str, list[tuple]]:
        out: dict[str, list[tuple]] = {name: [] for name in self.machines}
        for row in self.conns.query(sql, args):
            out[row[0]].append(row[1:])
        return out

    def _where(self, alias: str, scoped: bool = True) -> tuple[str, list]:
        """The pass's machines (and, `scoped`, each one's repos) as a condition on table `alias`."""
        sql, args = f"{alias}.machine_id = ANY(%s)", [self.machines]
        narrowed = {name: ids for name, ids in self.scopes.items() if ids is not None} if scoped else {}
        if narrowed:
            pairs = [(name, rid) for name, ids in narrowed.items() for rid in ids]
            sql += (f" AND ({alias}.machine_id <> ALL(%s) OR ({alias}.machine_id, {alias}.repo_id) IN "
                    "(SELECT * FROM unnest(%s::text[], %s::bigint[])))")
            args += [list(narrowed), [p[0] for p in pairs], [p[1] for p in pairs]]
        return sql, args

    def _window(self, start: float, kinds: list[str] | None) -> tuple[str, list]:
        where, args = self._where("e")
        where += " AND e.at >= %s"
        args.append(math.ceil(start))
        if kinds is not None:
            where += " AND e.kind = ANY(%s)"
            args.append(list(kinds))
        return where, args

    def _firsts(self, columns: str, body: str, order: str, args: list, limit: int) -> dict[str, tuple[int, list]]:
        """{machine: (how many rows `body` has for it, its first `limit` by `order`)}: one LATERAL per machine."""
        rows = self._grouped(f"SELECT m, x.* FROM unnest(%s::text[]) AS m CROSS JOIN LATERAL (SELECT {columns}, "
                             f"count(*) OVER () FROM {body} ORDER BY {order} LIMIT %s) x",
                             [self.machines, *args, limit])
        return {name: (found[0][-1] if found else 0, [r[:-1] for r in found]) for name, found in rows.items()}

    # --- the window's events -------------------------------------------------------------------

    def events(self, start: float, kinds: list[str] | None, limit: int) -> dict[str, tuple[int, list[tuple]]]:
        totals, newest = self.event_count(start, kinds), self.newest(start, kinds, limit)
        return {name: (totals.get(name, 0), newest[name]) for name in self.machines}

    def event_count(self, start: float, kinds: list[str] | None) -> dict[str, int]:
        def compute() -> dict[str, int]:
            where, args = self._window(start, kinds)
            return dict(self.conns.query(f"SELECT e.machine_id, count(*) FROM fleetdeck.events e WHERE {where} "
                                         "GROUP BY e.machine_id", args))
        return self._once(("event_count", math.ceil(start), _key(kinds)), compute)

    def newest(self, start: float, kinds: list[str] | None, limit: int) -> dict[str, list[tuple]]:
        def compute() -> dict[str, list[tuple]]:
            where, args = self._window(start, kinds)
            return self._grouped(
                f"SELECT m, x.* FROM unnest(%s::text[]) AS m CROSS JOIN LATERAL (SELECT e.repo_id, e.ref, e.kind, "
                f"{EVENT} FROM fleetdeck.events e WHERE e.machine_id = m AND {where} ORDER BY e.at DESC, e.id DESC "
                "LIMIT %s) x", [self.machines, *args, limit])
        return self._once(("events", math.ceil(start), _key(kinds), limit), compute)

    def event_times(self, machine: str, start: float, kinds: list[str] | None, end: float) -> list[tuple]:
        """`machine`'s (repo id, time) of the window's events up to `end`: the window's rows are read once for
        all machines with no end, each machine's cut at its own (each report's end is its own "now": a pass
        keyed by it read the rows again for every machine whenever two reports' seconds differed)."""
        last = math.ceil(end)
        return [row for row in self.window_times(start, kinds)[machine] if row[1] <= last]

    def window_times(self, start: float, kinds: list[str] | None) -> dict[str, list[tuple]]:
        """{machine: (repo id, time) of each of its events from `start` on}."""
        def compute() -> dict[str, list[tuple]]:
            where, args = self._window(start, kinds)
            return self._grouped(f"SELECT e.machine_id, e.repo_id, e.at FROM fleetdeck.events e WHERE {where}", args)
        return self._once(("event_times", math.ceil(start), _key(kinds)), compute)

    def groups(self, start: float, kinds: list[str]) -> dict[str, tuple[list[tuple], list[tuple]]]:
        def compute() -> dict[str, tuple[list[tuple], list[tuple]]]:
            where, args = self._window(start, kinds)
            refs = self._grouped(f"SELECT DISTINCT e.machine_id, e.repo_id, e.kind, e.ref COLLATE \"C\" AS ref "
                                 f"FROM fleetdeck.events e WHERE {where} ORDER BY 4", args)
            groups = self._grouped(f"SELECT e.machine_id, e.repo_id, e.kind, count(*), min(e.at), max(e.at) FROM "
                                   f"fleetdeck.events e WHERE {where} GROUP BY e.machine_id, e.repo_id, e.kind "
                                   "ORDER BY count(*) DESC, max(e.at) DESC, e.repo_id, e.kind COLLATE \"C\"", args)
            return {name: (refs[name], groups[name]) for name in self.machines}
        return self._once(("groups", math.ceil(start), _key(kinds)), compute)

    def rewrites(self, start: float, limit: int) -> dict[str, tuple[int, list[tuple]]]:
        def compute() -> dict[str, tuple[int, list[tuple]]]:
            where, args = self._where("e")
            return self._firsts("r.name, e.ref, e.kind, e.row->>'old_sha', e.row->>'new_sha', e.at, e.row->>'message'",
                                "fleetdeck.events e JOIN fleetdeck.repos r USING (machine_id, repo_id) WHERE "
                                f"e.machine_id = m AND e.rewrote AND e.at >= %s AND {where}", "e.at DESC, e.id DESC",
                                [math.ceil(start), *args], limit)
        return self._once(("rewrites", math.ceil(start), limit), compute)

    # --- the fleet's state ---------------------------------------------------------------------

    def window_names(self, start: float) -> None:
        """Read the names of every repo with an event from `start` on, on every machine (in scope): one merge of
        the repos' and the events' indexes, not a lookup per repo, and asked with no need of the events read
        first (`names` waits for it)."""
        def compute() -> None:
            where, args = self._where("e")
            rows = self._grouped(f"SELECT r.machine_id, r.repo_id, r.name FROM fleetdeck.repos r WHERE "
                                 "r.machine_id = ANY(%s) AND (r.machine_id, r.repo_id) IN (SELECT e.machine_id, "
                                 f"e.repo_id FROM fleetdeck.events e WHERE {where} AND e.at >= %s)",
                                 [self.machines, *args, math.ceil(start)])
            for name, found in rows.items():
                self._held(name, dict(found))
        self._once(("names", math.ceil(start)), compute)

    def names(self, machine: str, repo_ids: list[int]) -> dict[int, str]:
        """{repo id: name} of `repo_ids` of `machine`. Read once for every repo the pass's events name on any
        machine (the digest names the repos of its events, its chart's and its groups'; or, asked ahead, those
        of the window's events: `window_names`), and again only for an id none of them held."""
        with self._lock:
            ahead = [found for key, found in self._memo.items() if key[0] == "names"]
        for found in ahead:
            found.result()
        known = self._names.setdefault(machine, {})
        if any(rid not in known for rid in repo_ids):
            wanted = {name: {rid for rid in ids if rid not in self._names.setdefault(name, {})}
                      for name, ids in self._event_repos().items()}
            wanted.setdefault(machine, set()).update(rid for rid in repo_ids if rid not in known)
            wanted = {name: ids for name, ids in wanted.items() if ids}
            for name, ids in wanted.items():
                self._names[name].update(dict.fromkeys(ids))   # a repo the hub does not hold is asked for once
            for name, rid, repo in self.conns.query(     # each machine's ids as one array literal: no pair per id
                    "SELECT k.m, r.repo_id, r.name FROM unnest(%s::text[], %s::text[]) AS k(m, ids) "
                    "JOIN fleetdeck.repos r ON r.machine_id = k.m AND r.repo_id = ANY(k.ids::bigint[])",
                    [list(wanted), ["{" + ",".join(map(str, ids)) + "}" for ids in wanted.values()]]):
                self._names[name][rid] = repo
        return {rid: known[rid] for rid in repo_ids if known.get(rid) is not None}

    def _held(self, machine: str, names: dict[int, str | None]) -> None:
        """Repo names read with other rows (None: the hub holds no such repo)."""
        with self._lock:
            self._names.setdefault(machine, {}).update(names)

    def _event_repos(self) -> dict[str, set[int]]:
        """{machine: ids of the repos named by the events, event times and groups the pass has read or is
        reading (those asked ahead are waited for: their names are read in the same statement)}."""
        out: dict[str, set[int]] = {}
        with self._lock:
            asked = [(key[0], found) for key, found in self._memo.items()
                     if key[0] in ("events", "event_times", "groups")]
        for kind, answer in asked:
            for name, found in answer.result().items():
                rows = (found if kind in ("events", "event_times")
                        else found[0] + found[1] if kind == "groups" else [])
                out.setdefault(name, set()).update(r[0] for r in rows)
        return out

    def repos(self) -> dict[str, tuple[int, list[tuple], set[str]]]:
        """{machine: (how many repos are not gone, (repo id, name, error) of those with an error, the names of
        the gone ones)}: the fleet the digest scanned."""
        def compute() -> dict[str, tuple[int, list[tuple], set[str]]]:
            where, args = self._where("r", scoped=False)
            counts = dict((name, n) for name, n in self.conns.query(
                f"SELECT r.machine_id, count(*) FROM fleetdeck.repos r WHERE {where} AND NOT r.gone "
                "GROUP BY r.machine_id", args))
            odd = self._grouped(f"SELECT r.machine_id, r.repo_id, r.name, r.gone, r.error FROM fleetdeck.repos r "
                                f"WHERE {where} AND (r.gone OR r.error IS NOT NULL) ORDER BY r.machine_id, r.repo_id",
                                args)
            return {name: (counts.get(name, 0), [(rid, repo, error) for rid, repo, gone, error in odd[name]
                                                  if error is not None and not gone],
                           {repo for _rid, repo, gone, _error in odd[name] if gone}) for name in self.machines}
        return self._once(("repos",), compute)

    def scanned(self, scope: list[int]) -> dict[str, tuple[int, list[tuple]]]:
        """{machine: (how many of its repos in `scope`, (name, error) of those with an error)} (a scope: any
        repo it names, gone or not)."""
        def compute() -> dict[str, tuple[int, list[tuple]]]:
            where, args = self._where("r")
            found = self._grouped(f"SELECT r.machine_id, r.name, r.error FROM fleetdeck.repos r WHERE {where} "
                                  "ORDER BY r.machine_id, r.repo_id", args)
            return {name: (len(rows), [(repo, error) for repo, error in rows if error is not None])
                    for name, rows in found.items()}
        return self._once(("scanned",), compute)

    def unpushed(self, limit: int) -> dict[str, tuple[int, list[tuple]]]:
        """Each machine's unpushed branches: how many (those of all its branches, less those of its gone or bare
        repos: no join of every branch with its repo), and the first `limit` in two parts, each read in order
        and cut at `limit` (the order puts every branch with an upstream or a known `ahead` before the never
        pushed ones): those few, sorted, then the never pushed ones in the order of their repo's name (an index
        of the live repos by name, each one's branches sorted as they come), the two parts sorted again."""
        def compute() -> dict[str, tuple[int, list[tuple]]]:
            where, args = self._where("r")
            bwhere, bargs = self._where("b")
            count = (f"(SELECT count(*) FROM fleetdeck.branches b WHERE b.machine_id = m AND {AHEAD} AND {bwhere}) - "
                     "(SELECT count(*) FROM fleetdeck.branches b JOIN fleetdeck.repos r USING (machine_id, repo_id) "
                     f"WHERE r.machine_id = m AND (r.gone OR coalesce(r.bare, true)) AND {AHEAD} AND {where})")
            part = ("SELECT r.name AS repo, b.name AS branch, b.ahead, b.upstream, r.repo_id FROM fleetdeck.branches b "
                    f"JOIN fleetdeck.repos r USING (machine_id, repo_id) WHERE r.machine_id = m AND {UNPUSHED} AND "
                    f"{where} AND ")
            rows = self._grouped(
                f"SELECT m, x.repo, x.branch, x.ahead, x.upstream, c.n FROM unnest(%s::text[]) AS m "
                f"CROSS JOIN LATERAL (SELECT {count} AS n OFFSET 0) c CROSS JOIN LATERAL (SELECT * FROM ("
                f"({part}(b.upstream IS NOT NULL OR b.ahead IS NOT NULL) ORDER BY b.upstream IS NULL, b.ahead DESC "
                f"NULLS LAST, r.name COLLATE \"C\", b.name COLLATE \"C\", r.repo_id LIMIT %s) UNION ALL "
                f"({part}b.upstream IS NULL AND b.ahead IS NULL ORDER BY r.name COLLATE \"C\", b.name COLLATE \"C\", "
                f"r.repo_id LIMIT %s)) u ORDER BY {UNPUSHED_ORDER} LIMIT %s) x",
                [self.machines, *bargs, *args, *args, limit, *args, limit, limit])
            return {name: (found[0][-1] if found else 0, [r[:-1] for r in found]) for name, found in rows.items()}
        return self._once(("unpushed", limit), compute)

    def dirty(self, limit: int) -> dict[str, tuple[int, list[tuple]]]:
        def compute() -> dict[str, tuple[int, list[tuple]]]:
            where, args = self._where("r")
            counts = ", ".join(f"(r.record->>'{c}')::int" for c in ("staged", "unstaged", "untracked", "conflicted"))
            return self._firsts(f"r.name, {counts}", "fleetdeck.repos r WHERE r.machine_id = m AND NOT r.gone AND "
                                f"r.changes > 0 AND {where}", "r.name COLLATE \"C\", r.repo_id", args, limit)
        return self._once(("dirty", limit), compute)

    def lost(self, since: float | None) -> dict[str, list[dict]]:
        """{machine: its recoverable commits as of its last push}, newest dropped first."""
        def compute() -> dict[str, list[dict]]:
            where, args = self._where("l")
            if since is not None:
                where += " AND l.dropped_at >= %s"
                args.append(int(since))
            found = self._grouped(f"SELECT l.machine_id, l.row, coalesce(r.path, '{HIDDEN}/' || r.name) FROM "
                                  "fleetdeck.lost l JOIN fleetdeck.repos r USING (machine_id, repo_id) WHERE "
                                  f"NOT r.gone AND {where}", args)
            out = {}
            for name, rows in found.items():
                commits = [{**row, "path": row.get("path") or path} for row, path in rows]
                commits.sort(key=lambda c: (-c["dropped_at"], c["repo"], c["sha"]))
                out[name] = commits
            return out
        return self._once(("lost", None if since is None else int(since)), compute)


def _settle(future: Future, compute: Callable[[], Any]) -> None:
    try:
        future.set_result(compute())
    except BaseException as exc:   # the caller that waits for it raises it (a lost hub: one FleetError line)
        future.set_exception(exc)


def _key(kinds: list[str] | None) -> tuple[str, ...] | None:
    return None if kinds is None else tuple(kinds)
