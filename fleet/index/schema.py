"""The index's schema, as an ordered list of migrations (never edit one that has shipped: add a new one).

The schema version is the number of applied migrations (`Index.schema_version`).
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database, Migrations

migrations = Migrations("fleetdeck")


@migrations()
def m001_core(db: Database) -> None:
    db["roots"].create({"id": int, "path": str, "added_at": str}, pk="id", not_null={"path"})
    db["roots"].create_index(["path"], unique=True)
    db["repos"].create({
        "id": int, "path": str, "root": str, "name": str, "bare": int, "gitdir": str,
        "branch": str, "detached": int, "head": str, "head_ref": str,
        "upstream": str, "upstream_gone": int, "ahead": int, "behind": int,
        "staged": int, "unstaged": int, "untracked": int, "conflicted": int, "stashes": int,
        "operation": str, "operation_detail": str, "predicted_conflicts": str,
        "last_activity": str, "scanned_at": str, "first_seen": str, "error": str,
        "gone": int, "gone_at": str, "score": int, "reasons": str, "generation": int,
    }, pk="id", not_null={"path"}, defaults={"gone": 0, "score": 0, "bare": 0, "generation": 0})
    db["repos"].create_index(["path"], unique=True)
    db["repos"].create_index(["gone", "score"])
    db["repos"].create_index(["generation"])
    db["branches"].create({
        "repo_id": int, "name": str, "head": str, "upstream": str, "upstream_ref": str,
        "upstream_gone": int, "ahead": int, "behind": int, "current": int,
    }, pk=("repo_id", "name"))
    db["worktrees"].create({
        "repo_id": int, "path": str, "id": str, "branch": str, "head": str, "detached": int,
        "locked": int, "lock_reason": str, "prunable": int, "prunable_reason": str,
        "staged": int, "unstaged": int, "untracked": int, "conflicted": int, "operation": str, "error": str,
    }, pk=("repo_id", "path"))
    db["submodules"].create({
        "repo_id": int, "path": str, "name": str, "url": str, "recorded": str, "checked_out": str,
        "state": str, "error": str,
    }, pk=("repo_id", "path"))
    db["stashes"].create({"repo_id": int, "idx": int, "sha": str, "message": str, "at": str},
                         pk=("repo_id", "idx"))
    db["remotes"].create({"repo_id": int, "name": str, "url": str}, pk=("repo_id", "name"))
    db["reflog"].create({
        "id": int, "repo_id": int, "ref": str, "old_sha": str, "new_sha": str, "at": int, "tz": str,
        "identity": str, "message": str, "kind": str,
    }, pk="id")
    db.execute("CREATE UNIQUE INDEX reflog_unique ON reflog "
               "(repo_id, ref, ifnull(old_sha, ''), ifnull(new_sha, ''), at, message)")
    db["reflog"].create_index(["at"])
    db["reflog"].create_index(["repo_id", "at"])
    db["reflog_files"].create({"repo_id": int, "ref": str, "inode": int, "size": int},
                              pk=("repo_id", "ref"))
    db["meta"].create({"key": str, "value": str}, pk="key")


@migrations()
def m002_presence(db: Database) -> None:
    """Agent presence: merged rows per (agent, repo), replaced on each refresh, and the MCP bridge's own
    evidence (`presence_mcp`), kept across refreshes until it ages out."""
    db["presence"].create({
        "agent": str, "repo": str, "repo_id": int, "repo_name": str, "state": str, "sources": str,
        "branch": str, "tool": str, "files": str, "pid": int, "pids": str, "last_activity": str,
        "refreshed_at": str,
    }, pk=("agent", "repo"), not_null={"agent", "repo", "state"})
    db["presence_mcp"].create({"agent": str, "repo": str, "tool": str, "files": str, "at": float},
                              pk=("agent", "repo"), not_null={"agent", "repo", "at"})


@migrations()
def m003_events(db: Database) -> None:
    """Reflog movements as digest events (see fleet/events.py for why a table and not a view)."""
    db["events"].create({
        "id": int, "repo_id": int, "ref": str, "kind": str, "old_sha": str, "new_sha": str, "at": int,
        "identity": str, "message": str, "rewrote": int, "reflog_id": int,
    }, pk="id", not_null={"repo_id", "ref", "kind", "at"})
    db.execute("CREATE UNIQUE INDEX events_reflog ON events (reflog_id) WHERE reflog_id IS NOT NULL")
    db["events"].create_index(["at"])
    db["events"].create_index(["repo_id", "at"])
    db["events"].create_index(["repo_id", "ref", "at"])
    db["event_cursor"].create({"repo_id": int, "reflog_id": int}, pk="repo_id")


@migrations()
def m004_reflog_search(db: Database) -> None:
    """Substring search over reflog messages (fleet search): a trigram FTS5 index over `reflog`.

    It is filled in bulk by `fleet.search.sync_search_index` (before a search), not by an insert trigger:
    per-row trigram indexing inside every ingest tripled the cost of a cold scan, while one bulk catch-up of
    a thousand repos' reflogs takes tens of milliseconds. Rows are deleted only by `prune-events`; the delete
    trigger un-indexes the ones the index already holds (`meta.reflog_search_upto`).
    """
    db.execute("CREATE VIRTUAL TABLE reflog_search USING fts5(message, content='reflog', content_rowid='id', "
               "tokenize='trigram')")
    db.execute("CREATE TRIGGER reflog_search_ad AFTER DELETE ON reflog "
               "WHEN old.id <= ifnull((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'reflog_search_upto'), 0) "
               "BEGIN INSERT INTO reflog_search (reflog_search, rowid, message) VALUES ('delete', old.id, old.message); "
               "END")


@migrations()
def m005_presence_mcp_sessions(db: Database) -> None:
    """One MCP presence record per client session (two sessions of one agent in one repo are two records),
    with the client's self-declared version and, on stdio, its process id."""
    table = db["presence_mcp"]
    table.add_column("session", str, not_null_default="")
    table.add_column("client_version", str)
    table.add_column("client_pid", int)
    table.transform(pk=("agent", "repo", "session"))


