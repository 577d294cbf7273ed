"""The hub's schema, roles and row-level security, as ordered migrations (never edit one that shipped).

One schema, `fleetdeck`. Every table a machine writes carries `machine_id` (the machine's name) and a
primary key of `(machine_id, the local natural key)`. Three kinds of role:
- the admin (whoever runs `team init` / `team enroll`) owns the tables;
- `fleetdeck_hub` (NOLOGIN; grant it to the dashboards' login roles) reads everything and writes decisions;
- one LOGIN role per enrolled machine, member of `fleetdeck_machines`, which row-level security lets insert,
  update and delete only rows whose `machine_id` is its own (`fleetdeck.current_machine()`, from the
  session's user), and read only its own rows and the decisions addressed to it.
Decisions made on the hub (`decisions`) are written by the hub role and settled (applied or refused) only by
the machine they are addressed to, which alone can act on them. Audit entries are append-only on the hub whoever asks (a trigger refuses UPDATE and DELETE; only the admin
may prune, by disabling it explicitly).
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from fleet.errors import FleetError

HUB_ROLE = "fleetdeck_hub"
MACHINES_ROLE = "fleetdeck_machines"
MACHINE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")

# Tables each machine writes (its rows only), with their natural keys after machine_id.
MACHINE_TABLES: dict[str, tuple[str, ...]] = {
    "repos": ("repo_id",), "branches": ("repo_id", "name"), "worktrees": ("repo_id", "path"),
    "submodules": ("repo_id", "path"), "events": ("id",), "lost": ("repo_id", "sha"),
    "presence": ("agent", "repo", "session"), "proposals": ("id",), "audit": ("chain", "seq"),
}

_M1 = f"""
CREATE SCHEMA IF NOT EXISTS fleetdeck;
CREATE TABLE fleetdeck.machines (
    name text PRIMARY KEY, role text UNIQUE NOT NULL, enrolled_at timestamptz NOT NULL DEFAULT now(),
    last_push_at timestamptz, share text, left_at timestamptz);
CREATE FUNCTION fleetdeck.current_machine() RETURNS text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT name FROM fleetdeck.machines WHERE role = session_user $$;
CREATE FUNCTION fleetdeck.pushed(share_mode text) RETURNS void LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ UPDATE fleetdeck.machines SET last_push_at = now(), share = share_mode, left_at = NULL
          WHERE role = session_user; SELECT pg_notify('fleetdeck', fleetdeck.current_machine()) $$;
CREATE TABLE fleetdeck.repos (
    machine_id text NOT NULL REFERENCES fleetdeck.machines(name), repo_id bigint NOT NULL,
    name text NOT NULL, path text, generation bigint NOT NULL, score integer NOT NULL DEFAULT 0,
    gone boolean NOT NULL DEFAULT false, record jsonb NOT NULL, pushed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (machine_id, repo_id));
CREATE INDEX repos_queue ON fleetdeck.repos (gone, score DESC);
CREATE TABLE fleetdeck.branches (machine_id text NOT NULL, repo_id bigint NOT NULL, name text NOT NULL,
    row jsonb NOT NULL, PRIMARY KEY (machine_id, repo_id, name),
    FOREIGN KEY (machine_id, repo_id) REFERENCES fleetdeck.repos ON DELETE CASCADE);
CREATE TABLE fleetdeck.worktrees (machine_id text NOT NULL, repo_id bigint NOT NULL, path text NOT NULL,
    row jsonb NOT NULL, PRIMARY KEY (machine_id, repo_id, path),
    FOREIGN KEY (machine_id, repo_id) REFERENCES fleetdeck.repos ON DELETE CASCADE);
CREATE TABLE fleetdeck.submodules (machine_id text NOT NULL, repo_id bigint NOT NULL, path text NOT NULL,
    row jsonb NOT NULL, PRIMARY KEY (machine_id, repo_id, path),
    FOREIGN KEY (machine_id, repo_id) REFERENCES fleetdeck.repos ON DELETE CASCADE);
