"""Search the fleet's memory: branch names, commit subjects and reflog messages across every repository.

Everything comes from the index, so a search over a thousand repositories is one query per kind. Commit
subjects come from two places: the reflogs (this clone's own commits, kept after git expires them) and recent
history (fleet.index.history: the last 90 days of every branch, brought up to date before a commit search
with one `git log` per repo whose refs moved). The result's `searched` says what was searched. Matching is a case-insensitive substring test; reflog messages use the trigram index
(`reflog_search`) when the query is long enough for it (3+ characters) and a plain scan otherwise.
The same commit appears in HEAD's and its branch's reflog: each movement is reported once.
"""

from __future__ import annotations

from typing import TypedDict

from fleet.caps import Capped, check_int
from fleet.errors import FleetError
from fleet.index.history import MAX_PER_REPO, WINDOW_DAYS, sync_history
from fleet.index.store import Index
from fleet.timespec import iso

KINDS = ("branch", "commit", "reflog")
COMMIT_KINDS = ("commit", "amend", "merge")
MAX_QUERY = 200
DEFAULT_LIMIT = 50
MAX_LIMIT = 500


SEARCH_UPTO_KEY = "reflog_search_upto"


class SearchMatch(TypedDict):
    kind: str
    repo: str | None
    path: str | None
    ref: str | None
    sha: str | None
    text: str | None
    at: str | None


class SearchResult(Capped):  # with the freshness the adapter adds (mcp_bridge/models.py)
    query: str
    matches: list[SearchMatch]
    match_count: int
    searched: dict


def sync_search_index(index: Index) -> int:
    """Index the reflog lines appended since the last search (one bulk insert); returns how many."""
    conn = index.conn
    top = conn.execute("select ifnull(max(id), 0) from reflog").fetchone()[0]
    if top <= _indexed_upto(conn):
        return 0
    with index.write() as conn:
        upto = _indexed_upto(conn)  # re-read under the write lock: another process may have caught up
        cur = conn.execute("insert into reflog_search (rowid, message) select id, message from reflog"
                           " where id > ? and id <= ?", (upto, top))
        conn.execute("insert or replace into meta (key, value) values (?, ?)", (SEARCH_UPTO_KEY, str(top)))
    return cur.rowcount


def _indexed_upto(conn) -> int:
    row = conn.execute("select value from meta where key = ?", (SEARCH_UPTO_KEY,)).fetchone()
    return int(row[0]) if row else 0


def _fts_phrase(query: str) -> str:
    return '"' + query.replace('"', '""') + '"'


def subject(message: str) -> str:
    """`commit (amend): Fix x` -> `Fix x`: the commit subject a reflog line records."""
    head, sep, rest = message.partition(": ")
    return rest if sep and head.startswith("commit") else message


def _repo_ids(index: Index, repos: list[str] | None) -> list[int] | None:
    if not repos:
        return None
    ids = []
    for key in repos:
        record = index.repo(key)
        if record is None:
            raise FleetError("REPO_NOT_IN_FLEET", f"{key!r} is not a repository in the fleet index")
        ids.append(record["id"])
    return ids


def checked(query: str, kinds: list[str] | None, limit: int) -> list[str]:
    """The kinds a search looks for, once its arguments are checked (the hub's search takes the same)."""
    if not isinstance(query, str) or not query.strip():
        raise FleetError("BAD_ARGUMENT", "query must be a non-empty string")
    if len(query) > MAX_QUERY:
        raise FleetError("BAD_ARGUMENT", f"query is longer than {MAX_QUERY} characters")
    if "\0" in query:
        raise FleetError("BAD_ARGUMENT", "query contains a NUL character")
    check_int(limit, "limit", 1, MAX_LIMIT)
    wanted = list(kinds) if kinds else list(KINDS)
    bad = [k for k in wanted if k not in KINDS]
    if bad:
        raise FleetError("BAD_ARGUMENT", f"unknown kind {bad[0]!r}; expected some of {', '.join(KINDS)}")
    return wanted


def search(index: Index, query: str, *, kinds: list[str] | None = None, repos: list[str] | None = None,
           limit: int = DEFAULT_LIMIT) -> SearchResult:
    """Matches for `query`, branches first, then commits and other reflog events newest first."""
    wanted = checked(query, kinds, limit)
    ids = _repo_ids(index, repos)
    if len(query) >= 3 and ("commit" in wanted or "reflog" in wanted):
        sync_search_index(index)
    history = sync_history(index) if "commit" in wanted else None
    conn = index.conn
    names = {row[0]: (row[1], row[2]) for row in conn.execute("select id, name, path from repos")}
    matches: list[dict] = []
    total = 0
    if "branch" in wanted:
        found, count = _branches(conn, query, ids, limit)
        matches += found
        total += count
    room = max(0, limit - len(matches))
    if history is not None:
        events, event_count = _events(conn, query, "commit", ids, room)
        commits, commit_count = _history(conn, query, ids, room, history["since"])
        matches += sorted(events + commits, key=lambda m: m["at"] or "", reverse=True)[:room]
        total += event_count + commit_count
    if "reflog" in wanted:
        found, count = _events(conn, query, "reflog", ids, max(0, limit - len(matches)))
        matches += found
        total += count
    for m in matches:
        m["repo"], m["path"] = names.get(m.pop("repo_id"), (None, None))
    return {"query": query, "matches": matches, "match_count": total,
            "truncated": total > len(matches), "omitted_count": total - len(matches),
            "searched": _searched(wanted, history)}


