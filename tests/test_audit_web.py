"""The dashboard's audit page and banner: recent entries with filters and repo names, the chain's background
verification ("verified up to seq N"), and "audit off" / "audit degraded" on every page."""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Iterator

import pytest
from starlette.testclient import TestClient

from fleet import audit
from fleet.audit.monitor import checking
from tests.fleets.serving import sign_in
from web.app import create_app

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuv"
BASE = "http://127.0.0.1:8765"


def client_for(db: Path, services=()) -> TestClient:
    return TestClient(create_app(db, TOKEN, services=services), base_url=BASE, follow_redirects=False)


@contextlib.contextmanager
def login(client: TestClient, db: Path) -> Iterator[TestClient]:
    """The client running (its app's lifespan) and signed in through a landing code."""
    with client:
        sign_in(client, db)
        yield client


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.mark.slow
def test_audit_page_lists_entries_with_filters_and_the_chain_status(dashboard_fleet, tmp_path):
    index, repos = dashboard_fleet
    db = tmp_path / "fleet.db"
    log = audit.setup(db)
    path = repos["dirty"]
    row = index.repo(str(path))
    log.record("tool_call", tool="repo.brief", agent="claude-code", repo_path=str(path), risk="read",
               duration_ms=2.5, summary="repo.brief ok")
    log.record("tool_call", tool="fleet.radar", agent="codex", risk="read", result="ok", summary="fleet.radar ok")
    log.record("tool_call", tool="repo.brief", agent="codex", repo_path="/not/indexed", result="REPO_NOT_IN_FLEET",
               summary="repo.brief REPO_NOT_IN_FLEET")
    with login(client_for(db, [partial(checking, db)]), db) as client:
        deadline = time.monotonic() + 20
        while "Verified up to seq 3" not in client.get("/audit").text and time.monotonic() < deadline:
            time.sleep(0.05)
        page = client.get("/audit")
        assert page.status_code == 200
        shown = text(page.text)
        assert "Verified up to seq 3" in shown and "cannot show that entries after it were not cut off" in shown
        assert f'href="/repos/{row["id"]}">{row["name"]}</a>' in page.text
        assert shown.index("REPO_NOT_IN_FLEET") < shown.index("fleet.radar") < shown.index("claude-code")
        assert "not in the index" in shown and "2.5 ms" in shown
        only = text(client.get("/audit", params={"repo": row["name"]}).text)
        assert "claude-code" in only and "fleet.radar" not in only
        codex = text(client.get("/audit", params={"agent": "codex"}).text)
        assert "fleet.radar" in codex and "claude-code" not in codex
        failed = client.get("/api/audit", params={"result": "REPO_NOT_IN_FLEET"}).json()
        assert [e["seq"] for e in failed["entries"]] == [3] and failed["chain"]["state"] == "intact"
        bad = client.get("/audit", params={"repo": "no-such-repo"})
        assert bad.status_code == 200 and "callout sev-critical" in bad.text and "<table" not in bad.text
        assert "Audit degraded" not in page.text and "Audit off" not in page.text


def test_banner_on_every_page_when_the_audit_is_off_or_degraded(dashboard_fleet, tmp_path, monkeypatch):
    db = tmp_path / "fleet.db"
    monkeypatch.setenv("FLEETDECK_AUDIT", "off")
    audit.setup(db)
    with login(client_for(db), db) as client:
        for url in ("/", "/agents", "/digest", "/audit"):
            assert "Audit off:" in client.get(url).text, url
        assert "tool calls are not recorded" in text(client.get("/audit").text)
    monkeypatch.delenv("FLEETDECK_AUDIT")
    log = audit.setup(db)
    log.record("tool_call", summary="fine")
    shutil.rmtree(log.dir)
    log.dir.write_text("not a folder")
    assert log.record("tool_call", summary="lost") is None
    with login(client_for(db), db) as client:
        for url in ("/", "/agents", "/audit"):
            assert "Audit degraded:" in client.get(url).text, url
        assert "1 entries could not be written" in text(client.get("/").text)
    log.dir.unlink()
    log.dir.mkdir(mode=0o700)                                   # the storage is back
    assert log.record("tool_call", summary="back") is not None
    with login(client_for(db), db) as client:
        assert "Audit degraded" not in client.get("/").text