CREATE TABLE fleetdeck.events (machine_id text NOT NULL REFERENCES fleetdeck.machines(name), id bigint NOT NULL,
    repo_id bigint NOT NULL, ref text NOT NULL, kind text NOT NULL, at bigint NOT NULL, row jsonb NOT NULL,
    PRIMARY KEY (machine_id, id));
CREATE INDEX events_at ON fleetdeck.events (at);
CREATE INDEX events_repo_at ON fleetdeck.events (machine_id, repo_id, at);
CREATE TABLE fleetdeck.lost (machine_id text NOT NULL REFERENCES fleetdeck.machines(name), repo_id bigint NOT NULL,
    sha text NOT NULL, dropped_at bigint NOT NULL, row jsonb NOT NULL, PRIMARY KEY (machine_id, repo_id, sha));
CREATE TABLE fleetdeck.presence (machine_id text NOT NULL REFERENCES fleetdeck.machines(name),
    agent text NOT NULL, repo text NOT NULL, session text NOT NULL, state text NOT NULL, row jsonb NOT NULL,
    expires_at timestamptz NOT NULL, PRIMARY KEY (machine_id, agent, repo, session));
CREATE INDEX presence_expires ON fleetdeck.presence (expires_at);
CREATE TABLE fleetdeck.proposals (machine_id text NOT NULL REFERENCES fleetdeck.machines(name),
    id text NOT NULL, status text NOT NULL, created_at double precision NOT NULL,
    expires_at double precision NOT NULL, row jsonb NOT NULL, PRIMARY KEY (machine_id, id));
CREATE INDEX proposals_status ON fleetdeck.proposals (status, expires_at);
CREATE TABLE fleetdeck.audit (machine_id text NOT NULL REFERENCES fleetdeck.machines(name), seq bigint NOT NULL,
    hash text NOT NULL, entry jsonb NOT NULL, line text, PRIMARY KEY (machine_id, seq));
CREATE FUNCTION fleetdeck.append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'fleetdeck.audit is append-only (% refused)', TG_OP; END $$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON fleetdeck.audit
    FOR EACH ROW EXECUTE FUNCTION fleetdeck.append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON fleetdeck.audit
    FOR EACH STATEMENT EXECUTE FUNCTION fleetdeck.append_only();
"""


def _m2_roles() -> str:
    """Roles, grants and the row-level security policies (idempotent role creation)."""
    sql = [f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{HUB_ROLE}') THEN CREATE ROLE {HUB_ROLE} NOLOGIN; END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{MACHINES_ROLE}') THEN
        CREATE ROLE {MACHINES_ROLE} NOLOGIN; END IF;
END $$;
GRANT USAGE ON SCHEMA fleetdeck TO {HUB_ROLE}, {MACHINES_ROLE};
GRANT SELECT ON ALL TABLES IN SCHEMA fleetdeck TO {HUB_ROLE};
GRANT SELECT ON fleetdeck.machines TO {MACHINES_ROLE};
GRANT EXECUTE ON FUNCTION fleetdeck.current_machine(), fleetdeck.pushed(text) TO {MACHINES_ROLE};
REVOKE EXECUTE ON FUNCTION fleetdeck.pushed(text) FROM PUBLIC;
ALTER TABLE fleetdeck.machines ENABLE ROW LEVEL SECURITY;
CREATE POLICY machines_own ON fleetdeck.machines FOR SELECT TO {MACHINES_ROLE} USING (role = session_user);
CREATE POLICY machines_hub ON fleetdeck.machines FOR SELECT TO {HUB_ROLE} USING (true);
"""]
    for table in MACHINE_TABLES:
        verbs = "SELECT, INSERT" if table == "audit" else "SELECT, INSERT, UPDATE, DELETE"
        sql.append(f"""
GRANT {verbs} ON fleetdeck.{table} TO {MACHINES_ROLE};
ALTER TABLE fleetdeck.{table} ENABLE ROW LEVEL SECURITY;
CREATE POLICY {table}_own ON fleetdeck.{table} TO {MACHINES_ROLE}
    USING (machine_id = fleetdeck.current_machine()) WITH CHECK (machine_id = fleetdeck.current_machine());
CREATE POLICY {table}_hub ON fleetdeck.{table} FOR SELECT TO {HUB_ROLE} USING (true);
""")
    return "".join(sql)


