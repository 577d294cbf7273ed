"""Notifications, against real HTTP receivers on 127.0.0.1: one message per item and state (none for a
flapping agent), one summary for a burst, nothing in quiet hours or for a kind switched off, a valid HMAC,
each service's documented shape, a failing receiver retried and its failure shown, no secret in any log."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleet.inbox.items import inbox
from fleet.index.store import open_index
from fleet.notify import status
from fleet.notify.config import load
from fleet.notify.dispatch import Dispatcher
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.gitbuild import git, init_repo, write
from tests.fleets.serving import wait_for

SECRET = "s3cret-hmac-key"
TOPIC = "fleet-topic-xyz123"


class Receiver:
    """A local HTTP server that records every POST; the first `fail` answers are 500s."""

    def __init__(self, fail: int = 0) -> None:
        self.got: list[tuple[str, dict, bytes]] = []
        self.fail = fail
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if outer.fail > 0:
                    outer.fail -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                outer.got.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # it looks for a shutdown every 50 ms (the default 0.5 s was half a second of every test's teardown)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def at(self, prefix: str) -> list[tuple[str, dict, bytes]]:
        return [g for g in self.got if g[0].startswith(prefix)]

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def settings(tmp_path: Path, monkeypatch, receiver: Receiver, extra: str = "", mode: int = 0o600) -> Path:
    path = tmp_path / "settings.toml"
    path.write_text(f'[notify]\nntfy = "{receiver.url}/ntfy/{TOPIC}"\nslack = "{receiver.url}/slack/T0/B0/XX"\n'
                    f'discord = "{receiver.url}/discord/1/tok"\nwebhook = "{receiver.url}/hook/path-secret"\n'
                    f'webhook_secret = "{SECRET}"\n{extra}')
    os.chmod(path, mode)
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(path))
    return path


@pytest.fixture
def fleet(tmp_path: Path):
    root = tmp_path / "fleet"
    repo = init_repo(root / "api")
    write(repo / "a.py", "1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "a")
    db = tmp_path / "fleet.db"
    env = fleetdeck_env(FLEETDECK_SETTINGS=str(tmp_path / "settings.toml"), HOME=str(tmp_path / "home"))
    run_cli("scan", str(root), db=db, env=env, check=True)
    return repo, db, env


def hook(db: Path, env: dict, repo: Path, event: str, **extra) -> None:
    payload = {"session_id": "s1", "cwd": str(repo), "hook_event_name": event, **extra}
    subprocess.run([sys.executable, "-m", "fleet.agenthooks", "claude-code", "--db", str(db)],
                   input=json.dumps(payload), text=True, env=env, check=True, capture_output=True, timeout=30)


def items(db: Path) -> list[dict]:
    with open_index(db) as index:
        return inbox(index)["items"]


def settle(receiver: Receiver, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(receiver.got) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)     # and nothing more arrives


def delivered(*dispatchers: Dispatcher) -> None:
    """Every message the dispatchers handed over has been sent (or given up on): their delivery threads,
    stopped, ran their queues out, so what the receiver got is all it will get from them."""
    for dispatcher in dispatchers:
        dispatcher.stop()
        for delivery in dispatcher.deliveries:
            delivery.thread.join(10)
            assert not delivery.thread.is_alive(), delivery.name


@pytest.mark.slow
def test_one_message_per_event_in_each_documented_shape(fleet, tmp_path, monkeypatch, receiver, caplog) -> None:
    repo, db, env = fleet
    settings(tmp_path, monkeypatch, receiver)
    env = {**env, "FLEETDECK_SETTINGS": os.environ["FLEETDECK_SETTINGS"]}
    caplog.set_level(logging.DEBUG)
    dispatcher = Dispatcher(str(db), load(), backoff=(0.1,))
    hook(db, env, repo, "PermissionRequest", tool_name="Bash", tool_input={"command": "rm -rf /secret/path"})
    sent = dispatcher.tick(items(db), "http://127.0.0.1:8765")
    assert len(sent) == 1
    settle(receiver, 4)
    assert len(receiver.got) == 4                                  # one per notifier
    (_, _, ntfy), = receiver.at("/ntfy/")
    ntfy = json.loads(ntfy)
    assert ntfy["topic"] == TOPIC and ntfy["priority"] == 4 and "claude-code" in ntfy["message"]
    assert ntfy["actions"] == [{"action": "view", "label": "Open", "url": ntfy["click"]}]
    assert ntfy["click"].startswith("http://127.0.0.1:8765/repos/")
    (_, _, slack), = receiver.at("/slack/")
    assert set(json.loads(slack)) == {"text"} and "api" in json.loads(slack)["text"]
    (_, _, discord), = receiver.at("/discord/")
    assert json.loads(discord)["allowed_mentions"] == {"parse": []} and "api" in json.loads(discord)["content"]
    (_, headers, body), = receiver.at("/hook/")
    expected = hmac.new(SECRET.encode(), headers["X-Fleetdeck-Timestamp"].encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    assert headers["X-Fleetdeck-Signature"] == "sha256=" + expected
    assert json.loads(body)["items"][0]["kind"] == "waiting"
    for _, _, raw in receiver.got:                                 # names only: no argument, no path
        assert b"/secret/path" not in raw and str(repo).encode() not in raw
    # the same item again, and a flapping agent (working, then waiting again at once): nothing more
    assert dispatcher.tick(items(db), None) == []
    hook(db, env, repo, "PreToolUse", tool_name="Bash", tool_input={"command": "ls"})
    assert dispatcher.tick(items(db), None) == []
    hook(db, env, repo, "PermissionRequest", tool_name="Bash")
    assert dispatcher.tick(items(db), None) == []
    delivered(dispatcher)
    assert len(receiver.got) == 4
    logged = caplog.text + status.status_path(db).read_text()
    assert SECRET not in logged and "path-secret" not in logged and TOPIC not in logged
    assert oct(os.stat(status.status_path(db)).st_mode & 0o777) == "0o600"


def fake(n: int, kind: str = "proposal") -> list[dict]:
    return [{"kind": kind, "repo": f"r{i}", "agent": "codex", "since": None, "summary": f"codex proposes in r{i}",
             "url": f"/proposals/p-{i}", "action": "open", "key": f"{kind}:{i}"} for i in range(n)]


def test_a_burst_is_one_summary(tmp_path, monkeypatch, receiver) -> None:
    settings(tmp_path, monkeypatch, receiver)
    dispatcher = Dispatcher(str(tmp_path / "fleet.db"), load(), backoff=(0.1,))
    sent = dispatcher.tick(fake(8), "http://127.0.0.1:1")
    assert len(sent) == 1 and sent[0].title == "8 things need you" and sent[0].url == "http://127.0.0.1:1/inbox"
    delivered(dispatcher)
    assert len(receiver.got) == 4
    assert "8 proposals" in json.loads(receiver.at("/ntfy/")[0][2])["message"]


def test_quiet_hours_and_switched_off_kinds_send_nothing(tmp_path, monkeypatch, receiver) -> None:
    around = lambda h: time.strftime("%H:%M", time.localtime(time.time() + h * 3600))
    settings(tmp_path, monkeypatch, receiver, f'quiet_hours = "{around(-1)}-{around(1)}"\n')
    quiet = Dispatcher(str(tmp_path / "a.db"), load())
    assert quiet.tick(fake(1), None) == []
    settings(tmp_path, monkeypatch, receiver, "proposal = false\n")
    off = Dispatcher(str(tmp_path / "b.db"), load())
    assert off.tick(fake(1), None) == []
    delivered(quiet, off)
    assert receiver.got == []


@pytest.mark.slow
def test_a_failing_receiver_is_retried_and_its_error_shown(fleet, tmp_path, monkeypatch) -> None:
    _repo, db, env = fleet
    failing = Receiver(fail=10 ** 6)
    try:
        path = tmp_path / "settings.toml"
        path.write_text(f'[notify]\nslack = "{failing.url}/slack/T0/B0/secretpart"\n')
        os.chmod(path, 0o600)
        monkeypatch.setenv("FLEETDECK_SETTINGS", str(path))
        started = time.monotonic()
        dispatcher = Dispatcher(str(db), load(), backoff=(0.1, 0.1))
        dispatcher.tick(fake(1), None)
        assert time.monotonic() - started < 0.5                    # the tick never waits on the webhook
        wait_for(lambda: "attempt 3 of 3" in (status.read(db)["notifiers"].get("slack", {}).get("last_error") or ""),
                 "the third attempt's failure recorded")
        shown = json.loads(subprocess.run(fleetdeck_argv("--db", str(db), "inbox", "--json"),
                                          env={**env, "FLEETDECK_SETTINGS": str(path)}, capture_output=True,
                                          text=True, check=True).stdout)
        (slack,) = [n for n in shown["notifiers"] if n["kind"] != "desktop"]    # the desktop: its own test
        assert slack["name"] == "slack" and slack["last_error"].startswith("HTTP 500 (attempt 3 of 3)")
        assert "secretpart" not in json.dumps(shown) and slack["target"] == "http://127.0.0.1/…"
        failing.fail = 0                                           # it recovers: the next message gets through
        dispatcher.tick(fake(1, "waiting"), None)
        settle(failing, 1)
        assert len(failing.got) == 1
        (slack,) = json.loads(subprocess.run(fleetdeck_argv("--db", str(db), "inbox", "--json"),
                                             env={**env, "FLEETDECK_SETTINGS": str(path)}, capture_output=True,
                                             text=True, check=True).stdout)["notifiers"][:1]
        assert slack["last_error"] is None and slack["last_ok_at"]
    finally:
        failing.close()


def test_webhook_urls_in_a_readable_settings_file_are_refused(tmp_path, monkeypatch, receiver) -> None:
    settings(tmp_path, monkeypatch, receiver, mode=0o644)
    config = load()
    assert config.notifiers == () and "chmod 600" in config.error


def test_include_counts_names_no_repo_and_no_agent(tmp_path, monkeypatch, receiver) -> None:
    settings(tmp_path, monkeypatch, receiver, 'include = "counts"\n')
    items = [{**item, "repo": "secret-repo-name", "agent": "codex-agent-name",
              "summary": "codex-agent-name proposes stage in secret-repo-name"} for item in fake(1)]
    dispatcher = Dispatcher(str(tmp_path / "fleet.db"), load(), backoff=(0.1,))
    assert len(dispatcher.tick(items, "http://127.0.0.1:1")) == 1
    delivered(dispatcher)
    assert len(receiver.got) == 4
    for _, _, body in receiver.got:
        assert b"secret-repo-name" not in body and b"codex-agent-name" not in body
    assert "A proposal waits for you" in json.loads(receiver.at("/ntfy/")[0][2])["message"]
    assert json.loads(receiver.at("/hook/")[0][2])["items"] == [{"kind": "proposal", "since": None}]