@migrations()
def m006_proposals(db: Database) -> None:
    """The write side (fleet/ops): proposals with their lifecycle, and the restore points taken before each
    approved proposal ran. Times are unix seconds (REAL) so expiry is one indexed comparison."""
    db["proposals"].create({
        "id": str, "op": str, "repo": str, "agent": str, "reason": str, "args": str, "args_fingerprint": str,
        "idempotency_key": str, "preview": str, "risk": str, "status": str, "policy": str,
        "created_at": float, "expires_at": float, "decided_at": float, "decided_by": str,
        "decision_reason": str, "started_at": float, "finished_at": float, "result": str, "error": str,
        "restore_point": str, "worker_pid": int, "worker_start": str,
    }, pk="id", not_null={"op", "repo", "agent", "reason", "status", "created_at", "expires_at"})
    db.execute("CREATE UNIQUE INDEX proposals_idempotency ON proposals (agent, op, idempotency_key) "
               "WHERE idempotency_key IS NOT NULL")
    db["proposals"].create_index(["status", "expires_at"])
    db["proposals"].create_index(["agent", "status"])
    db["proposals"].create_index(["repo", "created_at"])
    db["restore_points"].create({
        "id": str, "repo": str, "created_at": float, "head_ref": str, "head": str, "refs": str,
        "index_tree": str, "stash_snapshot": str, "files_commit": str, "files": str, "after": str,
        "pruned": int,
    }, pk="id", not_null={"repo", "created_at"}, defaults={"pruned": 0})
    db["restore_points"].create_index(["repo", "created_at"])


@migrations()
def m007_commit_history(db: Database) -> None:
    """Commit subjects from recent history (fleet search): the last 90 days of every local and
    remote-tracking branch, one row per (repo, commit), with a trigram FTS5 index kept in step by the code
    that writes the rows (fleet.index.history). `history_state` says what each repo's rows reflect."""
    db["commits"].create({"id": int, "repo_id": int, "sha": str, "at": int, "author": str, "subject": str},
                         pk="id", not_null={"repo_id", "sha", "at"})
    db["commits"].create_index(["repo_id", "sha"], unique=True)
    db["commits"].create_index(["at"])
    db.execute("CREATE VIRTUAL TABLE commit_search USING fts5(subject, content='commits', content_rowid='id', "
               "tokenize='trigram')")
    db["history_state"].create({"repo_id": int, "signature": str, "indexed_at": int, "capped": int},
                               pk="repo_id")