_M3 = f"""
CREATE TABLE fleetdeck.decisions (
    id bigserial PRIMARY KEY, machine_id text NOT NULL REFERENCES fleetdeck.machines(name),
    proposal_id text NOT NULL, action text NOT NULL CHECK (action IN ('approve', 'reject')), reason text,
    approver text NOT NULL, key_id text NOT NULL, payload jsonb NOT NULL, signature text NOT NULL,
    made_at timestamptz NOT NULL DEFAULT now(), outcome text CHECK (outcome IN ('applied', 'refused')),
    outcome_reason text, settled_at timestamptz);
CREATE INDEX decisions_waiting ON fleetdeck.decisions (machine_id, id) WHERE outcome IS NULL;
GRANT SELECT, INSERT ON fleetdeck.decisions TO {HUB_ROLE};
GRANT USAGE ON SEQUENCE fleetdeck.decisions_id_seq TO {HUB_ROLE};
GRANT SELECT ON fleetdeck.decisions TO {MACHINES_ROLE};
GRANT UPDATE (outcome, outcome_reason, settled_at) ON fleetdeck.decisions TO {MACHINES_ROLE};
ALTER TABLE fleetdeck.decisions ENABLE ROW LEVEL SECURITY;
CREATE POLICY decisions_hub ON fleetdeck.decisions TO {HUB_ROLE} USING (true) WITH CHECK (outcome IS NULL);
CREATE POLICY decisions_own ON fleetdeck.decisions TO {MACHINES_ROLE}
    USING (machine_id = fleetdeck.current_machine()) WITH CHECK (machine_id = fleetdeck.current_machine());
"""

# The index file a machine's rows came from (its `instance`, fleet/index/schema.py m008): a machine whose index
# was deleted and rebuilt numbers its repos and events afresh, so the rows of the old file are dropped before
# the new file's first push (fleet/team/push.py), instead of standing in for the new ones under reused keys.
_M4 = f"""
ALTER TABLE fleetdeck.machines ADD COLUMN instance text;
CREATE FUNCTION fleetdeck.adopt_instance(inst text) RETURNS text LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ WITH old AS (SELECT name, instance FROM fleetdeck.machines WHERE role = session_user FOR UPDATE)
          UPDATE fleetdeck.machines m SET instance = inst FROM old WHERE m.name = old.name
          RETURNING old.instance $$;
REVOKE EXECUTE ON FUNCTION fleetdeck.adopt_instance(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fleetdeck.adopt_instance(text) TO {MACHINES_ROLE};
"""

# The hub dashboard's reads (fleet/team/hubread.py): each machine's change counter, its discarded work of the day.
_M5 = """
CREATE INDEX repos_generation ON fleetdeck.repos (machine_id, generation);
CREATE INDEX events_kind_at ON fleetdeck.events (kind, at);
"""

