"""Native desktop notifications from `serve`, on a session D-Bus the test starts itself (`dbus-daemon
--session` in a temp dir) and observed with `dbus-monitor`: one per item and state, only while no dashboard
tab holds an event stream, bursts and quiet hours as for the webhooks, the item's URL and never a token; off,
and said so in `inbox --json`, where the bus or the notification service is missing. Skipped with the reason
where dbus-daemon is absent (a failure under CI=true)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fleet.notify import status
from fleet.notify.config import load
from fleet.notify.desktop import Desktop
from fleet.notify.dispatch import Delivery, Dispatcher
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.desktop_bus import SessionBus, require_dbus
from tests.fleets.gitbuild import init_repo
from tests.fleets.serving import Server, wait_for


@pytest.fixture
def bus(monkeypatch):
    require_dbus()
    session = SessionBus()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session.address)
    yield session
    session.close()


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch):
    root = tmp_path / "fleet"
    repo = init_repo(root / "api")
    db = tmp_path / "fleet.db"
    settings = tmp_path / "settings.toml"
    settings.write_text("[notify]\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    run_cli("scan", str(root), db=db, check=True)
    return root, repo, db, settings


def hook(db: Path, repo: Path, session: str) -> None:
    payload = {"session_id": session, "cwd": str(repo), "hook_event_name": "Notification",
               "notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"}
    subprocess.run([sys.executable, "-m", "fleet.agenthooks", "claude-code", "--db", str(db)],
                   input=json.dumps(payload), text=True, env=fleetdeck_env(), check=True, capture_output=True,
                   timeout=30)


def desktop_row(db: Path) -> dict:
    shown = json.loads(subprocess.run(fleetdeck_argv("--db", str(db), "inbox", "--json"), env=fleetdeck_env(),
                                      capture_output=True, text=True, check=True).stdout)
    (row,) = [n for n in shown["notifiers"] if n["name"] == "desktop"]
    return row


def sent_for(db: Path, session: str) -> bool:
    return any(f":{session}:" in key for key in status.read(db).get("sent", {}))


@pytest.mark.slow
def test_serve_notifies_the_desktop_while_no_tab_is_open(bus, fleet) -> None:
    root, repo, db, _ = fleet
    bus.service()
    monitor = bus.monitor()
    server = Server(db, [root])
    try:
        server.first_page()
        wait_for(lambda: "desktop" in status.read(db).get("notifiers", {}), "serve looked for the service", 30)
        assert desktop_row(db)["last_error"] is None

        hook(db, repo, "alone")                                   # no tab open: the desktop is told
        (call,) = monitor.wait(1)
        assert '"An agent waits on you"' in call and "claude-code waits for a permission in api" in call
        assert f"{server.base}/repos/" in call                      # the item's page on this dashboard
        assert server.token not in call and "code=" not in call and "Bash" not in call
        wait_for(lambda: desktop_row(db)["last_ok_at"], "the success recorded")

        with httpx.Client(base_url=server.base, timeout=10) as client:
            server.sign_in(client)
            with client.stream("GET", "/api/events", headers={"Accept": "text/event-stream"}) as stream:
                lines = stream.iter_lines()
                assert next(lines).startswith("event:")            # the tab is connected
                hook(db, repo, "tab-open")                         # a tab is open: it shows the item itself
                wait_for(lambda: sent_for(db, "tab-open"), "the dispatcher took the item")
                time.sleep(0.5)
                assert len(monitor.calls()) == 1
        time.sleep(1.0)                                            # the server sees the tab go
        hook(db, repo, "closed")
        calls = monitor.wait(2)
        assert len(calls) == 2 and "api" in calls[1]
        time.sleep(0.5)
        assert len(monitor.calls()) == 2                           # one per item and state
    finally:
        server.stop()


def apart(tmp_path: Path, name: str) -> str:
    """An index path of its own folder: each dispatcher keeps the items it sent beside its index."""
    (tmp_path / name).mkdir()
    return str(tmp_path / name / "fleet.db")


@pytest.mark.slow
def test_bursts_and_quiet_hours_are_the_dispatchers(bus, fleet, tmp_path) -> None:
    _, _, db, settings = fleet
    bus.service()
    monitor = bus.monitor()
    fake = [{"kind": "proposal", "repo": f"r{i}", "agent": "codex", "since": None, "summary": f"codex in r{i}",
             "url": f"/proposals/p-{i}", "action": "open", "key": f"proposal:{i}"} for i in range(8)]
    around = lambda h: time.strftime("%H:%M", time.localtime(time.time() + h * 3600))
    settings.write_text(f'[notify]\nquiet_hours = "{around(-1)}-{around(1)}"\n')
    quiet = Dispatcher(apart(tmp_path, "quiet"), load(), extra=(Delivery("desktop", Desktop().send, str(db)),))
    assert quiet.tick(fake[:1], None) == []
    settings.write_text("[notify]\nproposal = false\n")
    off = Dispatcher(apart(tmp_path, "off"), load(), extra=(Delivery("desktop", Desktop().send, str(db)),))
    assert off.tick(fake[:1], None) == []
    settings.write_text("[notify]\n")
    burst = Dispatcher(apart(tmp_path, "burst"), load(), extra=(Delivery("desktop", Desktop().send, str(db)),))
    assert len(burst.tick(fake, "http://127.0.0.1:9")) == 1
    (call,) = monitor.wait(1)
    assert '"8 things need you"' in call and "8 proposals" in call and "http://127.0.0.1:9/inbox" in call
    time.sleep(0.5)
    assert len(monitor.calls()) == 1
    for dispatcher in (quiet, off, burst):
        dispatcher.stop()


@pytest.mark.slow
def test_no_notification_service_is_said(bus, fleet, monkeypatch) -> None:
    root, repo, db, settings = fleet
    row = desktop_row(db)                                          # a bus, but nobody serves notifications
    assert row["last_error"] == "no desktop notification service (org.freedesktop.Notifications) on the " \
                                "session D-Bus" and row["kind"] == "desktop"
    server = Server(db, [root])                                    # serve finds the same, and says so
    try:
        server.first_page()
        wait_for(lambda: status.read(db).get("notifiers", {}).get("desktop"), "serve looked", 30)
        assert "no desktop notification service" in status.read(db)["notifiers"]["desktop"]["last_error"]
        page = httpx.Client(base_url=server.base, timeout=10)
        server.sign_in(page)
        assert "no desktop notification service" in page.get("/inbox").text
        page.close()
    finally:
        server.stop()
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS")
    monkeypatch.delenv("DISPLAY", raising=False)
    status.status_path(db).unlink()
    assert desktop_row(db)["last_error"] == "no session D-Bus (DBUS_SESSION_BUS_ADDRESS is not set)"
    settings.write_text("[notify]\ndesktop = false\n")
    assert not [n for n in json.loads(subprocess.run(
        fleetdeck_argv("--db", str(db), "inbox", "--json"), env=fleetdeck_env(), capture_output=True, text=True,
        check=True).stdout)["notifiers"] if n["name"] == "desktop"]
