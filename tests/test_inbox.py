"""`fleetdeck inbox`: pending proposals (oldest first, time left), agents waiting (their hooks said so),
discarded work and conflicts where an agent is, each `{kind, repo, agent, since, summary, url, action}`;
`--wait` returns as soon as something new needs the person."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from fleet.index.scan import refresh_repo
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env, run_cli
from tests.fleets.gitbuild import git, write
from tests.fleets.ops_fleet import propose

FIELDS = {"kind", "repo", "agent", "since", "summary", "url", "action"}


def _env(ops_fleet, tmp_path) -> dict:
    return fleetdeck_env(FLEETDECK_DB=str(ops_fleet["db"]), FLEETDECK_SETTINGS=str(tmp_path / "none.toml"),
                         XDG_CONFIG_HOME=os.environ["XDG_CONFIG_HOME"], HOME=str(tmp_path / "home"))


def _inbox(env: dict, *args: str) -> dict:
    done = run_cli("inbox", "--json", *args, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _hook(env: dict, repo, event: str, session: str = "s1", **extra) -> None:
    payload = {"session_id": session, "cwd": str(repo), "hook_event_name": event, **extra}
    subprocess.run([sys.executable, "-m", "fleet.agenthooks", "claude-code"], input=json.dumps(payload),
                   text=True, env=env, check=True, capture_output=True, timeout=30)


@pytest.mark.slow
def test_the_inbox_gathers_what_needs_the_person(ops_fleet, tmp_path) -> None:
    env = _env(ops_fleet, tmp_path)
    empty = _inbox(env)
    assert empty == {"items": [], "counts": {"proposal": 0, "waiting": 0, "discarded": 0, "conflict": 0},
                     "notifiers": [{"name": "desktop", "kind": "desktop",     # on by default; no bus in tests
                                    "target": "org.freedesktop.Notifications on the session D-Bus",
                                    "last_ok_at": None,
                                    "last_error": "no session D-Bus (DBUS_SESSION_BUS_ADDRESS is not set)"}],
                     "at": empty["at"]}
    first = propose(ops_fleet, "stage", {"paths": ["README.md"]})["proposal_id"]
    with ops_fleet["index"].write() as conn:                      # made 2 s before the second, not waited for
        assert conn.execute("UPDATE proposals SET created_at = created_at - 2 WHERE id = ?", (first,)).rowcount == 1
    second = propose(ops_fleet, "stage", {"paths": ["notes.txt"]}, agent="codex")["proposal_id"]
    _hook(env, ops_fleet["work"], "Notification", notification_type="permission_prompt", message="secret words")
    found = _inbox(env)
    assert found["counts"] == {"proposal": 2, "waiting": 1, "discarded": 0, "conflict": 0}
    kinds = [(i["kind"], i.get("id")) for i in found["items"]]
    assert kinds == [("proposal", first), ("proposal", second), ("waiting", None)]   # oldest proposal first
    for item in found["items"]:
        assert FIELDS <= set(item) and item["repo"] == "work" and "secret words" not in item["summary"]
    assert found["items"][0]["url"] == f"/proposals/{first}" and found["items"][0]["action"] == "approve or reject"
    assert 0 < found["items"][0]["expires_in_s"] and "left" in found["items"][0]["summary"]
    waiting = found["items"][2]
    assert waiting["agent"] == "claude-code" and waiting["url"].startswith("/repos/") and waiting["since"]
    assert "a permission" in waiting["summary"] and f"({waiting['branch']})" in waiting["summary"]
    assert waiting["branch"] == git(ops_fleet["work"], "branch", "--show-current").strip()


def test_a_conflict_where_an_agent_is_present(ops_fleet, tmp_path) -> None:
    env = _env(ops_fleet, tmp_path)
    work = ops_fleet["work"]
    git(work, "stash", "-q", "-u")
    git(work, "checkout", "-q", "topic")
    write(work / "src/app.py", "print('topic')\n")
    git(work, "commit", "-qam", "topic")
    git(work, "checkout", "-q", "-")
    write(work / "src/app.py", "print('main')\n")
    git(work, "commit", "-qam", "main")
    git(work, "merge", "-q", "topic", check=False)
    refresh_repo(ops_fleet["index"], str(work))
    assert _inbox(env)["counts"]["conflict"] == 0                 # nobody is there: the queue shows it
    _hook(env, work, "UserPromptSubmit", prompt="resolve it")
    (item,) = [i for i in _inbox(env)["items"] if i["kind"] == "conflict"]
    assert "1 conflicted file" in item["summary"] and "merge in progress" in item["summary"]
    assert item["agent"] == "claude-code"


@pytest.mark.slow
def test_wait_returns_when_something_new_needs_you(ops_fleet, tmp_path) -> None:
    env = _env(ops_fleet, tmp_path)
    propose(ops_fleet, "stage", {"paths": ["README.md"]})
    waiting = subprocess.Popen(fleetdeck_argv("inbox", "--json", "--wait", "--timeout", "30"), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    assert waiting.poll() is None                                 # what was there already is not new
    started = time.monotonic()
    _hook(env, ops_fleet["work"], "Stop")
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    assert time.monotonic() - started < 5
    assert [i["kind"] for i in json.loads(out)["new"]] == ["waiting"]
    timed_out = subprocess.run(fleetdeck_argv("inbox", "--wait", "--timeout", "0.5"), env=env, capture_output=True)
    assert timed_out.returncode == 1
