"""agents.presence marks the caller by its MCP session, not its name; the client's version is kept with its
presence record; the settings file's off switches stop the reading and the recording they name."""

from __future__ import annotations

import os
import time

import pytest

from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.presence import refresh_presence
from fleet.presence.switches import presence_switches
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import init_repo
from tests.fleets.stdio import StdioSession
from tests.fleets.presence import claude_transcript


@pytest.fixture
def small(tmp_path):
    root = tmp_path / "fleet"
    alpha = init_repo(root / "alpha", commits=1)
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"alpha": alpha, "db": db, "tmp": tmp_path}


def mcp_records(db):
    with open_index(db) as index:
        return index.conn.execute("select agent, session, client_version, client_pid from presence_mcp").fetchall()


@pytest.mark.slow
def test_a_second_session_of_the_same_agent_is_not_you(small):
    env = fleetdeck_env(FLEETDECK_DB=str(small["db"]), FLEETDECK_SETTINGS=str(small["tmp"] / "none.toml"))
    with StdioSession(fleetdeck_argv("mcp"), env) as first, StdioSession(fleetdeck_argv("mcp"), env) as second:
        assert first.call_tool("repo.status", {"repo": "alpha"})["result"].get("isError") is not True
        assert second.call_tool("repo.status", {"repo": "alpha"})["result"].get("isError") is not True
        records = mcp_records(small["db"])
        assert len(records) == 2 and {r[0] for r in records} == {"raw-test"}  # same agent, two sessions
        assert {r[2] for r in records} == {"0"}  # the clientInfo version each session declared
        assert {r[3] for r in records} == {os.getpid()}  # on stdio: the client process (here, this test)
        for session in (first, second):
            data = session.call_tool("agents.presence", {"repo": "alpha", "refresh": False})["result"]
            rows = data["structuredContent"]["agents"]      # two sessions of one agent: two rows
            assert len(rows) == 2 and {r["agent"] for r in rows} == {"raw-test"}
            assert all(r["same_agent_as_caller"] for r in rows) and len({r["session"] for r in rows}) == 2
            assert sorted(r["you"] for r in rows) == [False, True]   # the other session is someone else
            assert all(len(r["mcp_clients"]) == 1 for r in rows)
            assert data["structuredContent"]["caller"]["client_version"] == "0"
            refreshed = session.call_tool("agents.presence", {"repo": "alpha"})["result"]["structuredContent"]
            assert sorted(r["you"] for r in refreshed["agents"]) == [False, True]


@pytest.mark.slow
def test_recording_off_means_nothing_written_or_read(small):
    settings = small["tmp"] / "settings.toml"
    settings.write_text("[presence]\nrecord_mcp_clients = false\n")
    env = fleetdeck_env(FLEETDECK_DB=str(small["db"]), FLEETDECK_SETTINGS=str(settings))
    with StdioSession(fleetdeck_argv("mcp"), env) as session:
        session.call_tool("repo.status", {"repo": "alpha"})
        assert mcp_records(small["db"]) == []
        data = session.call_tool("agents.presence", {"repo": "alpha"})["result"]["structuredContent"]
        assert data["switches"] == {"read_agent_sessions": True, "record_mcp_clients": False}
        assert all("mcp" not in r["sources"] for r in data["agents"])


def test_reading_sessions_off_reads_no_agent_files(small, tmp_path):
    home = tmp_path / "home"
    now = time.time()
    claude_transcript(home, "-x", str(small["alpha"]), at=now - 5, tools=[("Edit", {"file_path": "README.md"})])
    settings = tmp_path / "settings.toml"
    with open_index(small["db"]) as index:
        on = refresh_presence(index, now=now, home=home, environ={"HOME": str(home),
                                                                  "FLEETDECK_SETTINGS": str(settings)})
        assert [r["agent"] for r in on] == ["claude-code"]
        settings.write_text("[presence]\nread_agent_sessions = false\n")
        off = refresh_presence(index, now=now, home=home, environ={"HOME": str(home),
                                                                   "FLEETDECK_SETTINGS": str(settings)})
        assert off == []


def test_a_broken_settings_file_is_an_error_not_a_silent_on(tmp_path):
    bad = tmp_path / "settings.toml"
    for text in ("[presence\n", "[presence]\nrecord_mcp_clients = 'no'\n"):
        bad.write_text(text)
        with pytest.raises(FleetError) as err:
            presence_switches({"FLEETDECK_SETTINGS": str(bad)})
        assert err.value.code == "BAD_ARGUMENT"
    assert presence_switches({"FLEETDECK_SETTINGS": str(tmp_path / "absent.toml")}) == {
        "read_agent_sessions": True, "record_mcp_clients": True}


@pytest.mark.slow
def test_a_broken_settings_file_records_nothing_and_says_so(small):
    settings = small["tmp"] / "settings.toml"
    settings.write_text("[presence\n")
    env = fleetdeck_env(FLEETDECK_DB=str(small["db"]), FLEETDECK_SETTINGS=str(settings))
    with StdioSession(fleetdeck_argv("mcp"), env) as session:
        result = session.call_tool("repo.status", {"repo": "alpha"})["result"]
        assert result.get("isError") is not True
        assert [d["code"] for d in result["_meta"]["io.fleetdeck/degraded"]] == ["BAD_ARGUMENT"]
        assert mcp_records(small["db"]) == []
        error = session.call_tool("agents.presence", {})["result"]
        assert error["isError"] is True and error["structuredContent"]["error"]["code"] == "BAD_ARGUMENT"
