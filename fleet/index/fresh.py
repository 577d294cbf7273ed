"""A new index made in one step: the schema its migrations leave, without running them.

Making a new index through every migration (fleet/index/schema.py) costs ~0.15 s: importing sqlite-utils
(~0.11 s) and the migrations themselves. That time comes before anything else can start: a cold `serve`
forks its readers, and a cold `scan` reads, only once the index exists. So an empty index file is given
the migrations' end state directly (`create`): `STATEMENTS`, what sqlite_master holds after them (FTS5's own
tables left to its virtual tables), the migrations recorded as applied in sqlite-utils' table, the rows
they leave (`SEQUENCES`) and the one a migration writes per file (m008's random instance id).
tests/test_index_fresh.py builds an index through the migrations and requires the same schema, records and
rows; when the migrations move past `VERSION` the index is migrated as before (and that test says to make
these again: `python -m fleet.index.fresh /path/to/migrated.db` prints them).
"""

from __future__ import annotations

import datetime
import secrets
import sqlite3
import sys

VERSION = 15  # the migrations these statements stand for (fleet.index.store.SCHEMA_VERSION)
MIGRATION_SET = "fleetdeck"
MIGRATIONS = ('m001_core', 'm002_presence', 'm003_events', 'm004_reflog_search', 'm005_presence_mcp_sessions', 'm006_proposals', 'm007_commit_history', 'm008_instance', 'm009_lean_history', 'm010_watch_marks', 'm011_proposal_undone', 'm012_agent_identity', 'm013_presence_sessions', 'm014_team_outbox', 'm015_event_ids_never_reused')
SEQUENCES = (('event_rows', 0),)
STATEMENTS = (
    'CREATE TABLE "_sqlite_migrations" (\n   "id" INTEGER PRIMARY KEY,\n   "migration_set" TEXT,\n   "name" TEXT,\n   "applied_at" TEXT\n)',
    'CREATE UNIQUE INDEX "idx__sqlite_migrations_migration_set_name"\n    ON "_sqlite_migrations" ("migration_set", "name")',
    'CREATE TABLE "roots" (\n   "id" INTEGER PRIMARY KEY,\n   "path" TEXT NOT NULL,\n   "added_at" TEXT\n)',
    'CREATE UNIQUE INDEX "idx_roots_path"\n    ON "roots" ("path")',
    'CREATE TABLE "repos" (\n   "id" INTEGER PRIMARY KEY,\n   "path" TEXT NOT NULL,\n   "root" TEXT,\n   "name" TEXT,\n   "bare" INTEGER DEFAULT 0,\n   "gitdir" TEXT,\n   "branch" TEXT,\n   "detached" INTEGER,\n   "head" TEXT,\n   "head_ref" TEXT,\n   "upstream" TEXT,\n   "upstream_gone" INTEGER,\n   "ahead" INTEGER,\n   "behind" INTEGER,\n   "staged" INTEGER,\n   "unstaged" INTEGER,\n   "untracked" INTEGER,\n   "conflicted" INTEGER,\n   "stashes" INTEGER,\n   "operation" TEXT,\n   "operation_detail" TEXT,\n   "predicted_conflicts" TEXT,\n   "last_activity" TEXT,\n   "scanned_at" TEXT,\n   "first_seen" TEXT,\n   "error" TEXT,\n   "gone" INTEGER DEFAULT 0,\n   "gone_at" TEXT,\n   "score" INTEGER DEFAULT 0,\n   "reasons" TEXT,\n   "generation" INTEGER DEFAULT 0\n)',
    'CREATE UNIQUE INDEX "idx_repos_path"\n    ON "repos" ("path")',
    'CREATE INDEX "idx_repos_gone_score"\n    ON "repos" ("gone", "score")',
    'CREATE INDEX "idx_repos_generation"\n    ON "repos" ("generation")',
    'CREATE TABLE "branches" (\n   "repo_id" INTEGER,\n   "name" TEXT,\n   "head" TEXT,\n   "upstream" TEXT,\n   "upstream_ref" TEXT,\n   "upstream_gone" INTEGER,\n   "ahead" INTEGER,\n   "behind" INTEGER,\n   "current" INTEGER,\n   PRIMARY KEY ("repo_id", "name")\n)',
    'CREATE TABLE "worktrees" (\n   "repo_id" INTEGER,\n   "path" TEXT,\n   "id" TEXT,\n   "branch" TEXT,\n   "head" TEXT,\n   "detached" INTEGER,\n   "locked" INTEGER,\n   "lock_reason" TEXT,\n   "prunable" INTEGER,\n   "prunable_reason" TEXT,\n   "staged" INTEGER,\n   "unstaged" INTEGER,\n   "untracked" INTEGER,\n   "conflicted" INTEGER,\n   "operation" TEXT,\n   "error" TEXT,\n   PRIMARY KEY ("repo_id", "path")\n)',
    'CREATE TABLE "submodules" (\n   "repo_id" INTEGER,\n   "path" TEXT,\n   "name" TEXT,\n   "url" TEXT,\n   "recorded" TEXT,\n   "checked_out" TEXT,\n   "state" TEXT,\n   "error" TEXT,\n   PRIMARY KEY ("repo_id", "path")\n)',
    'CREATE TABLE "stashes" (\n   "repo_id" INTEGER,\n   "idx" INTEGER,\n   "sha" TEXT,\n   "message" TEXT,\n   "at" TEXT,\n   PRIMARY KEY ("repo_id", "idx")\n)',
    'CREATE TABLE "remotes" (\n   "repo_id" INTEGER,\n   "name" TEXT,\n   "url" TEXT,\n   PRIMARY KEY ("repo_id", "name")\n)',
    'CREATE TABLE "reflog" (\n   "id" INTEGER PRIMARY KEY,\n   "repo_id" INTEGER,\n   "ref" TEXT,\n   "old_sha" TEXT,\n   "new_sha" TEXT,\n   "at" INTEGER,\n   "tz" TEXT,\n   "identity" TEXT,\n   "message" TEXT,\n   "kind" TEXT\n)',
    'CREATE INDEX "idx_reflog_repo_id_at"\n    ON "reflog" ("repo_id", "at")',
    'CREATE TABLE "reflog_files" (\n   "repo_id" INTEGER,\n   "ref" TEXT,\n   "inode" INTEGER,\n   "size" INTEGER,\n   PRIMARY KEY ("repo_id", "ref")\n)',
    'CREATE TABLE "meta" (\n   "key" TEXT PRIMARY KEY,\n   "value" TEXT\n)',
    'CREATE TABLE "event_cursor" (\n   "repo_id" INTEGER PRIMARY KEY,\n   "reflog_id" INTEGER\n)',
    "CREATE VIRTUAL TABLE reflog_search USING fts5(message, content='reflog', content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER reflog_search_ad AFTER DELETE ON reflog WHEN old.id <= ifnull((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'reflog_search_upto'), 0) BEGIN INSERT INTO reflog_search (reflog_search, rowid, message) VALUES ('delete', old.id, old.message); END",
    'CREATE TABLE "presence_mcp" (\n   "agent" TEXT NOT NULL,\n   "repo" TEXT NOT NULL,\n   "tool" TEXT,\n   "files" TEXT,\n   "at" REAL NOT NULL,\n   "session" TEXT NOT NULL DEFAULT \'\',\n   "client_version" TEXT,\n   "client_pid" INTEGER,\n   PRIMARY KEY ("agent", "repo", "session")\n)',
    'CREATE TABLE "proposals" (\n   "id" TEXT PRIMARY KEY,\n   "op" TEXT NOT NULL,\n   "repo" TEXT NOT NULL,\n   "agent" TEXT NOT NULL,\n   "reason" TEXT NOT NULL,\n   "args" TEXT,\n   "args_fingerprint" TEXT,\n   "idempotency_key" TEXT,\n   "preview" TEXT,\n   "risk" TEXT,\n   "status" TEXT NOT NULL,\n   "policy" TEXT,\n   "created_at" REAL NOT NULL,\n   "expires_at" REAL NOT NULL,\n   "decided_at" REAL,\n   "decided_by" TEXT,\n   "decision_reason" TEXT,\n   "started_at" REAL,\n   "finished_at" REAL,\n   "result" TEXT,\n   "error" TEXT,\n   "restore_point" TEXT,\n   "worker_pid" INTEGER,\n   "worker_start" TEXT\n, "undone_by" TEXT, "undone_at" REAL, "agent_declared" TEXT, "agent_authenticated" INTEGER NOT NULL DEFAULT 0, "agent_session" TEXT, "identity" TEXT)',
    'CREATE UNIQUE INDEX proposals_idempotency ON proposals (agent, op, idempotency_key) WHERE idempotency_key IS NOT NULL',
    'CREATE INDEX "idx_proposals_status_expires_at"\n    ON "proposals" ("status", "expires_at")',
    'CREATE INDEX "idx_proposals_agent_status"\n    ON "proposals" ("agent", "status")',
    'CREATE INDEX "idx_proposals_repo_created_at"\n    ON "proposals" ("repo", "created_at")',
    'CREATE TABLE "restore_points" (\n   "id" TEXT PRIMARY KEY,\n   "repo" TEXT NOT NULL,\n   "created_at" REAL NOT NULL,\n   "head_ref" TEXT,\n   "head" TEXT,\n   "refs" TEXT,\n   "index_tree" TEXT,\n   "stash_snapshot" TEXT,\n   "files_commit" TEXT,\n   "files" TEXT,\n   "after" TEXT,\n   "pruned" INTEGER DEFAULT 0\n)',
    'CREATE INDEX "idx_restore_points_repo_created_at"\n    ON "restore_points" ("repo", "created_at")',
    'CREATE TABLE "commits" (\n   "id" INTEGER PRIMARY KEY,\n   "repo_id" INTEGER NOT NULL,\n   "sha" TEXT NOT NULL,\n   "at" INTEGER NOT NULL,\n   "author" TEXT,\n   "subject" TEXT\n)',
    'CREATE UNIQUE INDEX "idx_commits_repo_id_sha"\n    ON "commits" ("repo_id", "sha")',
    'CREATE INDEX "idx_commits_at"\n    ON "commits" ("at")',
    "CREATE VIRTUAL TABLE commit_search USING fts5(subject, content='commits', content_rowid='id', tokenize='trigram')",
    'CREATE TABLE "history_state" (\n   "repo_id" INTEGER PRIMARY KEY,\n   "signature" TEXT,\n   "indexed_at" INTEGER,\n   "capped" INTEGER\n)',
    'CREATE TABLE "repo_marks" (\n   "repo_id" INTEGER PRIMARY KEY,\n   "mark" BLOB\n)',
    'CREATE TABLE "agents" (\n   "name" TEXT PRIMARY KEY,\n   "token_hash" TEXT NOT NULL,\n   "created_at" REAL NOT NULL,\n   "last_used_at" REAL\n)',
    'CREATE UNIQUE INDEX "idx_agents_token_hash"\n    ON "agents" ("token_hash")',
    'CREATE INDEX "idx_proposals_identity_status"\n    ON "proposals" ("identity", "status")',
    'CREATE TABLE "presence" (\n   "agent" TEXT NOT NULL,\n   "repo" TEXT NOT NULL,\n   "repo_id" INTEGER,\n   "repo_name" TEXT,\n   "state" TEXT NOT NULL,\n   "sources" TEXT,\n   "branch" TEXT,\n   "tool" TEXT,\n   "files" TEXT,\n   "pid" INTEGER,\n   "pids" TEXT,\n   "last_activity" TEXT,\n   "refreshed_at" TEXT,\n   "session" TEXT NOT NULL DEFAULT \'\',\n   "waiting_since" TEXT,\n   "waiting_kind" TEXT,\n   PRIMARY KEY ("agent", "repo", "session")\n)',
    'CREATE TABLE "presence_hooks" (\n   "agent" TEXT NOT NULL,\n   "repo" TEXT NOT NULL,\n   "session" TEXT NOT NULL,\n   "state" TEXT NOT NULL,\n   "waiting_kind" TEXT,\n   "waiting_since" REAL,\n   "left_waiting_at" REAL,\n   "tool" TEXT,\n   "at" REAL NOT NULL,\n   PRIMARY KEY ("agent", "repo", "session")\n)',
    'CREATE TABLE "team_cursors" (\n   "kind" TEXT PRIMARY KEY,\n   "value" INTEGER NOT NULL\n)',
    'CREATE TABLE "team_sent" (\n   "kind" TEXT,\n   "key" TEXT,\n   "digest" TEXT NOT NULL,\n   PRIMARY KEY ("kind", "key")\n)',
    'CREATE TABLE "event_rows" (id INTEGER PRIMARY KEY AUTOINCREMENT, repo_id INTEGER NOT NULL, ref TEXT NOT NULL, kind TEXT NOT NULL, at INTEGER NOT NULL, rewrote INTEGER, reflog_id INTEGER, old_sha TEXT, new_sha TEXT, identity TEXT, message TEXT)',
    'CREATE INDEX event_rows_at ON event_rows (at)',
    'CREATE INDEX event_rows_repo_at ON event_rows (repo_id, at)',
    'CREATE VIEW events AS SELECT e.id AS id, e.repo_id AS repo_id, e.ref AS ref, e.kind AS kind, CASE WHEN r.id IS NULL THEN e.old_sha ELSE r.old_sha END AS old_sha, CASE WHEN r.id IS NULL THEN e.new_sha ELSE r.new_sha END AS new_sha, e.at AS at, CASE WHEN r.id IS NULL THEN e.identity ELSE r.identity END AS identity, CASE WHEN r.id IS NULL THEN e.message ELSE r.message END AS message, e.rewrote AS rewrote, e.reflog_id AS reflog_id FROM event_rows e LEFT JOIN reflog r ON r.id = e.reflog_id',
    'CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN INSERT INTO event_rows (id, repo_id, ref, kind, old_sha, new_sha, at, identity, message, rewrote, reflog_id) VALUES (new.id, new.repo_id, new.ref, new.kind, new.old_sha, new.new_sha, new.at, new.identity, new.message, new.rewrote, new.reflog_id); END',
    'CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN DELETE FROM event_rows WHERE id = old.id; END',
)