# The digest across machines in one pass (fleet/team/hubpass.py): the fields its set-based queries filter and
# sort on, kept as columns the hub computes from the pushed rows (a push writes the rows only, as before), and
# the indexes that let each machine's newest events, dirty repos, rewrites and unpushed branches be read without
# a scan of the wide rows (the unpushed branches of its live repos: two index-only scans once vacuumed).
_M6 = """
ALTER TABLE fleetdeck.repos
    ADD COLUMN bare boolean GENERATED ALWAYS AS ((record->>'bare')::boolean) STORED,
    ADD COLUMN error text GENERATED ALWAYS AS (record->>'error') STORED,
    ADD COLUMN changes integer GENERATED ALWAYS AS (coalesce((record->>'staged')::int, 0) +
        coalesce((record->>'unstaged')::int, 0) + coalesce((record->>'untracked')::int, 0) +
        coalesce((record->>'conflicted')::int, 0)) STORED;
ALTER TABLE fleetdeck.branches
    ADD COLUMN head text GENERATED ALWAYS AS (row->>'head') STORED,
    ADD COLUMN upstream text GENERATED ALWAYS AS (row->>'upstream') STORED,
    ADD COLUMN ahead integer GENERATED ALWAYS AS ((row->>'ahead')::int) STORED;
ALTER TABLE fleetdeck.events ADD COLUMN rewrote boolean GENERATED ALWAYS AS ((row->>'rewrote')::int = 1) STORED;
CREATE INDEX events_machine_at ON fleetdeck.events (machine_id, at, id);
CREATE INDEX events_rewrote ON fleetdeck.events (machine_id, at) WHERE rewrote;
CREATE INDEX repos_dirty ON fleetdeck.repos (machine_id) WHERE NOT gone AND changes > 0;
CREATE INDEX repos_names ON fleetdeck.repos (machine_id, repo_id) INCLUDE (name, gone, error);
CREATE INDEX repos_live ON fleetdeck.repos (machine_id, repo_id) INCLUDE (name) WHERE NOT gone AND NOT coalesce(bare, true);
CREATE INDEX branches_unpushed ON fleetdeck.branches (machine_id, repo_id) INCLUDE (name, ahead, upstream)
    WHERE ahead > 0 OR (upstream IS NULL AND head IS NOT NULL);
"""

# A machine's audit log recreated (its folder lost or deleted) starts its seqs again at 1: a new chain. The chain's
# identity is part of an entry's key (fleet/team/push.py: the hash of the oldest entry a machine pushed of it; ''
# for the rows pushed before chains were told apart), so a new log lands beside the old one, nothing of it
# overwritten or mistaken for it, and `audit verify --team` checks each chain on its own.
_M7 = """
ALTER TABLE fleetdeck.audit ADD COLUMN chain text NOT NULL DEFAULT '';
ALTER TABLE fleetdeck.audit DROP CONSTRAINT audit_pkey;
ALTER TABLE fleetdeck.audit ADD PRIMARY KEY (machine_id, chain, seq);
"""

# The digest's pass without a scan of every branch joined with its repo (fleet/team/hubpass.py): a machine's unpushed
# branches counted from the branches alone less those of its gone or bare repos (few), its first ones read in the
# digest's order (the few with an upstream or a known `ahead`, then the never pushed ones by their repo's name), and
# its gone or failing repos without a scan of all of them.
_M8 = """
CREATE INDEX repos_live_by_name ON fleetdeck.repos (machine_id, name COLLATE "C", repo_id)
    WHERE NOT gone AND NOT coalesce(bare, true);
CREATE INDEX repos_not_live ON fleetdeck.repos (machine_id, repo_id) WHERE gone OR coalesce(bare, true);
CREATE INDEX repos_odd ON fleetdeck.repos (machine_id, repo_id) INCLUDE (name, gone, error)
    WHERE gone OR error IS NOT NULL;
CREATE INDEX branches_known_ahead ON fleetdeck.branches (machine_id, repo_id) INCLUDE (name, ahead, upstream)
    WHERE (ahead > 0 OR (upstream IS NULL AND head IS NOT NULL)) AND (upstream IS NOT NULL OR ahead IS NOT NULL);
"""

MIGRATIONS: tuple[tuple[str, Any], ...] = (
    ("0001 tables", _M1),
    ("0002 roles and row-level security", _m2_roles()),
    ("0003 decisions made on the hub", _M3),
    ("0004 the index a machine's rows came from", _M4),
    ("0005 the hub dashboard's indexes", _M5),
    ("0006 the digest's one pass over every machine", _M6),
    ("0007 audit chains told apart", _M7),
    ("0008 the digest's pass in order, not sorted whole", _M8),
)

