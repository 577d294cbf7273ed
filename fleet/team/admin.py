"""What the hub's admin runs: `team init` (the schema and roles) and `team enroll` (a machine's login)."""

from __future__ import annotations

from typing import Any

from fleet.team import hubschema, pg
from fleet.team.push import hub_connection


def init(admin_dsn: str) -> list[str]:
    """Create or upgrade the hub's schema; the migrations applied (none when it was up to date)."""
    conn = pg.connect(admin_dsn)
    try:
        return hubschema.migrate(conn)
    except pg.psycopg().Error as exc:
        raise pg.unreachable(admin_dsn, exc) from None
    finally:
        conn.close()


def enroll(admin_dsn: str, name: str) -> dict[str, Any]:
    """Machine `name`'s role and its one-time DSN (the admin DSN's server and database, the machine's login)."""
    conn = pg.connect(admin_dsn)
    try:
        hubschema.migrate(conn)
        role, password = hubschema.enroll(conn, name)
    except pg.psycopg().Error as exc:
        raise pg.unreachable(admin_dsn, exc) from None
    finally:
        conn.close()
    p = pg.parts(admin_dsn)
    p.pop("password", None)
    p.update(user=role, password=password)
    return {"machine": name, "role": role, "dsn": pg.make_dsn(**p), "hub": pg.hub_label(admin_dsn)}


def join_check(dsn: str, password: str | None, machine: str) -> None:
    """That `dsn` logs in to a hub as enrolled machine `machine` (FleetError otherwise)."""
    hub_connection(dsn, machine, password).close()
