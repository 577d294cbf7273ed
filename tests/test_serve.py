"""`fleetdeck serve` as a person runs it: the watcher inside the same process keeps the dashboard fresh
(commits, new repos, agent presence) with nobody calling refresh, and SIGTERM/SIGINT stop it cleanly."""

from __future__ import annotations

import html
import json
import re
import signal
import socket
from pathlib import Path

import httpx
import pytest

from fleet.index.store import open_index
from fleet.watch.service import fleet_watcher
from tests.fleets.dashboard_fleet import build_fleet
from tests.fleets.gitbuild import commit_file, git
from tests.fleets.serving import Server, wait_for


def watcher_meta(index) -> dict:
    row = index.conn.execute("select value from meta where key = 'watcher'").fetchone()
    return json.loads(row[0]) if row else {}


def head_of(index, path: Path) -> str | None:
    record = index.repo(str(path.resolve()))
    return record and record["head"]


@pytest.fixture
def fleet(tmp_path: Path) -> dict[str, Path]:
    return build_fleet(tmp_path)


@pytest.mark.slow
def test_serve_watches_the_fleet_in_process_and_stops_cleanly_on_sigterm(fleet, tmp_path: Path) -> None:
    db = tmp_path / "fleet.db"
    server = Server(db, [fleet["root"]])  # a fresh index: the watcher itself reads the fleet
    try:
        server.first_page()
        with open_index(db) as index:
            wait_for(lambda: watcher_meta(index).get("pid") == server.proc.pid, "the watcher's heartbeat")
            wait_for(lambda: len(index.repos()) == 4 and watcher_meta(index).get("backlog") == 0
                     and (watcher_meta(index).get("reverify") or {}).get("finished_at"),
                     "the watcher's initial read of the fleet")
            assert watcher_meta(index)["mode"] == "inotify"
            radar = httpx.get(server.base + "/api/radar", headers=server.auth).json()
            assert radar["freshness"]["watcher"]["state"] == "running"
            page = httpx.get(server.base + "/", headers=server.auth).text
            assert "watcher live (inotify) on 4 repos" in page

            commit_file(fleet["clean"], "new.txt", "new\n", "made while serving")
            wanted = git(fleet["clean"], "rev-parse", "HEAD").strip()
            wait_for(lambda: head_of(index, fleet["clean"]) == wanted, "the commit, through the watcher", 5)

            trace = fleet["dirty"] / ".aider.chat.history.md"
            trace.write_text("> Applied edit to README.md\n")
            agents = wait_for(lambda: httpx.get(server.base + "/api/presence", headers=server.auth).json()["agents"],
                              "agent presence refreshed by the periodic hook inside serve", 15)
            assert [(a["agent"], a["repo"], a["files"]) for a in agents] == [
                ("aider", str(fleet["dirty"].resolve()), ["README.md"])]

            code, took, err = server.signal_and_wait(signal.SIGTERM)
            assert code == 0 and took < 5, err
            assert "Traceback" not in err
            final = watcher_meta(index)
            assert final["pid"] == server.proc.pid and final["stopped_at"] is not None
    finally:
        server.stop()


@pytest.mark.slow
def test_sigint_also_exits_0(fleet, tmp_path: Path) -> None:
    server = Server(tmp_path / "fleet.db", [fleet["root"]])
    try:
        server.first_page()
        with open_index(tmp_path / "fleet.db") as index:
            wait_for(lambda: watcher_meta(index).get("pid") == server.proc.pid, "the watcher's heartbeat")
        code, took, err = server.signal_and_wait(signal.SIGINT)
        assert code == 0 and took < 5, err
        assert "Traceback" not in err
    finally:
        server.stop()


@pytest.mark.slow  # a real `fleetdeck serve`, waited on (~2-4 s)
def test_no_watch_on_a_new_index_finds_the_repos_behind_the_first_page(fleet, tmp_path: Path) -> None:
    db = tmp_path / "fleet.db"
    server = Server(db, [fleet["root"]], ["--no-watch"])
    try:
        assert httpx.get(server.base + "/", headers=server.auth).status_code == 200  # at once, from the index
        with open_index(db) as index:
            wait_for(lambda: watcher_meta(index).get("stopped_at"), "the one re-check", 60)
            assert len(index.repos()) == 4
            assert watcher_meta(index)["mode"] == "once"
        radar = httpx.get(server.base + "/api/radar", headers=server.auth).json()
        assert radar["freshness"]["watcher"]["state"] == "stopped"
        assert "not kept fresh" in httpx.get(server.base + "/", headers=server.auth).text
        code, _took, err = server.signal_and_wait(signal.SIGTERM)
        assert code == 0, err
    finally:
        server.stop()


