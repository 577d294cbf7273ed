"""A warm start: `fleetdeck serve` over an index that already holds the fleet answers from the index at once,
then re-checks every repo behind the first page, with its progress on the page and in the event stream,
and says when it is done. The fleet is real (git repos in a temp dir); the server is the real CLI."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from fleet.index.recheck import RECHECK_DELAY_ENV
from fleet.index.scan import scan
from fleet.index.store import open_index
from tests.fleets.dashboard_fleet import build_fleet
from tests.fleets.gitbuild import commit_file, git
from tests.fleets.serving import Server, wait_for
from tests.fleets.warm import COPIES, scanned_fleet


def watcher_meta(index) -> dict:
    return index.meta("watcher") or {}


@pytest.fixture(scope="module")
def warm_fleet(tmp_path_factory) -> dict:
    return scanned_fleet(tmp_path_factory.mktemp("warm"))


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def banner(html: str) -> str:
    found = re.search(r'<div class="callout reverify" id="reverify" role="status" aria-live="polite"[^>]*>(.*?)</div>',
                      html, re.S)
    assert found, "the page has no re-check banner region"
    return text(found.group(1))


@pytest.mark.slow
def test_serve_answers_from_the_index_first_and_rechecks_behind_it(warm_fleet, monkeypatch) -> None:
    db, total = warm_fleet["db"], warm_fleet["total"]
    assert total == 4 + 2 * COPIES
    # Each of the re-check's chunks (`CHUNK` repos) waits a little first, through the real path: the pass then
    # lasts several of the event stream's polls however fast the machine reads, so its progress is seen moving
    # (unpaced, a quiet machine could read every chunk between two polls: a stream of [0, total]).
    monkeypatch.setenv(RECHECK_DELAY_ENV, "0.3")
    started = time.monotonic()
    server = Server(db, [])
    try:
        page = httpx.get(server.base + "/", headers=server.auth, timeout=30)
        first_page_s = time.monotonic() - started
        with open_index(db) as index:
            progress = watcher_meta(index)["reverify"]
            # The first page came before the re-check finished, and says so with the figures' age.
            assert progress["finished_at"] is None and progress["total"] == total
            assert page.status_code == 200
            shown = banner(page.text)
            assert re.fullmatch(rf"Re-checking \d+ of {total} repos — figures shown are from .+; rows update as "
                                r"each repo is read\.", shown), shown
            assert f'datetime="{warm_fleet["indexed_at"]}"' in page.text
            # ... from the last known state: the commit made while nothing watched is not in it yet.
            assert index.repo(str(warm_fleet["repos"]["clean"].resolve()))["head"] != warm_fleet["head"]

            seen = stream_progress(server, total)
            assert len(set(seen)) >= 3 and seen == sorted(seen) and seen[-1] == total, seen

            final = watcher_meta(index)["reverify"]
            assert final["done"] == total and final["finished_at"] is not None
            done = httpx.get(server.base + "/", headers=server.auth).text
            assert banner(done).startswith(f"Re-check finished: all {total} repos read again")
            assert "the figures are current" in banner(done)
            assert index.repo(str(warm_fleet["repos"]["clean"].resolve()))["head"] == warm_fleet["head"]
        assert first_page_s < 10  # generous for a loaded machine: the benchmark holds the real target
    finally:
        server.stop()
    rest = server.proc.stdout.read()
    assert f"serving the last known state of {total} repositories" in rest
    assert "re-checking them in the background" in rest


def stream_progress(server: Server, total: int, timeout: float = 120) -> list[int]:
    """The re-check's `done` counts as the event stream's status events carry them, until it finishes."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    with httpx.stream("GET", server.base + "/api/events", headers=server.auth, timeout=timeout) as stream:
        event = None
        for line in stream.iter_lines():
            if time.monotonic() > deadline:
                raise AssertionError(f"the re-check did not finish within {timeout}s: {seen}")
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "status":
                progress = json.loads(line.split(":", 1)[1])["watcher"]["reverify"]
                if progress:
                    seen.append(progress["done"])
                    if not progress["running"]:
                        assert progress["done"] == total
                        return seen
    raise AssertionError(f"the stream ended before the re-check finished: {seen}")


def scanned_dashboard_fleet(base: Path) -> tuple[dict, Path]:
    """The dashboard fleet (4 repos) and an index that holds it: a warm start of its own."""
    repos = build_fleet(base)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(repos["root"])])
    return repos, db


@pytest.mark.slow
def test_no_watch_serves_at_once_rechecks_once_and_says_it_is_not_kept_fresh(tmp_path: Path) -> None:
    """`--no-watch`: the last known state at once, one re-check behind it (the commit made while nothing ran
    shows up), then nothing more is read, and the page says so."""
    repos, db = scanned_dashboard_fleet(tmp_path)
    clean = repos["clean"].resolve()
    commit_file(clean, "later.txt", "made while nothing ran\n")
    server = Server(db, [], ["--no-watch"])
    try:
        assert httpx.get(server.base + "/", headers=server.auth).status_code == 200
        with open_index(db) as index:
            def rechecked() -> dict | None:
                meta = watcher_meta(index)
                return meta if meta.get("pid") == server.proc.pid and meta.get("stopped_at") else None
            meta = wait_for(rechecked, "the one re-check", 60)
            assert meta["mode"] == "once" and meta["reverify"]["done"] == meta["reverify"]["total"] == 4
            assert index.repo(str(clean))["head"] == git(clean, "rev-parse", "HEAD").strip()
            page = text(httpx.get(server.base + "/", headers=server.auth).text)
            assert "not kept fresh ( serve --no-watch ): showing the fleet as re-checked at start" in page, page
            commit_file(clean, "unseen.txt", "made after the re-check\n")
            time.sleep(2)  # a watcher would have stored it within a second
            assert index.repo(str(clean))["head"] != git(clean, "rev-parse", "HEAD").strip()
    finally:
        server.stop()


@pytest.mark.slow
async def test_mcp_asked_during_the_recheck_is_built_then_and_answers(tmp_path: Path, monkeypatch) -> None:
    """The MCP bridge waits for the re-check to be over, unless `/mcp` is asked for first: then it is built
    for that request, which gets its answer (the re-check goes on). The re-check is held back through the
    real path until the answer came, so it is surely still running when `/mcp` is asked."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    _repos, db = scanned_dashboard_fleet(tmp_path)
    release = tmp_path / "the re-check may go on"
    monkeypatch.setenv(RECHECK_DELAY_ENV, f"60:{release}")
    server = Server(db, [])
    try:
        with open_index(db) as index:
            wait_for(lambda: watcher_meta(index).get("pid") == server.proc.pid, "the watcher's claim")
            assert watcher_meta(index)["reverify"]["finished_at"] is None
            async with httpx2.AsyncClient(headers=server.auth, timeout=60) as http:
                async with Client(streamable_http_client(server.base + "/mcp", http_client=http)) as client:
                    result = await client.call_tool("fleet.radar", {})
            assert not result.is_error
            assert "dirty" in {e["name"] for e in result.structured_content["entries"]}
            assert watcher_meta(index)["reverify"]["finished_at"] is None  # answered during the re-check
            release.touch()
            wait_for(lambda: watcher_meta(index)["reverify"]["finished_at"], "the re-check's end", 120)
        code, _took, err = server.signal_and_wait()
        assert code == 0 and "Traceback" not in err, err
    finally:
        release.touch()
        server.stop()
