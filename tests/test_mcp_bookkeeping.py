"""Bookkeeping never costs an answer: with the index write-locked by another process, `fleetdeck mcp` over
stdio still answers a read tool at once; the presence record it could not write is logged to stderr and
reported in the result's `_meta` as degraded. Every error an agent sees carries a code."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from mcp_bridge.envelope import DEGRADED_KEY
from mcp_bridge.server import build_server
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import init_repo, write
from tests.fleets.locks import write_locked
from tests.fleets.mcp_fleet import call, error_of, ok
from tests.fleets.stdio import StdioSession

@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, Path]:
    repo = init_repo(tmp_path / "fleet" / "alpha", commits=2)
    write(repo / "new.txt", "x\n")
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(tmp_path / "fleet")])
    return repo, db


def presence_rows(db: Path) -> list[tuple]:
    with open_index(db) as index:
        return index.conn.execute("select agent, repo, tool from presence_mcp").fetchall()


@pytest.mark.slow
def test_a_write_locked_index_costs_no_answer_over_stdio(small):
    repo, db = small
    with write_locked(db) as locker:
        with StdioSession(fleetdeck_argv("mcp"), fleetdeck_env(FLEETDECK_DB=str(db))) as session:
            started = time.monotonic()
            reply = session.call_tool("repo.status", {"repo": "alpha"})
            elapsed = time.monotonic() - started
            result = reply["result"]
            assert result.get("isError") is not True, result
            assert result["structuredContent"]["untracked"] == ["new.txt"]
            degraded = result["_meta"][DEGRADED_KEY]
            assert [d["code"] for d in degraded] == ["INDEX_BUSY"]
            assert elapsed < 2.5, f"a read waited {elapsed:.1f}s on the index's write lock"
            again = session.call_tool("repo.brief", {"repo": str(repo)})["result"]
            assert again.get("isError") is not True and again["_meta"][DEGRADED_KEY][0]["code"] == "INDEX_BUSY"
            assert presence_rows(db) == []
            locker.stdin.close()
            assert locker.wait(timeout=10) == 0
            recorded = session.call_tool("repo.status", {"repo": "alpha"})["result"]
            assert recorded.get("isError") is not True and DEGRADED_KEY not in (recorded.get("_meta") or {})
            assert [(r[1], r[2]) for r in presence_rows(db)] == [(str(repo), "repo.status")]
        assert "presence not recorded" in session.stderr


async def test_an_unexpected_failure_outside_a_tool_is_a_coded_error(small, monkeypatch):
    """The server's own steps (argument checks, bookkeeping) failing still answer {error: {code}}."""
    _repo, db = small
    server = build_server(str(db))

    def broken(*args, **kwargs):
        raise RuntimeError("secret detail")

    monkeypatch.setattr(server, "_call_tool", broken)
    code, message = error_of(await call(server, "repo.status", {"repo": "alpha"}))
    assert code == "INTERNAL" and "secret" not in message


async def test_a_bookkeeping_bug_degrades_the_answer_and_does_not_replace_it(small, monkeypatch):
    _repo, db = small
    server = build_server(str(db))
    monkeypatch.setattr("mcp_bridge.server.record_bridge_activity",
                        lambda *a, **k: (_ for _ in ()).throw(KeyError("boom")))
    result = await call(server, "repo.status", {"repo": "alpha"})
    assert ok(result)["untracked"] == ["new.txt"]
    assert result.meta[DEGRADED_KEY][0]["code"] == "INTERNAL"