@pytest.mark.slow
def test_a_second_serve_on_the_same_index_serves_without_a_second_watcher(fleet, tmp_path: Path) -> None:
    db = tmp_path / "fleet.db"
    first = Server(db, [fleet["root"]])
    second = None
    try:
        first.first_page()
        with open_index(db) as index:
            wait_for(lambda: watcher_meta(index).get("pid") == first.proc.pid, "the first watcher")
        second = Server(db, [])
        radar = httpx.get(second.base + "/api/radar", headers=second.auth).json()
        assert radar["freshness"]["watcher"]["state"] == "running"  # the first one's, honestly reported
        code, _took, err = second.signal_and_wait(signal.SIGTERM)
        assert code == 0 and f"another watcher (pid {first.proc.pid})" in err
        assert "serving without a watcher of our own" in err
        with open_index(db) as index:
            assert watcher_meta(index)["stopped_at"] is None  # the second one never touched the first's record
        assert first.signal_and_wait(signal.SIGTERM)[0] == 0
    finally:
        first.stop()
        if second:
            second.stop()


def test_fleet_watcher_runs_the_presence_hook(tmp_path: Path) -> None:
    with open_index(tmp_path / "fleet.db") as index:
        fleet_watcher(index, [str(tmp_path)])
        hooks = fleet_watcher(index, [str(tmp_path)]).periodic_hooks()
    assert [h.name for h in hooks] == ["presence", "snapshots", "live-edits", "proposals"] and hooks[0].every_s <= 10


@pytest.mark.slow
async def test_serve_offers_mcp_at_slash_mcp_behind_the_same_token(fleet, tmp_path: Path) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    db = tmp_path / "fleet.db"
    server = Server(db, [fleet["root"]], ["--no-watch"])
    try:  # no page opened: the re-check starts by itself once FIRST_PAGE_GRACE_S is out (an agent's serve alone)
        with open_index(db) as index:
            wait_for(lambda: watcher_meta(index).get("stopped_at"), "the one re-check", 60)
        url = server.base + "/mcp"
        # the bridge is built once the re-check is over: the first request may wait for it (a loaded machine)
        assert httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=60).status_code == 401
        wrong = httpx.post(url, json={}, headers={"Authorization": "Bearer nope"}, timeout=60)
        assert wrong.status_code == 401
        for mode, version in (("auto", "2026-07-28"), ("legacy", "2025-11-25")):
            async with httpx2.AsyncClient(headers=server.auth, timeout=30) as http:
                async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                    assert client.protocol_version == version
                    result = await client.call_tool("fleet.radar", {})
                    assert not result.is_error
                    names = {e["name"] for e in result.structured_content["entries"]}
                    assert "dirty" in names
    finally:
        server.stop()


def _raw_get(base: str, target: bytes) -> bytes:
    """One request with a request target exactly as given (no client library to tidy it up)."""
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + f"{host}:{port}".encode()
                     + b"\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    return reply


@pytest.mark.slow  # a real `fleetdeck serve`, waited on (~2-5 s)
def test_hostile_landing_paths_get_a_clean_answer_from_the_real_server(fleet, tmp_path: Path) -> None:
    """uvicorn as `serve` runs it: CR/LF, backslashes and tabs in a `?code=` landing path give a clean
    landing page (or a 400 from the HTTP parser), never a dropped connection, and the page's exchange
    answers a 303 to a path on this server."""
    server = Server(tmp_path / "fleet.db", [fleet["root"]], ["--no-watch"])
    try:
        for target in (b"/%0D%0AX-Injected:%20yes", b"/\\evil.example", b"/%5C/evil.example", b"/%09/evil.example",
                       b"//evil.example/", b"/\t/evil.example"):
            code = server.link().split("code=", 1)[1]
            reply = _raw_get(server.base, target + b"?code=" + code.encode())
            head, _, body = reply.partition(b"\r\n\r\n")
            head = head.decode("latin-1")
            status = head.split(" ", 2)[1] if head.startswith("HTTP/1.1 ") else None
            assert status in ("200", "400"), (target, reply[:200])
            headers = {line.split(":", 1)[0].lower(): line.split(":", 1)[1].strip()
                       for line in head.split("\r\n")[1:]}
            assert "x-injected" not in headers and "set-cookie" not in headers, target
            if status == "200":
                sent = html.unescape(re.search(rb'name=next value="([^"]*)"', body).group(1).decode())
                answer = httpx.post(server.base + "/session", data={"code": code, "next": sent},
                                    headers={"Origin": server.base})
                location = answer.headers["location"]
                assert answer.status_code == 303, (target, answer.text)
                assert location.startswith("/") and location[1:2] not in ("/", "\\"), (target, location)
                assert all(0x21 <= ord(ch) < 0x7f and ch != "\\" for ch in location), (target, location)
                assert answer.headers["set-cookie"].startswith(f"fleetdeck_{server.base.rsplit(':', 1)[1]}=")
        assert httpx.get(server.base + "/api/radar", headers=server.auth).status_code == 200  # still serving
    finally:
        server.stop()
