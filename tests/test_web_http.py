"""HTTP-level tests of the dashboard (Starlette TestClient over a real fleet): every API route and the
security model (bearer token, landing code and session, Host, Origin + CSRF, headers). Values are checked against the git CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from starlette.responses import PlainTextResponse
from starlette.routing import Mount
from starlette.testclient import TestClient

from fleet.errors import FleetError
from fleet.presence.store import replace_rows
from fleet.index.scan import refresh_repo
from fleet.views.digest import report
from fleet.views.render import environment, short
from fleet.views.report import render_html
from tests.fleets.gitbuild import commit_file, git
from web.app import create_app
from web.guards import CSP
from web.pages import templates
from tests.fleets.serving import fresh_code, sign_in
from web.security import cookie_name, is_loopback
from web.server import serve

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuv"
BASE = "http://127.0.0.1:8765"
ORIGIN = {"Origin": BASE}


@pytest.fixture
def client(dashboard_fleet, tmp_path: Path):
    app = create_app(tmp_path / "fleet.db", TOKEN)
    with TestClient(app, base_url=BASE, follow_redirects=False) as c:
        yield c


@pytest.fixture
def guard(empty_index: Path):
    """A client over an index with no repository: for what the guards refuse, or let through, before any
    repository is read."""
    with TestClient(create_app(empty_index, TOKEN), base_url=BASE, follow_redirects=False) as c:
        yield c


@pytest.fixture
def guard_login(guard: TestClient, empty_index: Path):
    """`guard` signed in through a landing code (the cookie is in its jar)."""
    return sign_in(guard, empty_index)


@pytest.fixture
def guarded(guard: TestClient, guard_login) -> TestClient:
    return guard


@pytest.fixture
def login(client: TestClient, tmp_path: Path):
    """The client signed in through a landing code (the cookie is in its jar)."""
    return sign_in(client, tmp_path / "fleet.db")


@pytest.fixture
def authed(client: TestClient, login) -> TestClient:
    return client


def _exchange(client: TestClient, code: str, next_path: str = "/", **headers: str):
    return client.post("/session", json={"code": code, "next": next_path},
                       headers={"Origin": BASE, "Accept": "application/json", **headers})


def _landing_next(html: str) -> str:
    """The `next` a landing page's form sends back (HTML-unescaped, as the browser sends it)."""
    from html import unescape

    return unescape(re.search(r'name=next value="([^"]*)"', html).group(1))


def repo_id(index, path: Path) -> int:
    return index.repo(str(path))["id"]


# --- security ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/repos/1", "/agents", "/digest", "/api/repos", "/api/repos/1", "/api/radar",
                                  "/api/presence", "/api/digest", "/api/events", "/fragments/queue",
                                  "/fragments/agents", "/fragments/digest"])
