"""A hub that is not on this machine is reached over TLS with its certificate checked (`sslmode=verify-full`
unless the DSN names a mode): the attack is an impostor on the network that answers where the hub should and
declines TLS, hoping for the machine's password in the clear. A real socket server on this machine's own
non-loopback address plays it (it speaks PostgreSQL's first byte: "N", no SSL), psycopg and libpq do the rest;
the impostor must never receive a startup message, let alone a password."""

from __future__ import annotations

import socket
import threading

import pytest

from fleet.errors import FleetError
from fleet.team import pg

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")

SSL_REQUEST = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")


def own_address() -> str | None:
    """This machine's address on its default route (not loopback), or None when it has none."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("203.0.113.1", 9))          # a documentation address; a UDP connect sends no packet
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


class Impostor:
    """Listens on `host`, answers a client's SSLRequest with "N" and records every byte it is sent after."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(3)
                try:
                    first = conn.recv(8)
                    self.received.append(first)
                    if first == SSL_REQUEST:
                        conn.sendall(b"N")             # "I do not speak TLS": a client that insists hangs up
                        first = b""
                    sent = first
                    # until the client hangs up, or has sent a whole message in the clear (its length first:
                    # the startup, user name included), which is all the impostor waits for: it then hangs up
                    # itself, as a server refusing the login would, instead of the client timing out
                    while len(sent) < 4 or len(sent) < int.from_bytes(sent[:4], "big"):
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        self.received.append(chunk)
                        sent += chunk
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def impostor():
    address = own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to put an impostor hub on")
    fake = Impostor(address)
    yield address, fake
    fake.close()


def test_a_remote_hub_gets_verify_full_unless_the_dsn_names_a_mode():
    assert pg.parts(pg.secured("host=hub.example.org dbname=hub user=laptop"))["sslmode"] == "verify-full"
    assert pg.parts(pg.secured("postgresql://laptop@hub.example.org/hub"))["sslmode"] == "verify-full"
    assert pg.parts(pg.secured("host=hub.example.org sslmode=require"))["sslmode"] == "require"
    assert "sslmode" not in pg.parts(pg.secured("host=127.0.0.1 dbname=hub"))
    assert "sslmode" not in pg.parts(pg.secured("host=::1 dbname=hub"))
    assert pg.parts(pg.secured("host=127.0.0.1,hub.example.org"))["sslmode"] == "verify-full"   # any remote host


def test_an_impostor_that_declines_tls_gets_no_password(impostor):
    address, fake = impostor
    dsn = f"host={address} port={fake.port} dbname=hub user=laptop"
    with pytest.raises(FleetError) as err:
        pg.connect(dsn, "s3cret-hub-password", timeout=5)
    assert err.value.code == "HUB_UNREACHABLE"
    assert f"cannot reach the hub at {address}" in err.value.message and "SSL" in err.value.message
    assert "s3cret" not in err.value.message
    assert fake.received and all(chunk == SSL_REQUEST for chunk in fake.received), fake.received
    assert not any(b"s3cret" in chunk or b"laptop" in chunk for chunk in fake.received)


def test_the_same_impostor_gets_the_startup_when_the_dsn_asks_for_no_tls(impostor):
    """The control: with `sslmode=disable` written in the DSN (the person's explicit choice) the client does
    talk in the clear, so the refusal above is the default's doing, not the impostor's."""
    address, fake = impostor
    with pytest.raises(FleetError):
        pg.connect(f"host={address} port={fake.port} dbname=hub user=laptop sslmode=disable", timeout=3)
    assert any(b"laptop" in chunk for chunk in fake.received), fake.received
