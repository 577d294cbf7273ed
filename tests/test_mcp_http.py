"""MCP over streamable HTTP: uvicorn on a free port, the official client, both protocol eras, a bearer token."""

from __future__ import annotations

import socket
import threading
import time

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_bridge.http import standalone_app
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import git, init_repo
from fleet.index.store import open_index
from fleet.index.scan import scan

TOKEN = "s3cret-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("mcphttp")
    repo = init_repo(base / "fleet" / "alpha", commits=2)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(base / "fleet")])
    port = free_port()
    config = uvicorn.Config(standalone_app(build_server(str(db)), TOKEN), host="127.0.0.1", port=port,
                            log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", repo
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_both_eras_with_token(served, mode):
    url, repo = served
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"fleet.radar", "repo.brief"} <= names
            result = await client.call_tool("repo.brief", {"repo": "alpha"})
            assert result.is_error is False
            assert result.structured_content["head"]["sha"] == git(repo, "rev-parse", "--short=12", "HEAD").strip()
            bad = await client.call_tool("repo.brief", {"repo": "/etc"})
            assert bad.is_error and bad.structured_content["error"]["code"] == "REPO_NOT_IN_FLEET"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}])
def test_http_refuses_missing_or_wrong_token(served, headers):
    url, _ = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}}
    r = httpx2.post(url, json=body, headers={**headers, "Accept": "application/json, text/event-stream"})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "UNAUTHORIZED"
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_http_refuses_foreign_host(served):
    url, _ = served
    r = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example:80",
                             "Accept": "application/json, text/event-stream"})
    assert r.status_code in (403, 421)
