"""The HTTP front door under abuse: a Host header parsed strictly, and a real `fleetdeck serve` (subprocess,
RLIMIT_NOFILE 1024) that keeps answering its person while 1,100 half-open connections (a partial request
line or partial headers, then nothing) try to use up its descriptors, and that closes them by itself."""

from __future__ import annotations

import resource
import socket
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from fleet.index.scan import scan
from fleet.index.store import open_index
from tests.fleets.gitbuild import init_repo
from tests.fleets.serving import Server
from web.app import create_app
from web.conn import MAX_CONNECTIONS, guarded
from web.security import host_name

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuv"
BASE = "http://127.0.0.1:8765"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def guard(empty_index: Path):
    """A client over an index with no repository: the Host check refuses before any repository is read."""
    with TestClient(create_app(empty_index, TOKEN), base_url=BASE, follow_redirects=False) as c:
        yield c


@pytest.mark.parametrize("host", ["127.0.0.1:8765@evil.example", "127.0.0.1@evil.example", "localhost:80:80",
                                  "127.0.0.1:", "127.0.0.1:8x", "127.0.0.1:+80", "[::1]evil", "[::1]:8765x",
                                  "[::1", "::1", "127.0.0.1 8765", "127.0.0.1:8765/evil", "localhost\\@evil",
                                  ""])
def test_a_host_that_is_not_host_colon_port_is_refused(guard: TestClient, host: str) -> None:
    r = guard.get("/api/repos", headers={**BEARER, "Host": host})
    assert r.status_code == 421, host
    assert r.json()["error"]["code"] == "HOST_REFUSED"


@pytest.mark.parametrize("header, name", [("127.0.0.1:8765", "127.0.0.1"), ("LOCALHOST", "localhost"),
                                          ("[::1]:8765", "::1"), ("[::1]", "::1"), ("localhost:1", "localhost")])
def test_well_formed_hosts_parse(header: str, name: str) -> None:
    assert host_name(header) == name


# --- half-open connections ------------------------------------------------------------------------------------

ATTACKERS = 1100
ANSWER_WITHIN_S = 15.0


HEADER_TIMEOUT_S = 5  # the flood's serve closes a half-open connection after this (10 s unless set)


def test_the_header_timeout_is_ten_seconds_unless_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve's protocol class takes `[serve] header_timeout_s`: 10 s with no settings file, the set value with
    one, and a settings file it cannot read leaves the default (serve answers then)."""
    settings = tmp_path / "settings.toml"
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    assert guarded().header_timeout_s == 10.0
    settings.write_text("[serve]\nheader_timeout_s = 3\n")
    assert guarded().header_timeout_s == 3.0
    settings.write_text("[serve]\nheader_timeout_s = nonsense\n")
    assert guarded().header_timeout_s == 10.0


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Server:
    """`fleetdeck serve` with RLIMIT_NOFILE at 1024, as `ulimit -n 1024` would start it, and a header timeout
    of HEADER_TIMEOUT_S."""
    root = tmp_path / "fleet"
    init_repo(root / "alpha", commits=1)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    settings = tmp_path / "settings.toml"
    settings.write_text(f"[serve]\nheader_timeout_s = {HEADER_TIMEOUT_S}\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    return Server(db, [root], ["--no-watch"], preexec_fn=limited)


def _half_open(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each send part of a request and then nothing (a connect that the server
    no longer accepts times out and is not counted: on loopback the kernel completes a handshake at once or,
    the listen queue full, drops the SYN and retries only after a second, so 0.1 s tells the two apart)."""
    held = []
    for i in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=0.1)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" if i % 2 else b"GET /api/repos HT")
            held.append(sock)
        except OSError:
            pass
    return held


def _answers(person: httpx.Client, server: Server) -> tuple[int, int]:
    """(the dashboard page for the signed-in person, `/mcp` for an agent with the bearer token)."""
    page = person.get("/", headers={"Accept": "text/html"}, timeout=ANSWER_WITHIN_S)
    mcp = httpx.post(server.base + "/mcp", headers={**server.auth, "Accept": "application/json, text/event-stream"},
                     json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "agent", "version": "1"}}},
                     timeout=ANSWER_WITHIN_S)
    return page.status_code, mcp.status_code


@pytest.mark.slow
def test_half_open_connections_do_not_take_the_dashboard_or_mcp_away(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))  # the attacker's own sockets
    server = _serve(tmp_path, monkeypatch)
    person = httpx.Client(base_url=server.base, timeout=ANSWER_WITHIN_S)
    held: list[socket.socket] = []
    try:
        server.sign_in(person)
        assert _answers(person, server) == (200, 200)
        flood = time.monotonic()
        held = _half_open(int(server.base.rsplit(":", 1)[1]), ATTACKERS)
        assert len(held) > MAX_CONNECTIONS    # more than the server keeps open: the attack reaches its cap
        assert time.monotonic() - flood < HEADER_TIMEOUT_S  # ... within the timeout: the cap, not it, made room
        started = time.monotonic()
        assert _answers(person, server) == (200, 200)
        assert time.monotonic() - started < ANSWER_WITHIN_S
        deadline = time.monotonic() + 60          # the server closes them itself (header timeout)
        for sock in held:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                assert sock.recv(65536) is not None
                while sock.recv(65536):
                    pass
            except (ConnectionResetError, BrokenPipeError):
                pass
        assert time.monotonic() < deadline
        assert _answers(person, server) == (200, 200)
    finally:
        for sock in held:
            sock.close()
        person.close()
        server.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
