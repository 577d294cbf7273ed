"""What the hub's admin runs: `team init` (the schema and roles), `team enroll` (a machine's login) and
`team viewer` (a person's login for the hub's dashboard)."""

from __future__ import annotations

from typing import Any, Callable

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
    role, dsn = _login(admin_dsn, hubschema.enroll, name)
    return {"machine": name, "role": role, "dsn": dsn, "hub": pg.hub_label(admin_dsn)}


def viewer(admin_dsn: str, name: str) -> dict[str, Any]:
    """A dashboard login `name` (member of `fleetdeck_hub` only) and its one-time DSN."""
    role, dsn = _login(admin_dsn, hubschema.add_viewer, name)
    return {"viewer": name, "role": role, "dsn": dsn, "hub": pg.hub_label(admin_dsn)}


def _login(admin_dsn: str, make: Callable[[Any, str], tuple[str, str]], name: str) -> tuple[str, str]:
    """(role, its one-time DSN: the admin DSN's server and database with the new login) of a role `make`
    creates on the migrated hub."""
    conn = pg.connect(admin_dsn)
    try:
        hubschema.migrate(conn)
        role, password = make(conn, name)
    except pg.psycopg().Error as exc:
        raise pg.unreachable(admin_dsn, exc) from None
    finally:
        conn.close()
    p = pg.parts(admin_dsn)
    p.pop("password", None)
    p.update(user=role, password=password)
    return role, pg.make_dsn(**p)


def join_check(dsn: str, password: str | None, machine: str) -> None:
    """That `dsn` logs in to a hub as enrolled machine `machine` (FleetError otherwise)."""
    hub_connection(dsn, machine, password).close()