def test_every_page_and_api_needs_the_token(guard: TestClient, path: str) -> None:
    r = guard.get(path)
    assert r.status_code == 401
    r = guard.get(path, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401


def test_api_refusal_is_structured_json(guard: TestClient) -> None:
    r = guard.get("/api/repos")
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["code"] == "UNAUTHORIZED"


def test_the_mcp_token_as_a_link_opens_no_session(guard: TestClient) -> None:
    """`?token=<bearer token>` used to set the cookie: now it is an ordinary unauthenticated request."""
    r = guard.get(f"/?q=dirty&token={TOKEN}", headers={"Accept": "text/html"})
    assert r.status_code == 401 and "set-cookie" not in r.headers
    assert "fleetdeck dashboard link" in r.text and r.headers["content-type"].startswith("text/html")


def test_a_landing_code_gives_a_page_then_a_strict_httponly_random_cookie(guard: TestClient, empty_index) -> None:
    code = fresh_code(empty_index)
    page = guard.get(f"/?q=dirty&code={code}")
    assert page.status_code == 200 and "set-cookie" not in page.headers  # a GET spends nothing
    assert _landing_next(page.text) == "/?q=dirty" and 'action="/session"' in page.text
    r = _exchange(guard, code, "/?q=dirty")
    assert r.status_code == 200 and r.json()["next"] == "/?q=dirty"
    key = r.json()["decision_key"]
    cookie = r.headers["set-cookie"]
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    assert cookie.startswith(f"{cookie_name(8765)}=") and len(value) >= 40
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert TOKEN not in cookie and key not in cookie and value != key
    assert guard.get("/").status_code == 200
    assert key not in guard.get("/").text  # the decision key is in no page
    assert _exchange(guard, code).status_code == 401  # single use


def test_a_wrong_code_or_a_foreign_origin_opens_nothing(guard: TestClient, empty_index) -> None:
    r = _exchange(guard, "nope")
    assert r.status_code == 401 and r.json()["error"]["code"] == "LANDING_REFUSED"
    assert "set-cookie" not in r.headers
    code = fresh_code(empty_index)
    r = _exchange(guard, code, Origin="http://127.0.0.1:9999")  # a page on another port posting it
    assert r.status_code == 403 and "set-cookie" not in r.headers
    assert _exchange(guard, code).status_code == 200  # the refused post did not spend it


def test_the_redirect_never_leaves_this_server(guard: TestClient, empty_index) -> None:
    page = guard.get(f"//evil.example/?code={fresh_code(empty_index)}")
    assert _landing_next(page.text).startswith("/") and not _landing_next(page.text).startswith("//")
    r = guard.post("/session", data={"code": fresh_code(empty_index), "next": "//evil.example/"},
                   headers={"Origin": BASE})
    assert r.status_code == 303  # the page's form without script: a cookie and the page, no decision key
    assert r.headers["location"] == "/evil.example/" and "set-cookie" in r.headers


def test_bearer_token_works_for_the_api(guard: TestClient) -> None:
    r = guard.get("/api/repos", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "10.0.0.5"])