def _searched(wanted: list[str], history: dict | None) -> dict:
    """What this search looked at, in words and figures (a person or agent must know what a miss means)."""
    out: dict = {"kinds": wanted}
    if "branch" in wanted:
        out["branches"] = "local branch names of every repository in the index"
    if "reflog" in wanted or history is not None:
        out["reflog"] = "every reflog line the index holds (kept after git expires them)"
    if history is not None:
        out["history"] = {
            "description": (f"commit subjects from the last {WINDOW_DAYS} days of every local and remote-tracking "
                            f"branch (at most {MAX_PER_REPO} commits a repository)"),
            "since": iso(history["since"]), "repos": history["repos"] - history["pending"],
            "pending_repos": history["pending"]}
    return out


def _history(conn, query: str, ids: list[int] | None, limit: int, since: int) -> tuple[list[dict], int]:
    """Commits from recent history whose subject matches, minus those a reflog commit event already gives."""
    where, args = _in_repos(ids, "c.repo_id")
    if len(query) >= 3:
        source, match, match_args = ("commits c join commit_search s on s.rowid = c.id", "commit_search match ?",
                                     [_fts_phrase(query)])
    else:
        source, match, match_args = "commits c", "instr(lower(c.subject), lower(?)) > 0", [query]
    marks = ", ".join("?" * len(COMMIT_KINDS))
    sql = (f"from {source} where {match} and c.at >= ?{where} and not exists (select 1 from reflog r where"
           f" r.repo_id = c.repo_id and r.new_sha = c.sha and r.kind in ({marks}))")
    params = [*match_args, since, *args, *COMMIT_KINDS]
    count = conn.execute(f"select count(*) {sql}", params).fetchone()[0]
    rows = conn.execute(f"select c.repo_id, c.sha, c.at, c.author, c.subject {sql} order by c.at desc, c.repo_id"
                        f" limit ?", [*params, limit]).fetchall() if limit else []
    return [{"kind": "commit", "source": "history", "repo_id": r[0], "ref": None, "sha": r[1], "old_sha": None,
             "event": None, "text": r[4], "identity": r[3], "at": iso(r[2])} for r in rows], count


def _in_repos(ids: list[int] | None, column: str = "repo_id") -> tuple[str, list]:
    if ids is None:
        return "", []
    return f" and {column} in ({', '.join('?' * len(ids))})", list(ids)


def _branches(conn, query: str, ids: list[int] | None, limit: int) -> tuple[list[dict], int]:
    where, args = _in_repos(ids)
    sql = (f"from branches where instr(lower(name), lower(?)) > 0{where}")
    count = conn.execute(f"select count(*) {sql}", [query, *args]).fetchone()[0]
    rows = conn.execute(f"select repo_id, name, head, upstream {sql} order by name, repo_id limit ?",
                        [query, *args, limit]).fetchall()
    return [{"kind": "branch", "repo_id": r[0], "ref": "refs/heads/" + r[1], "name": r[1], "sha": r[2],
             "upstream": r[3], "text": r[1], "at": None} for r in rows], count


def _events(conn, query: str, kind: str, ids: list[int] | None, limit: int) -> tuple[list[dict], int]:
    where, args = _in_repos(ids, "r.repo_id")
    marks = ", ".join("?" * len(COMMIT_KINDS))
    kind_clause = f"r.kind in ({marks})" if kind == "commit" else f"r.kind not in ({marks})"
    subject_args: list[str] = []
    if kind == "commit":  # match the subject, not git's `commit (initial): ` prefix
        kind_clause += (" and instr(lower(case when r.message like 'commit%: %' then "
                        "substr(r.message, instr(r.message, ': ') + 2) else r.message end), lower(?)) > 0")
        subject_args = [query]
    if len(query) >= 3:
        source = "reflog r join reflog_search s on s.rowid = r.id"
        match, match_args = "reflog_search match ?", [_fts_phrase(query)]
    else:
        source = "reflog r"
        match, match_args = "instr(lower(r.message), lower(?)) > 0", [query]
    grouped = (f"select r.repo_id, max(r.ref) as ref, r.old_sha, r.new_sha, r.at, r.message, r.kind, "
               f"r.identity from {source} where {match} and {kind_clause}{where} "
               f"group by r.repo_id, ifnull(r.old_sha, ''), ifnull(r.new_sha, ''), r.at, r.message")
    params = [*match_args, *COMMIT_KINDS, *subject_args, *args]
    count = conn.execute(f"select count(*) from ({grouped})", params).fetchone()[0]
    rows = conn.execute(f"{grouped} order by r.at desc, r.repo_id limit ?", [*params, limit]).fetchall() \
        if limit else []
    out = []
    for repo_id, ref, old, new, at, message, event_kind, identity in rows:
        out.append({"kind": kind, "source": "reflog", "repo_id": repo_id, "ref": ref, "sha": new, "old_sha": old,
                    "event": event_kind, "text": subject(message) if kind == "commit" else message,
                    "identity": identity, "at": iso(at)})
    return out, count