@migrations()
def m008_instance(db: Database) -> None:
    """A random id for this index file, so an in-memory cache of it (fleet/views/ranking.py) can tell a
    replaced file at the same path from the one it read, whatever inode and counters the new file has."""
    import secrets

    db.execute("insert or replace into meta (key, value) values ('instance', ?)", [f'"{secrets.token_hex(8)}"'])


# The columns of `events` as readers see them (the view m009 puts over `event_rows` keeps this order).
_EVENT_COLUMNS = ("id", "repo_id", "ref", "kind", "old_sha", "new_sha", "at", "identity", "message", "rewrote",
                  "reflog_id")
_EVENT_COPIES = ("old_sha", "new_sha", "identity", "message")


@migrations()
def m009_lean_history(db: Database) -> None:
    """Cheaper history storage: a cold scan appends 100,000s of reflog lines and turns most into events.

    - `reflog` loses its unique index over (repo, ref, shas, time, message): the ingest drops lines it already
      holds itself, under the write lock (fleet.index.store), so the text index only cost inserts; the `at`
      index goes too (only `prune-events` scans by time alone). The rows, their ids and the search index stay.
    - an event of a reflog line no longer copies the line: `event_rows` keeps what events are filtered and
      ordered by (repo, ref, kind, time, rewrote) and the line's id; the shas, identity and message are kept
      only by events without a line (a deleted branch). `events` becomes a view with the old columns, so
      every reader (and a writer, through its triggers) sees the table it saw before.
    """
    db.execute("DROP INDEX reflog_unique")
    db.execute("DROP INDEX idx_reflog_at")
    db.execute("CREATE TABLE event_rows (id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, ref TEXT NOT NULL,"
               " kind TEXT NOT NULL, at INTEGER NOT NULL, rewrote INTEGER, reflog_id INTEGER, old_sha TEXT,"
               " new_sha TEXT, identity TEXT, message TEXT)")
    kept = ", ".join(f"CASE WHEN r.id IS NULL THEN e.{c} END" for c in _EVENT_COPIES)
    db.execute("INSERT INTO event_rows (id, repo_id, ref, kind, at, rewrote, reflog_id, old_sha, new_sha,"
               f" identity, message) SELECT e.id, e.repo_id, e.ref, e.kind, e.at, e.rewrote, e.reflog_id, {kept}"
               " FROM events e LEFT JOIN reflog r ON r.id = e.reflog_id")
    db.execute("DROP TABLE events")
    db.execute("CREATE INDEX event_rows_at ON event_rows (at)")
    db.execute("CREATE INDEX event_rows_repo_at ON event_rows (repo_id, at)")
    _events_view(db.conn)


def _events_view(conn: sqlite3.Connection) -> None:
    """`events`, the view readers see over `event_rows`, with the triggers that let it be written."""
    columns = ", ".join(f"CASE WHEN r.id IS NULL THEN e.{c} ELSE r.{c} END AS {c}" if c in _EVENT_COPIES
                        else f"e.{c} AS {c}" for c in _EVENT_COLUMNS)
    conn.execute(f"CREATE VIEW events AS SELECT {columns} FROM event_rows e LEFT JOIN reflog r ON r.id = e.reflog_id")
    names = ", ".join(_EVENT_COLUMNS)
    conn.execute(f"CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN INSERT INTO event_rows ({names})"
                 f" VALUES ({', '.join('new.' + c for c in _EVENT_COLUMNS)}); END")
    conn.execute("CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN"
                 " DELETE FROM event_rows WHERE id = old.id; END")


@migrations()
def m010_watch_marks(db: Database) -> None:
    """Each repo's watch mark (fleet.git.mark), taken just before the read its stored record came from:
    the start-up re-check of a repo whose mark has not moved reads only its working trees again. A repo
    without one (stored by an older fleetdeck) is read in full, which stores it."""
    db["repo_marks"].create({"repo_id": int, "mark": bytes}, pk="repo_id")


@migrations()
def m011_proposal_undone(db: Database) -> None:
    """A proposal a later `restore` undid is `undone`: which proposal undid it, and when (unix seconds)."""
    db["proposals"].add_column("undone_by", str)
    db["proposals"].add_column("undone_at", float)