# What a machine's rebuilt index replaces on the hub: every table keyed by the index's own numbering (the
# audit log is not the index's: its chain goes on).
INDEX_TABLES = ("repos", "events", "lost", "presence", "proposals")


def migrate(conn: Any) -> list[str]:
    """Apply the migrations the hub lacks, each in its own transaction; the names applied (none: up to date).
    Safe to run again, and from two admins at once (an advisory lock serializes them)."""
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('fleetdeck.migrate'))")
        conn.execute("CREATE SCHEMA IF NOT EXISTS fleetdeck")
        conn.execute("CREATE TABLE IF NOT EXISTS fleetdeck.migrations (name text PRIMARY KEY, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        done = {row[0] for row in conn.execute("SELECT name FROM fleetdeck.migrations")}
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO fleetdeck.migrations (name) VALUES (%s)", (name,))
            applied.append(name)
    return applied


def machine_role(name: str) -> str:
    return f"fleetdeck_machine_{name.replace('-', '_')}"


def check_machine_name(name: str, what: str = "machine") -> str:
    if not MACHINE_NAME.fullmatch(name):
        raise FleetError("BAD_ARGUMENT", f"{what} name {name!r}: use 1-40 of a-z, 0-9, '-' and '_', "
                                         "starting with a letter or digit")
    return name


def enroll(conn: Any, name: str) -> tuple[str, str]:
    """Create machine `name`'s login role with a fresh password (returned once, stored nowhere on the hub
    but as PostgreSQL's own SCRAM verifier). A name already enrolled is refused (AGENT_EXISTS-like CONFLICT)."""
    check_machine_name(name)
    role = machine_role(name)
    password = secrets.token_urlsafe(24)
    with conn.transaction():
        if conn.execute("SELECT 1 FROM fleetdeck.machines WHERE name = %s", (name,)).fetchone():
            raise FleetError("CONFLICT", f"machine {name} is already enrolled on this hub")
        holder = conn.execute("SELECT name FROM fleetdeck.machines WHERE role = %s", (role,)).fetchone()
        if holder:  # `a-b` and `a_b` are one role: the second would take over the first's login
            raise FleetError("CONFLICT", f"machine {name} would share the login {role} of machine {holder[0]}, "
                                         "enrolled on this hub: choose another name")
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(f'{verb} ROLE "{role}" LOGIN PASSWORD %s'.replace("%s", _verifier(conn, role, password)))
        conn.execute(f'GRANT {MACHINES_ROLE} TO "{role}"')
        conn.execute("INSERT INTO fleetdeck.machines (name, role) VALUES (%s, %s)", (name, role))
    return role, password


def viewer_role(name: str) -> str:
    return f"fleetdeck_viewer_{name.replace('-', '_')}"


def add_viewer(conn: Any, name: str) -> tuple[str, str]:
    """Create a person's login for the hub's dashboard (`serve --team`), with a fresh password returned once
    (the hub keeps PostgreSQL's SCRAM verifier). Its only privilege is membership of `fleetdeck_hub`: it reads
    every machine's rows and may store signed decisions, and writes no machine's rows. A login of that name
    already on the server is refused (CONFLICT): this never takes over or resets someone else's role."""
    check_machine_name(name, "viewer")
    role = viewer_role(name)
    password = secrets.token_urlsafe(24)
    with conn.transaction():
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            raise FleetError("CONFLICT", f"the login {role} already exists on this server: choose another name")
        conn.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD %s'
                     .replace("%s", _verifier(conn, role, password)))
        conn.execute(f'GRANT {HUB_ROLE} TO "{role}"')
    return role, password


def _verifier(conn: Any, role: str, password: str) -> str:
    """The password's SCRAM-SHA-256 verifier as an SQL string literal, computed here by libpq: `ROLE … PASSWORD`
    takes no bind parameter, and a hub that logs DDL (`log_statement`) would log a plain password in clear."""
    from psycopg import sql
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return sql.Literal(verifier.decode("ascii")).as_string(conn)
