"""The CLI's decisions as an agent with a shell would try them, and as the person makes them: `proposals
approve|reject|undo` asks on the controlling terminal (a real pty here), never on stdin; `--yes` skips it only
for a non-interactive approver the person set up in the settings file; `dashboard link` writes its fresh
single-use link to the terminal. Real git, real CLI subprocesses, a real `fleetdeck serve`."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import termios
import time
from pathlib import Path

import httpx
import pytest

from fleet.index.store import open_index
from fleet.ops import landing, service
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import build, state
from tests.fleets.serving import Server

pytestmark = pytest.mark.slow


@pytest.fixture
def fleet(tmp_path: Path):
    built = build(tmp_path)
    yield built
    built["index"].close()


def _settings(tmp_path: Path, noninteractive: bool) -> dict[str, str]:
    path = tmp_path / "settings.toml"
    path.write_text(f"[approval]\nnoninteractive = {'true' if noninteractive else 'false'}\n")
    return fleetdeck_env(FLEETDECK_SETTINGS=str(path))


def _no_terminal(fleet, *args: str, stdin: str = "yes\ny\n", env=None) -> subprocess.CompletedProcess:
    """As an agent's shell runs it: a new session (no controlling terminal), answers piped on stdin."""
    return subprocess.run(fleetdeck_argv("--db", str(fleet["db"]), *args), input=stdin, capture_output=True,
                          text=True, env=env or fleetdeck_env(), start_new_session=True, timeout=120)


def _on_terminal(fleet, *args: str, answer: str | None, env=None) -> tuple[int, str, str]:
    """As the person runs it: a pty is the process's controlling terminal; `answer` is typed once the
    prompt shows (None: just collect what the terminal shows). Returns (exit code, stdout, terminal)."""
    master, slave = os.openpty()

    def attach() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(fleetdeck_argv("--db", str(fleet["db"]), *args), stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env or fleetdeck_env(), start_new_session=True,
                            preexec_fn=attach)
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    shown += os.read(master, 65536)
                except OSError:
                    break
            if answer is not None and b"to confirm:" in shown:
                os.write(master, answer.encode() + b"\n")
                answer = None
        out, err = proc.communicate(timeout=120)
        while select.select([master], [], [], 0)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    return proc.returncode, out, shown.decode("utf-8", "replace") + err


def _propose(fleet, op="stage", args=None) -> str:
    return service.propose(fleet["index"], "claude-code", op, str(fleet["work"]), args or {"paths": ["README.md"]},
                           "stage it")["proposal_id"]


@pytest.mark.parametrize("extra", [[], ["--yes"]])
def test_an_agent_piping_answers_without_a_terminal_decides_nothing(fleet, extra):
    pid = _propose(fleet)
    before = state(fleet["work"])
    for args in (["proposals", "approve", pid], ["proposals", "reject", pid, "--reason", "mine"]):
        run = _no_terminal(fleet, *args, *extra)
        assert run.returncode == 1
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "[NO_TERMINAL]" in lines[0] and "noninteractive" in lines[0], run.stderr
    assert service.show(fleet["index"], pid)["status"] == "pending"
    assert state(fleet["work"]) == before


def test_the_person_answers_on_the_terminal(fleet):
    pid = _propose(fleet)
    code, out, shown = _on_terminal(fleet, "proposals", "approve", pid, "--json", answer="y")
    assert code == 0, shown
    assert "approve this low-risk stage? type 'y' to confirm" in shown and "+edited" in shown
    assert json.loads(out)["status"] == "completed"  # stdout carries the result only, the prompt went to the tty
    assert git(fleet["work"], "diff", "--cached", "--name-only") == "README.md\n"


def test_a_wrong_answer_or_yes_without_the_setting_still_asks(fleet):
    pid = _propose(fleet, "discard", {"paths": ["README.md"]})
    before = state(fleet["work"])
    code, _out, shown = _on_terminal(fleet, "proposals", "approve", pid, "--yes", answer="y")
    assert code == 1 and "--yes is ignored" in shown and "type 'yes' to confirm" in shown  # high risk: 'yes'
    assert "not confirmed" in shown
    assert service.show(fleet["index"], pid)["status"] == "pending" and state(fleet["work"]) == before


def test_a_noninteractive_approver_the_person_set_up(fleet, tmp_path):
    env = _settings(tmp_path, True)
    pid = _propose(fleet)
    assert _no_terminal(fleet, "proposals", "approve", pid, env=env).returncode == 1  # still no --yes
    run = _no_terminal(fleet, "proposals", "approve", pid, "--yes", "--json", env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["decided_by"] == "cli"
    off = _settings(tmp_path, False)
    other = _propose(fleet, "unstage", {"paths": ["README.md"]})
    assert _no_terminal(fleet, "proposals", "undo", pid, "--yes", env=off).returncode == 1
    assert _no_terminal(fleet, "proposals", "reject", other, "--reason", "r", "--yes", env=off).returncode == 1
    assert service.show(fleet["index"], other)["status"] == "pending"


def test_dashboard_link_goes_to_the_terminal_and_signs_in_once(fleet, tmp_path):
    run = _no_terminal(fleet, "dashboard", "link", env=_settings(tmp_path, True))
    assert run.returncode == 1 and "[NOT_FOUND]" in run.stderr and "fleetdeck serve" in run.stderr
    server = Server(fleet["db"], [fleet["root"]], ["--no-watch"])
    try:
        refused = _no_terminal(fleet, "dashboard", "link")
        assert refused.returncode == 1 and "[NO_TERMINAL]" in refused.stderr and refused.stdout == ""
        code, out, shown = _on_terminal(fleet, "dashboard", "link", answer=None)
        assert code == 0 and out == "", shown
        link = next(word for word in shown.split() if word.startswith(server.base))
        scripted = _no_terminal(fleet, "dashboard", "link", env=_settings(tmp_path, True))
        assert scripted.returncode == 0 and scripted.stdout.startswith(server.base + "/?code=")
        code_value = link.split("code=", 1)[1]
        exchange = {"Origin": server.base, "Accept": "application/json"}
        first = httpx.post(server.base + "/session", json={"code": code_value}, headers=exchange)
        assert first.status_code == 200 and first.json()["decision_key"] and "set-cookie" in first.headers
        again = httpx.post(server.base + "/session", json={"code": code_value}, headers=exchange)
        assert again.status_code == 401 and again.json()["error"]["code"] == "LANDING_REFUSED"
    finally:
        server.stop()


def test_a_landing_code_expires_and_is_stored_only_as_a_digest(fleet):
    with open_index(fleet["db"]) as index:
        stale = landing.issue(index, ttl_s=-1)
        live = landing.issue(index)
        stored = [row[0] for row in index.conn.execute("SELECT key || value FROM meta")]
        assert not any(live in row or stale in row for row in stored)
        assert not landing.redeem(index, stale)
        assert landing.redeem(index, live) and not landing.redeem(index, live)