@migrations()
def m012_agent_identity(db: Database) -> None:
    """Authenticated agent identity (fleet/agents): the agents' credentials (a SHA-256 of each secret, never
    the secret), and on each proposal the client's declared name, whether it was authenticated, the MCP
    session that made it (cancel rights of unauthenticated clients) and `identity`, the key the pending quota
    counts under (the agent's name, or `unknown` for every unauthenticated client). Proposals made before
    credentials existed were self-declared: they become unauthenticated."""
    db["agents"].create({"name": str, "token_hash": str, "created_at": float, "last_used_at": float},
                        pk="name", not_null={"token_hash", "created_at"})
    db["agents"].create_index(["token_hash"], unique=True)
    table = db["proposals"]
    table.add_column("agent_declared", str)
    table.add_column("agent_authenticated", int, not_null_default=0)
    table.add_column("agent_session", str)
    table.add_column("identity", str)
    db.execute("UPDATE proposals SET agent_declared = agent, agent_authenticated = (agent = 'person'), "
               "identity = CASE WHEN agent = 'person' THEN agent ELSE 'unknown' END")
    table.create_index(["identity", "status"])


@migrations()
def m013_presence_sessions(db: Database) -> None:
    """Presence rows per (agent, repo, session), with the waiting state the agents' own hooks report
    (`presence_hooks`: one record per hook session, kept across refreshes, fleet/presence/hooks.py)."""
    table = db["presence"]
    table.add_column("session", str, not_null_default="")
    table.add_column("waiting_since", str)
    table.add_column("waiting_kind", str)
    table.transform(pk=("agent", "repo", "session"))
    db["presence_hooks"].create({
        "agent": str, "repo": str, "session": str, "state": str, "waiting_kind": str, "waiting_since": float,
        "left_waiting_at": float, "tool": str, "at": float,
    }, pk=("agent", "repo", "session"), not_null={"agent", "repo", "session", "state", "at"})


@migrations()
def m014_team_outbox(db: Database) -> None:
    """Team mode's outbox (fleet/index/outbox.py): how far each kind of row has reached the hub — a cursor
    (the repos' change counter, the event id, the audit seq) or, for sets replaced whole (presence,
    proposals, lost commits), a digest per row the hub holds. Advanced only after the hub committed."""
    db["team_cursors"].create({"kind": str, "value": int}, pk="kind", not_null={"value"})
    db["team_sent"].create({"kind": str, "key": str, "digest": str}, pk=("kind", "key"), not_null={"digest"})


@migrations()
def m015_event_ids_never_reused(db: Database) -> None:
    """Event ids are never given twice (AUTOINCREMENT). A plain rowid table hands out max(id) + 1, so once
    `prune-events` deleted the newest events (an idle fleet past its retention) new events took ids a
    reader had already passed: team mode's outbox (fleet/index/outbox.py) sends events after the last id
    the hub holds, and never sent them. The table is rebuilt with its rows, indexes, view and triggers, and
    the sequence starts past the highest id the outbox has sent too, so ids already reused stop here."""
    conn = db.conn
    columns = ", ".join(_EVENT_COLUMNS)
    conn.execute("DROP VIEW events")  # its INSTEAD OF triggers go with it
    conn.execute("CREATE TABLE event_rows_new (id INTEGER PRIMARY KEY AUTOINCREMENT, repo_id INTEGER NOT NULL,"
                 " ref TEXT NOT NULL, kind TEXT NOT NULL, at INTEGER NOT NULL, rewrote INTEGER, reflog_id INTEGER,"
                 " old_sha TEXT, new_sha TEXT, identity TEXT, message TEXT)")
    conn.execute(f"INSERT INTO event_rows_new ({columns}) SELECT {columns} FROM event_rows")
    conn.execute("DROP TABLE event_rows")
    conn.execute("ALTER TABLE event_rows_new RENAME TO event_rows")
    conn.execute("CREATE INDEX event_rows_at ON event_rows (at)")
    conn.execute("CREATE INDEX event_rows_repo_at ON event_rows (repo_id, at)")
    _events_view(conn)
    sent = conn.execute("SELECT value FROM team_cursors WHERE kind = 'events'").fetchone()
    floor = max(sent[0] if sent else 0, conn.execute("SELECT ifnull(max(id), 0) FROM event_rows").fetchone()[0])
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'event_rows'")
    conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('event_rows', ?)", (floor,))
