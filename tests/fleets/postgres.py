"""A real PostgreSQL server for team mode's tests, started by the tests themselves.

`initdb` + `pg_ctl` from Debian's `postgresql` package (found on PATH or under /usr/lib/postgresql/*/bin), in
a temp folder, as an unprivileged user (root runs it as `nobody`), on a free loopback port, with password
(SCRAM) authentication over TCP so machine roles log in with their own credentials. Missing binaries skip
the test with the reason shown — except under `CI=true`, where they are a failure (.ci/run installs them).
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

ADMIN = "fleetdeck_admin"


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def require_postgres() -> None:
    if pg_bin("initdb") and pg_bin("pg_ctl"):
        return
    message = "PostgreSQL's initdb/pg_ctl are missing: install Debian's postgresql package to run team tests"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: team tests must run)")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One PostgreSQL cluster in a temp folder; `admin_dsn(db)` connects as its superuser. fsync is off (the
    tests kill the server, never the machine) but commits are synchronous, as on a real hub: a commit the
    server acknowledged survives `pg_ctl stop -m immediate`."""

    def __init__(self) -> None:
        require_postgres()
        self.base = Path(tempfile.mkdtemp(prefix="fleetdeck-pg-", dir="/tmp"))
        self.data = self.base / "data"
        self.port = free_port()
        self.password = "admin-" + os.urandom(6).hex()
        self.as_user = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.base, "nobody")
        pwfile = self.base / "pw"
        pwfile.write_text(self.password)
        if self.as_user:
            shutil.chown(pwfile, "nobody")
        self._run(pg_bin("initdb"), "-D", str(self.data), "-U", ADMIN, f"--pwfile={pwfile}",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale")
        pwfile.unlink()
        self.start()

    def _run(self, *argv: str) -> None:
        proc = subprocess.run([*self.as_user, *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def start(self) -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.base / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
                  "-c full_page_writes=off", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def ensure_running(self) -> None:
        """Started again if a test stopped it and failed before starting it (`pg_ctl status` exits 3 then)."""
        status = subprocess.run([*self.as_user, pg_bin("pg_ctl"), "-D", str(self.data), "status"],
                                capture_output=True, text=True, timeout=60)
        if status.returncode == 3:
            self.start()

    def admin_dsn(self, db: str = "postgres") -> str:
        return f"postgresql://{ADMIN}:{self.password}@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str, template: str = "template1") -> str:
        """Database `name`, a copy of `template` (which nobody may be connected to): its admin DSN."""
        import psycopg

        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return self.admin_dsn(name)

    def fresh_database(self, prefix: str, template: str = "template1") -> str:
        """A new database named `prefix` and a number this process never gave (roles made from its name, as
        `team viewer` logins are, are then new on the cluster too), a copy of `template`: its admin DSN."""
        return self.create_database(f"{prefix[:50]}_{next(_NUMBERS)}", template)

    def close(self) -> None:
        try:
            self.stop("immediate")
        except AssertionError:
            pass
        shutil.rmtree(self.base, ignore_errors=True)


_NUMBERS = itertools.count(1)
_SHARED: list[PgServer] = []


def shared_server() -> PgServer:
    """This process's one cluster, started on first use and stopped at its exit (each xdist worker starts its
    own): initdb and a first start cost seconds, a fresh database on it (`fresh_database`) a fraction of one.
    Running when handed out, whatever a test before did to it."""
    if not _SHARED:
        server = PgServer()
        atexit.register(server.close)
        _SHARED.append(server)
    _SHARED[0].ensure_running()
    return _SHARED[0]