def test_a_foreign_host_is_refused_even_with_the_token(guard: TestClient, host: str) -> None:
    r = guard.get("/api/repos", headers={"Host": host, "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 421
    assert r.json()["error"]["code"] == "HOST_REFUSED"


@pytest.mark.parametrize("host", ["localhost:8765", "127.0.0.1:8765", "[::1]:8765"])
def test_loopback_hosts_are_accepted(guard: TestClient, host: str) -> None:
    r = guard.get("/api/repos", headers={"Host": host, "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200


def test_security_headers_on_pages_and_api(guarded: TestClient) -> None:
    for path in ("/", "/api/radar", "/static/app.js"):
        r = guarded.get(path)
        assert r.status_code == 200, path
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["x-content-type-options"] == "nosniff"


def test_pages_carry_no_inline_script(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    for path in ("/", f"/repos/{repo_id(index, repos['conflicted'])}", "/digest?since=0"):
        html = authed.get(path).text
        assert "<script>" not in html and " on" + "click=" not in html
        assert '<script src="/static/app.js" defer></script>' in html


def test_post_without_csrf_is_refused(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    rid = repo_id(index, repos["dirty"])
    r = authed.post(f"/api/repos/{rid}/refresh", headers=ORIGIN)
    assert r.status_code == 403 and r.json()["error"]["code"] == "CSRF_REFUSED"


def test_post_with_a_wrong_csrf_or_foreign_origin_or_no_origin_is_refused(authed: TestClient, login,
                                                                         dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    rid = repo_id(index, repos["dirty"])
    good = login.csrf
    assert authed.post(f"/api/repos/{rid}/refresh", headers={**ORIGIN, "X-CSRF-Token": "x" * 64}).status_code == 403
    r = authed.post(f"/api/repos/{rid}/refresh", headers={"Origin": "http://evil.example", "X-CSRF-Token": good})
    assert r.status_code == 403 and r.json()["error"]["code"] == "ORIGIN_REFUSED"
    assert authed.post(f"/api/repos/{rid}/refresh", headers={"X-CSRF-Token": good}).status_code == 403


def test_post_with_origin_and_csrf_header_refreshes_the_repo(authed: TestClient, login, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    rid = repo_id(index, repos["clean"])
    new_head = commit_file(repos["clean"], "later.txt", "later\n")
    r = authed.post(f"/api/repos/{rid}/refresh",
                    headers={**login.form, "Accept": "application/json"})
    assert r.status_code == 200 and r.json()["id"] == rid
    assert authed.get(f"/api/repos/{rid}").json()["repo"]["head"] == new_head


def test_plain_html_form_post_with_csrf_field_works_without_javascript(authed: TestClient, login,
                                                                      dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    rid = repo_id(index, repos["clean"])
    r = authed.post(f"/api/repos/{rid}/refresh", data={"csrf_token": login.csrf}, headers=ORIGIN)
    assert r.status_code == 303 and r.headers["location"] == f"/repos/{rid}"


def test_bearer_clients_post_without_csrf(client: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    rid = repo_id(index, repos["clean"])
    r = client.post(f"/api/repos/{rid}/refresh", headers={"Authorization": f"Bearer {TOKEN}",
                                                          "Accept": "application/json"})
    assert r.status_code == 200


# --- API ----------------------------------------------------------------------------------------------------

def test_api_repos_matches_git(authed: TestClient, dashboard_fleet) -> None:
    _, repos = dashboard_fleet
    records = {Path(r["path"]).name: r for r in authed.get("/api/repos").json()}
    assert set(records) == {"conflicted", "dirty", "clean", "tracking"}
    for name in records:
        repo = repos[name]
        assert records[name]["head"] == git(repo, "rev-parse", "HEAD").strip()
        assert records[name]["branch"] == git(repo, "branch", "--show-current").strip()
    behind, ahead = git(repos["tracking"], "rev-list", "--left-right", "--count", "@{u}...HEAD").split()
    assert (records["tracking"]["ahead"], records["tracking"]["behind"]) == (int(ahead), int(behind))


def test_api_repo_detail_matches_git(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    data = authed.get(f"/api/repos/{repo_id(index, repos['tracking'])}").json()
    assert data["repo"]["name"] == "tracking"
    assert [c["sha"] for c in data["commits"]] == git(repos["tracking"], "log", "--format=%H", "-n", "15").split()
    main = next(b for b in data["repo"]["branches"] if b["name"] == "main")
    assert (main["ahead"], main["behind"], main["current"]) == (2, 1, True)
    assert data["reasons"][0]["code"] in ("predicted_conflict", "diverged")
    assert data["timeline"] and all("rewrote" in e and "recoverable" in e for e in data["timeline"])


def test_api_repo_unknown_id_is_a_structured_404(authed: TestClient) -> None:
    r = authed.get("/api/repos/9999")
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    assert authed.get("/repos/9999").status_code == 404


def test_api_radar_ranks_conflict_then_diverged_then_dirty_then_clean(authed: TestClient) -> None:
    data = authed.get("/api/radar").json()
    assert [e["name"] for e in data["entries"]] == ["conflicted", "tracking", "dirty", "clean"]
    assert data["counts"]["conflicts"] == 1 and data["counts"]["diverged"] == 1 and data["counts"]["repos"] == 4
    assert data["freshness"]["watcher"]["state"] == "absent"


def test_api_radar_filters_and_pages(authed: TestClient, dashboard_fleet) -> None:
    _, repos = dashboard_fleet
    assert [e["name"] for e in authed.get("/api/radar?reason=conflict").json()["entries"]] == ["conflicted"]
    assert [e["name"] for e in authed.get("/api/radar?q=uncommitted").json()["entries"]] == ["dirty"]
    assert "clean" not in [e["name"] for e in authed.get("/api/radar?attention=1").json()["entries"]]
    assert authed.get("/api/radar?root=/nowhere").json()["matched"] == 0
    root = str(repos["root"].resolve())
    assert authed.get(f"/api/radar?root={root}").json()["matched"] == 4
    page = authed.get("/api/radar?per_page=1&page=2").json()
    assert [e["name"] for e in page["entries"]] == ["tracking"] and page["pages"] == 4
    assert authed.get("/api/radar?reason=bogus&page=-3&per_page=x").json()["matched"] == 4


def test_api_events_pushes_changed_repo_ids(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    rid = repo_id(index, repos["clean"])
    with authed.stream("GET", "/api/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        first = _next_event(lines)
        assert first[0] == "status" and "generation" in first[1]
        commit_file(repos["clean"], "pushed.txt", "x\n")
        refresh_repo(index, str(repos["clean"].resolve()))
        event, data = _next_event(lines)
        assert event == "change" and data["ids"] == [rid]


def _next_event(lines) -> tuple[str, dict]:
    event = None
    for line in lines:
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and event in ("status", "change"):
            return event, json.loads(line.split(":", 1)[1])
    raise AssertionError("stream ended")


# --- pages -------------------------------------------------------------------------------------------------

def test_queue_page_lists_repos_in_rank_order_with_filters_kept(authed: TestClient) -> None:
    html = authed.get("/?q=c").text
    link = 'class="repo-link">{}<'.format
    assert html.index(link("conflicted")) < html.index(link("clean"))
    assert 'value="c"' in html  # the search box keeps what was typed
    frag = authed.get("/fragments/queue?reason=local_changes").text
    assert link("dirty") in frag and link("conflicted") not in frag and "<html" not in frag


def test_repo_page_shows_operation_and_next_step(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    html = authed.get(f"/repos/{repo_id(index, repos['conflicted'])}").text
    assert "Merge in progress" in html and "git merge --abort" in html
    assert 'name="csrf_token"' in html


# --- agents -------------------------------------------------------------------------------------------------

def _present(index, repo: Path) -> None:
    """Two agents on the same file of one repo, stored the way `refresh_presence` stores its rows."""
    path = str(repo.resolve())
    record = index.repo(path)
    base = {"repo": path, "repo_id": record["id"], "repo_name": record["name"], "branch": "main", "tool": None,
            "pid": None, "pids": [], "last_activity": "2026-01-01T00:00:00+00:00",
            "refreshed_at": "2026-01-01T00:00:05+00:00"}
    replace_rows(index, [{**base, "agent": "claude-code", "state": "working", "sources": ["claude"],
                          "files": ["README.md"]},
                         {**base, "agent": "codex", "state": "recent", "sources": ["codex"],
                          "files": ["README.md", "new.txt"]}])


def test_api_presence_mirrors_the_cli_shape_with_collisions(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    assert authed.get("/api/presence").json()["agents"] == []
    _present(index, repos["dirty"])
    data = authed.get("/api/presence").json()
    assert [(a["agent"], a["state"]) for a in data["agents"]] == [("claude-code", "working"), ("codex", "recent")]
    assert data["collisions"][0]["kind"] == "overlapping_files" and data["collisions"][0]["paths"] == ["README.md"]
    assert data["freshness"]["presence"] == {"agents": 2, "refreshed_at": "2026-01-01T00:00:05+00:00"}


def test_agents_show_on_the_agents_page_the_queue_and_the_repo_page(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    _present(index, repos["dirty"])
    page = authed.get("/agents").text
    assert "Collisions" in page and "claude-code, codex touched the same files: README.md" in page
    queue = authed.get("/api/radar?agent=codex").json()
    assert [e["name"] for e in queue["entries"]] == ["dirty"] and queue["counts"]["agents_working"] == 1
    assert 'class="agent agent-working">claude-code<' in authed.get("/").text
    detail = authed.get(f"/api/repos/{repo_id(index, repos['dirty'])}").json()
    assert [a["agent"] for a in detail["agents"]] == ["claude-code", "codex"]


# --- hostile input (issue 10) -------------------------------------------------------------------------------

def _where_a_browser_goes(location: str) -> str:
    """The host a browser lands on for this Location, read the way browsers read it (WHATWG URL: tab, CR
    and LF removed anywhere, a backslash is a slash in http URLs)."""
    cleaned = location.translate({9: None, 10: None, 13: None}).replace("\\", "/")
    return urlsplit(urljoin(BASE + "/", cleaned)).netloc


@pytest.mark.parametrize("path", ["//evil.example/", "/%5Cevil.example", "/%5C/evil.example", "/%09/evil.example",
                                  "/%2F%2Fevil.example", "/%5C%5Cevil.example/x", "/%20//evil.example",
                                  "/%0D%0ASet-Cookie:%20injected=1", "/repos/1%0D%0A%0D%0A<h1>x"])
def test_the_landing_redirect_is_a_path_on_this_server(guard: TestClient, path: str, empty_index) -> None:
    """The landing page's `next` and the exchange's answer, whether the hostile part came in the link's
    path or in the `next` the exchange is sent (rebuilt by the server either way)."""
    db = empty_index
    page = guard.get(f"{path}?q=a%0D%0Ab&code={fresh_code(db)}")
    for sent in (_landing_next(page.text), path + "?q=a%0D%0Ab"):
        r = guard.post("/session", data={"code": fresh_code(db), "next": sent}, headers={"Origin": BASE})
        assert r.status_code == 303
        location = r.headers["location"]
        assert location == _exchange(guard, fresh_code(db), sent).json()["next"]
        assert location.startswith("/") and location[1:2] not in ("/", "\\")
        assert not any(ord(ch) < 0x21 or ch == "\\" for ch in location), location
        assert _where_a_browser_goes(location) == "127.0.0.1:8765"
        assert "injected" not in r.headers.get("set-cookie", "").split(";")[0]


def test_the_landing_keeps_the_page_and_its_query(guard: TestClient, empty_index) -> None:
    page = guard.get(f"/digest?since=7d&repos=a%20b&code={fresh_code(empty_index)}")
    assert _landing_next(page.text) == "/digest?since=7d&repos=a+b"


def test_the_cookie_is_named_for_the_port_and_works_only_there(empty_index: Path) -> None:
    app = create_app(empty_index, TOKEN)
    with TestClient(app, base_url="http://127.0.0.1:8766", follow_redirects=False) as other:
        sign_in(other, empty_index)
        value = other.cookies.get(cookie_name(8766))
        assert value and other.get("/api/radar").status_code == 200
        # the same session id sent to another port's cookie name: refused
        other.cookies.clear()
        other.cookies.set(cookie_name(8765), value)
        assert other.get("/api/radar").status_code == 401
    with TestClient(create_app(empty_index, TOKEN), base_url=BASE) as restarted:
        restarted.cookies.set(cookie_name(8766), value)  # another run (a restart) knows no session of this one
        assert restarted.get("/api/radar").status_code == 401


def test_the_cookie_opens_neither_the_bearer_door_nor_mcp(guarded: TestClient, guard_login) -> None:
    value = guarded.cookies.get(cookie_name(8765))
    assert value != TOKEN
    assert guarded.get("/api/radar").status_code == 200
    bare = TestClient(guarded.app, base_url=BASE)
    assert bare.get("/api/radar", headers={"Authorization": f"Bearer {value}"}).status_code == 401
    r = guarded.post("/mcp", json={}, headers=guard_login.form)
    assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED"
    assert bare.get("/mcp", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404  # no MCP mounted here


@pytest.mark.parametrize("foreign", ['foo="bar', "x[]=1", '{"a":1}', "a=b c", "=novalue", ";;", "a=b\\"])
def test_a_foreign_unparsable_cookie_before_ours_is_ignored(guard: TestClient, foreign: str, empty_index) -> None:
    sign_in(guard, empty_index)
    ours = f"{cookie_name(8765)}={guard.cookies.get(cookie_name(8765))}"
    guard.cookies.clear()
    r = guard.get("/api/radar", headers={"Cookie": f"{foreign}; {ours}"})
    assert r.status_code == 200
    assert guard.get("/api/radar", headers={"Cookie": foreign}).status_code == 401


@pytest.mark.parametrize("path", ["/repos/{n}", "/fragments/repos/{n}", "/api/repos/{n}"])
@pytest.mark.parametrize("n", [2**63, 2**64 + 7, 10**40])
def test_a_huge_repo_id_is_a_404_not_a_500(guarded: TestClient, path: str, n: int) -> None:
    r = guarded.get(path.format(n=n))
    assert r.status_code == 404
    if path.startswith("/api/"):
        assert r.json()["error"]["code"] == "NOT_FOUND"


def test_refreshing_a_huge_repo_id_is_a_404(guard: TestClient) -> None:
    r = guard.post(f"/api/repos/{2**64}/refresh", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.attacker.example", False), ("127.0.0.1.evil.example", False), ("127.evil", False), ("0.0.0.0", False),
    ("10.0.0.5", False), ("localhost.evil.example", False), ("", False),
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LOCALHOST", True)])
def test_is_loopback_parses_the_address(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_serve_refuses_a_host_name_that_only_looks_loopback(tmp_path: Path) -> None:
    with pytest.raises(FleetError) as caught:
        serve(tmp_path / "fleet.db", host="127.attacker.example", port=0)
    assert caught.value.code == "BAD_ARGUMENT" and "--allow-remote" in caught.value.message


# --- structure: every route behind the guards, one environment ------------------------------------------------

def test_a_mounted_app_is_behind_every_guard(empty_index: Path) -> None:
    """What `serve` mounts beside the dashboard (the MCP bridge) passes the same Host, token and CSRF checks."""
    secret = Mount("/extra", app=PlainTextResponse("mounted"))
    app = create_app(empty_index, TOKEN, mounts=[secret])
    with TestClient(app, base_url=BASE) as c:
        refused = c.get("/extra")
        assert refused.status_code == 401 and refused.headers["x-frame-options"] == "DENY"
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert c.get("/extra", headers={**bearer, "Host": "evil.example"}).status_code == 421
        assert c.get("/extra", headers=bearer).text == "mounted"
        sign_in(c, empty_index)
        assert c.post("/extra", headers=ORIGIN).status_code == 403  # cookie without CSRF token
        assert c.get("/extra").headers["content-security-policy"] == CSP


def test_templates_link_by_route_name(authed: TestClient, login, dashboard_fleet) -> None:
    """Links come from `url_for` and are paths on this server; each one answers."""
    index, repos = dashboard_fleet
    html = authed.get(f"/repos/{repo_id(index, repos['dirty'])}").text
    links = set(re.findall(r'(?:href|action|data-fragment|data-events|data-home)="([^"#?]+)', html))
    assert {"/", "/digest", "/agents", "/api/events", "/static/app.css"} <= links
    assert all(link.startswith("/") and not link.startswith("//") for link in links)
    for link in links - {"/api/events"}:
        method = authed.post if link.endswith("/refresh") else authed.get
        headers = login.form if method == authed.post else {}
        assert method(link, headers=headers).status_code in (200, 303), link


def test_the_dashboard_and_the_html_digest_share_one_environment(authed: TestClient, dashboard_fleet) -> None:
    index, _ = dashboard_fleet
    assert templates.env is environment()
    data = report(index, "2025-01-01T00:00:00+00:00")
    standalone = render_html(data)
    page = authed.get("/digest", params={"since": "custom", "custom": "2025-01-01T00:00:00+00:00"}).text
    for event in data["digest"]["events"]:
        assert f"{short(event['old_sha'])} → {short(event['new_sha'])}" in standalone
        assert f">{short(event['new_sha'])}</code>" in page


def test_the_agents_page_says_which_presence_switches_are_off(authed: TestClient, tmp_path, monkeypatch) -> None:
    settings = tmp_path / "settings.toml"
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    assert "Turned off" not in authed.get("/agents").text
    settings.write_text("[presence]\nread_agent_sessions = false\nrecord_mcp_clients = false\n")
    page = authed.get("/agents").text
    assert "Turned off in the settings file: reading agents' session files" in page
    assert "recording MCP clients' presence" in page
    assert authed.get("/api/presence").json()["switches"] == {"read_agent_sessions": False,
                                                              "record_mcp_clients": False, "error": None}
    settings.write_text("[presence\n")
    assert "The settings file does not parse" in authed.get("/fragments/agents").text


def test_repo_page_names_the_conflicted_and_changed_files(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    page = authed.get(f"/repos/{repo_id(index, repos['conflicted'])}").text
    conflicted = page.split('data-files="conflicted"', 1)[1].split("</ul>", 1)[0]
    assert git(repos["conflicted"], "diff", "--name-only", "--diff-filter=U").split() == ["f.txt"]
    assert "<code>f.txt</code>" in conflicted and "both added" in conflicted  # AA: both branches created it
    data = authed.get(f"/api/repos/{repo_id(index, repos['dirty'])}").json()["files"]
    assert [f["path"] for f in data["unstaged"]] == git(repos["dirty"], "diff", "--name-only").split()
    assert data["untracked"] == git(repos["dirty"], "ls-files", "--others", "--exclude-standard").split()