def create(conn: sqlite3.Connection) -> bool:
    """Give `conn`'s index file, when it holds nothing yet, the schema at VERSION in one transaction (the
    caller holds the migration lock); False when it is not empty (the migrations take it from there)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("select count(*) from sqlite_master").fetchone()[0]:
            conn.execute("ROLLBACK")
            return False
        for sql in STATEMENTS:
            conn.execute(sql)
        now = datetime.datetime.now(datetime.timezone.utc)
        conn.executemany("insert into _sqlite_migrations (migration_set, name, applied_at) values (?, ?, ?)",
                         [(MIGRATION_SET, name, str(now)) for name in MIGRATIONS])
        conn.executemany("insert into sqlite_sequence (name, seq) values (?, ?)", SEQUENCES)
        conn.execute("insert into meta (key, value) values ('instance', ?)", (f'"{secrets.token_hex(8)}"',))
        conn.execute(f"PRAGMA user_version = {VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def schema_of(conn: sqlite3.Connection) -> tuple[list[str], list[str], list[tuple]]:
    """(STATEMENTS, MIGRATIONS, SEQUENCES) as an index made through the migrations holds them."""
    rows = conn.execute("select type, name, sql from sqlite_master order by rowid").fetchall()
    virtual = [name for _type, name, sql in rows if sql and sql.upper().startswith("CREATE VIRTUAL TABLE")]
    statements = [sql for kind, name, sql in rows if sql and not name.startswith("sqlite_")
                  and not (kind == "table" and any(name.startswith(v + "_") for v in virtual))]
    names = [r[0] for r in conn.execute("select name from _sqlite_migrations where migration_set = ? order by id",
                                        (MIGRATION_SET,))]
    return statements, names, conn.execute("select name, seq from sqlite_sequence order by name").fetchall()


if __name__ == "__main__":  # print the constants again from an index the migrations made
    statements, names, sequences = schema_of(sqlite3.connect(sys.argv[1]))
    print(f"MIGRATIONS = {tuple(names)!r}\nSEQUENCES = {tuple(sequences)!r}\nSTATEMENTS = (")
    print("".join(f"    {sql!r},\n" for sql in statements) + ")")
