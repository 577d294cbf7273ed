"""The digest's queries (`fleet.views.digest`): events in a window, their groups, and the fleet's state.

Every method takes the window as (start, scope: repo ids or None for the whole fleet, kinds or None for
all) and returns plain rows; the digest shapes them. A second engine implements the same methods over its own
tables (`fleet.index.reader.DigestSource`; the team hub's is fleet/team/hubread.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleet.index.store import Index



class DigestQueries:
    """Named queries over events and repos for the digest and its report."""

    def __init__(self, index: "Index") -> None:
        self.index = index

    def events(self, start: float, scope: list[int] | None, kinds: list[str] | None,
               limit: int) -> tuple[int, list[tuple]]:
        """(how many events, the newest `limit`): (repo id, ref, kind, old, new, at, identity, message,
        rewrote), newest first."""
        where, args = _where(start, scope, kinds)
        conn = self.index.conn
        total = conn.execute(f"select count(*) from event_rows e where {where}", args).fetchone()[0]
        rows = conn.execute(
            "select e.repo_id, e.ref, e.kind, e.old_sha, e.new_sha, e.at, e.identity, e.message, e.rewrote"
            f" from events e where {where} order by e.at desc, e.id desc limit ?", (*args, limit)).fetchall()
        return total, rows

    def event_times(self, start: float, scope: list[int] | None, kinds: list[str] | None,
                    end: float) -> list[tuple[int, int]]:
        """(repo id, at) of every event from `start` to `end` (the activity chart)."""
        where, args = _where(start, scope, kinds)
        return self.index.conn.execute(f"select e.repo_id, e.at from event_rows e where {where} and e.at <= ?",
                                       (*args, math.ceil(end))).fetchall()

    def groups(self, start: float, scope: list[int] | None,
               kinds: list[str]) -> tuple[list[tuple], list[tuple]]:
        """Events grouped per (repo, kind): ((repo id, kind, ref) of each ref, by ref name), and (repo id,
        kind, count, first at, last at) of each group, busiest first."""
        where, args = _where(start, scope, kinds)
        conn = self.index.conn
        refs = conn.execute(f"select distinct e.repo_id, e.kind, e.ref from event_rows e where {where}"
                            " order by e.ref", args).fetchall()
        groups = conn.execute(f"select e.repo_id, e.kind, count(*), min(e.at), max(e.at) from event_rows e"
                              f" where {where} group by e.repo_id, e.kind order by count(*) desc, max(e.at) desc, e.repo_id, e.kind",
                              args).fetchall()
        return refs, groups

    def names(self, repo_ids: set[int] | list[int]) -> dict[int, str]:
        """{repo id: fleet name} of at least `repo_ids` (here: of every repo, gone ones too: a local read)."""
        return dict(self.index.conn.execute("select id, name from repos"))

    def gone_names(self) -> set[str]:
        return {name for (name,) in self.index.conn.execute("select name from repos where gone = 1")}

    def scanned(self, scope: list[int] | None) -> tuple[int, list[tuple[str, str | None]]]:
        """(how many repos are in scope (the whole fleet: those not gone), (name, error) of those with an
        error)."""
        conn = self.index.conn
        if scope is None:
            where, args = "gone = 0", []
        else:
            where, args = f"id in ({', '.join('?' * len(scope))})", list(scope)
        count = conn.execute(f"select count(*) from repos where {where}", args).fetchone()[0]
        return count, conn.execute(f"select name, error from repos where {where} and error is not null order by id",
                                   args).fetchall()

    def unpushed(self, scope: list[int] | None, limit: int) -> tuple[int, list[tuple]]:
        """(how many, the first `limit`) (repo, branch, ahead, upstream) of each branch ahead of its upstream or
        never pushed."""
        in_scope, args = _in_scope(scope)
        return self._counted(
            "select r.name, b.name, b.ahead, b.upstream from branches b join repos r on r.id = b.repo_id"
            " where r.gone = 0 and r.bare = 0 and (b.ahead > 0 or (b.upstream is null and b.head is not null))"
            f"{in_scope} order by b.upstream is null, b.ahead desc, r.name, b.name, r.id", args, limit)

    def dirty(self, scope: list[int] | None, limit: int) -> tuple[int, list[tuple]]:
        """(how many, the first `limit`) (repo, staged, unstaged, untracked, conflicted) of each repo with local
        changes."""
        in_scope, args = _in_scope(scope)
        return self._counted(
            "select r.name, r.staged, r.unstaged, r.untracked, r.conflicted from repos r where r.gone = 0 and"
            " (ifnull(r.staged, 0) + ifnull(r.unstaged, 0) + ifnull(r.untracked, 0) + ifnull(r.conflicted, 0))"
            f" > 0{in_scope} order by r.name, r.id", args, limit)

    def stashes_before(self, stale: str, scope: list[int] | None, limit: int) -> tuple[int, list[tuple]]:
        """(how many, the first `limit`) (repo, index, message, at) of each stash made before `stale` (ISO),
        oldest first."""
        in_scope, args = _in_scope(scope)
        return self._counted(
            "select r.name, s.idx, s.message, s.at from stashes s join repos r on r.id = s.repo_id"
            f" where r.gone = 0 and s.at < ?{in_scope} order by s.at, r.id, s.idx", [stale, *args], limit)

    def _counted(self, sql: str, args: list, limit: int) -> tuple[int, list[tuple]]:
        """(rows `sql` gives, its first `limit`): a summary lists a few and counts them all."""
        conn = self.index.conn
        total = conn.execute(f"select count(*) from ({sql})", args).fetchone()[0]
        return total, conn.execute(f"{sql} limit ?", [*args, limit]).fetchall()

    def stashes(self, repo_ids: list[int] | None) -> list[tuple]:
        """(repo id, at (ISO), message) of every stash the repos hold (all repos: None)."""
        where = "" if repo_ids is None else f" where repo_id in ({', '.join('?' * len(repo_ids))})"
        return self.index.conn.execute(f"select repo_id, at, message from stashes{where}",
                                       list(repo_ids or [])).fetchall()

    def repo_events(self, repo_id: int, limit: int) -> list[tuple]:
        """(id, ref, kind, old, new, at, identity, message, rewrote) of one repo's newest `limit` events."""
        return self.index.conn.execute(
            "select id, ref, kind, old_sha, new_sha, at, identity, message, rewrote from events where repo_id = ?"
            " order by at desc, id desc limit ?", (repo_id, limit)).fetchall()

    def of_kind(self, kind: str, since: float | None, repo_ids: list[int] | None) -> list[tuple]:
        """(repo name, repo path, at, old, new, identity, message) of every `kind` event, newest first."""
        where, args = ["e.kind = ?"], [kind]
        if since is not None:
            where.append("e.at >= ?")
            args.append(int(since))
        if repo_ids is not None:
            where.append(f"e.repo_id IN ({', '.join('?' * len(repo_ids))})")
            args.extend(repo_ids)
        return self.index.conn.execute(
            "SELECT r.name, r.path, e.at, e.old_sha, e.new_sha, e.identity, e.message FROM event_rows e "
            f"JOIN repos r ON r.id = e.repo_id WHERE {' AND '.join(where)} ORDER BY e.at DESC", args).fetchall()

    def recoverable(self, since: float | None, repo_ids: list[int] | None) -> dict:
        """The commits events dropped that no ref reaches (`fleet.index.lost.lost_commits`: asked of git)."""
        from fleet.index.lost import lost_commits   # git's reads: only when recoverable commits are asked for

        return lost_commits(self.index, since=since, repo_ids=repo_ids)

    def rewrites(self, start: float, scope: list[int] | None, limit: int) -> tuple[int, list[tuple]]:
        """(how many, the newest `limit`) (repo, ref, kind, old, new, at, message) of the events since `start`
        that rewrote history."""
        in_scope, args = _in_scope(scope)
        return self._counted(
            "select r.name, e.ref, e.kind, e.old_sha, e.new_sha, e.at, e.message from events e"
            f" join repos r on r.id = e.repo_id where e.rewrote = 1 and e.at >= ?{in_scope}"
            " order by e.at desc, e.id desc", [math.ceil(start), *args], limit)


def _where(start: float, scope: list[int] | None, kinds: list[str] | None) -> tuple[str, list]:
    clauses, args = ["e.at >= ?"], [math.ceil(start)]
    if scope is not None:
        clauses.append(f"e.repo_id in ({', '.join('?' * len(scope))})")
        args.extend(scope)
    if kinds is not None:
        clauses.append(f"e.kind in ({', '.join('?' * len(kinds))})")
        args.extend(kinds)
    return " and ".join(clauses), args


def _in_scope(scope: list[int] | None) -> tuple[str, list]:
    if scope is None:
        return "", []
    return f" and r.id in ({', '.join('?' * len(scope))})", list(scope)
