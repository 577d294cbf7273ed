"""Connections to the hub: psycopg imported on first use, DSNs that never leak a password, TLS by default.

Every failure to reach the hub becomes one FleetError line naming the host and the reason (HUB_UNREACHABLE),
never a traceback and never the password, whatever psycopg's message held.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import quote

from fleet.errors import FleetError

CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_MS = 30_000
TCP_USER_TIMEOUT_MS = 15_000   # a hub that stops acknowledging what we send is given up on after this
INSTALL_HINT = "team mode needs psycopg: pip install 'fleetdeck[team]'"


def psycopg() -> Any:
    """The psycopg module, or the install hint as a FleetError."""
    try:
        import psycopg as module
    except ImportError:
        raise FleetError("UNAVAILABLE", INSTALL_HINT) from None
    return module


def parts(dsn: str) -> dict[str, str]:
    """The keywords of a `postgresql://` URL or a `key=value` DSN (psycopg's own parser)."""
    conninfo = psycopg().conninfo
    try:
        return dict(conninfo.conninfo_to_dict(dsn))
    except Exception as exc:  # psycopg.ProgrammingError: a malformed DSN; its message may quote the DSN
        raise FleetError("BAD_ARGUMENT", f"not a PostgreSQL connection string: {type(exc).__name__}") from None


def make_dsn(**kw: Any) -> str:
    return psycopg().conninfo.make_conninfo(**{k: v for k, v in kw.items() if v not in (None, "")})


def hub_label(dsn: str) -> str:
    """`host:port/dbname` — what messages, `team status` and logs say about a hub (never user or password)."""
    p = parts(dsn)
    host = p.get("host") or "localhost"
    return f"{host}:{p.get('port') or 5432}/{p.get('dbname') or p.get('user') or 'postgres'}"


def is_loopback(host: str) -> bool:
    """A Unix socket folder, `localhost` or a loopback address: where TLS adds nothing."""
    if not host or host.startswith("/") or host == "localhost":
        return True
    try:
        return all(ipaddress.ip_address(h).is_loopback for h in host.split(","))
    except ValueError:
        return False


def secured(dsn: str) -> str:
    """The DSN with `sslmode=verify-full` unless it names a mode or the hub is on this machine."""
    p = parts(dsn)
    if "sslmode" not in p and not is_loopback(p.get("host", "")):
        p["sslmode"] = "verify-full"
    return make_dsn(**p)


def without_password(dsn: str) -> tuple[str, str | None]:
    """(the DSN with no password, the password) — the settings file keeps the first, a 0600 file the second."""
    p = parts(dsn)
    password = p.pop("password", None)
    return make_dsn(**p), password


def connect(dsn: str, password: str | None = None, *, autocommit: bool = False,
            timeout: float = CONNECT_TIMEOUT_S, read_only: bool = False) -> Any:
    """A connection with a connect timeout and a statement timeout, or HUB_UNREACHABLE naming the host.
    `read_only`: every transaction of the session is read-only (the hub dashboard's: whatever role the DSN
    names, nothing it runs can write), without JIT compilation (a page's statements run in milliseconds: compiling
    them costs more than it saves)."""
    pg = psycopg()
    extra = {"password": password} if password else {}
    options = f"-c statement_timeout={STATEMENT_TIMEOUT_MS}" + (" -c default_transaction_read_only=on -c jit=off"
                                                                 if read_only else "")
    try:
        conn = pg.connect(secured(dsn), connect_timeout=max(1, int(timeout)), autocommit=autocommit,
                          options=options, application_name="fleetdeck",
                          keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=3,
                          tcp_user_timeout=TCP_USER_TIMEOUT_MS, **extra)
    except pg.Error as exc:
        raise unreachable(dsn, exc, password) from None
    return conn


def unreachable(dsn: str, exc: BaseException, password: str | None = None) -> FleetError:
    """One line: the hub and psycopg's first line of reason, with any password scrubbed out of it. A lost
    or refused connection is HUB_UNREACHABLE; the hub refusing a statement (a permission, a schema it lacks)
    is HUB_REFUSED."""
    reason = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                   dsn, password)
    if isinstance(exc, psycopg().OperationalError):
        return FleetError("HUB_UNREACHABLE", f"cannot reach the hub at {hub_label(dsn)}: {reason}")
    return FleetError("HUB_REFUSED", f"the hub at {hub_label(dsn)} refused: {reason}")


def scrub(text: str, dsn: str = "", password: str | None = None) -> str:
    """`text` without the password (given, or in `dsn`) and without any `password=`/URL credential in it."""
    secrets = {password, parts(dsn).get("password") if dsn else None} - {None, ""}
    for secret in secrets:
        text = text.replace(secret, "***").replace(quote(secret, safe=""), "***")
    text = re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", text, flags=re.I)
    return re.sub(r"(postgres(?:ql)?://[^:/@\s]+:)[^@\s]+@", r"\1***@", text)
