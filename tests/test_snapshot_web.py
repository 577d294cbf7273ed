"""The safety net on the dashboard (Starlette TestClient over a real fleet, real git, real SQLite): the
Timeline on the repo page, a snapshot's diff as a page and as text (every control, bidi and zero-width
character visible), the confirmation naming what a restore would overwrite, and the restore itself — a
person's act with exactly the decision rules of approving a proposal."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from fleet.index.store import open_index
from fleet.ops.approver import approver_token
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take
from fleet.snapshot.view import STATUS_KEY
from tests.fleets.gitbuild import git, write
from tests.fleets.ops_fleet import build
from tests.fleets.serving import sign_in
from web.app import create_app

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuv"
BASE = "http://127.0.0.1:8765"
ORIGIN = {"Origin": BASE}
BEARER = {"Authorization": f"Bearer {TOKEN}"}
HOSTILE = "evil \x1b]52;c;aGk=\x07 \u202efdp.sh \u200bhidden <script>alert(1)</script>\n"


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    """work: README.md edited with hostile text, snapshotted, then `git reset --hard` + `git clean -f`: the
    edit and notes.txt are discarded (the second snapshot records it)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    built = build(tmp_path)
    work = built["work"]
    tree = WorkTree(str(work), str(work / ".git"), str(work / ".git"))
    write(work / "README.md", HOSTILE)
    built["kept"] = take(tree, built["db"], "hook:claude-code", agents=["claude-code"], command="git reset --hard")
    git(work, "reset", "-q", "--hard")
    git(work, "clean", "-q", "-f")
    built["found"] = take(tree, built["db"], "sweep", agents=["claude-code"])
    assert built["found"]["discarded"]["count"] == 2
    built["repo_id"] = built["index"].repo(str(work))["id"]
    yield built
    built["index"].close()


@pytest.fixture
def client(fleet):
    with TestClient(create_app(fleet["db"], TOKEN), base_url=BASE, follow_redirects=False) as c:
        yield c


@pytest.fixture
def login(client, fleet):
    return sign_in(client, fleet["db"])


@pytest.fixture
def browser(client, login):
    return client


def _base(fleet, snapshot: str) -> str:
    return f"/repos/{fleet['repo_id']}/snapshots/{snapshot}"


def test_the_repo_page_shows_the_timeline_with_the_discard(browser, fleet):
    page = browser.get(f"/repos/{fleet['repo_id']}").text
    assert 'id="snapshots"' in page and "Timeline of uncommitted work" in page
    assert page.count('data-key="snap-') == 2
    assert '<span class="badge sev-critical">discarded</span> 2 files' in page
    assert "<code>hook:claude-code</code>" in page and "git reset --hard" in page
    restore_lost = f"{_base(fleet, fleet['kept']['id'])}/restore"
    assert f'href="{restore_lost}"' in page and f'href="{restore_lost}?path=notes.txt"' in page


def test_the_timeline_says_when_the_net_is_off_and_names_trees_left_to_the_sweeps(browser, fleet, tmp_path,
                                                                                    monkeypatch):
    fleet["index"].set_meta(STATUS_KEY, {"enabled": True, "watched": [], "fallback": [str(fleet["work"])],
                                         "at": "2026-01-01T00:00:00Z"})
    page = browser.get(f"/repos/{fleet['repo_id']}").text
    assert 'id="watch-fallback"' in page and "<code>work</code>" in page and "Over the live-watch budget" in page
    settings = tmp_path / "settings.toml"
    settings.write_text("[snapshots]\nenabled = false\n")
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    page = browser.get(f"/repos/{fleet['repo_id']}").text
    assert 'id="safety-net-off"' in page and "The safety net is off" in page and 'data-key="snap-' not in page


def test_the_diff_shows_every_hidden_character(browser, fleet):
    """A stranger's bytes in a diff: ESC/OSC, a bidi override, a zero-width space and markup are shown, never
    run, reordered, hidden or parsed."""
    text = browser.get(f"{_base(fleet, fleet['found']['id'])}/diff")
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    assert "-evil \\x1b]52;c;aGk=\\x07 \\u202efdp.sh \\u200bhidden <script>" in text.text
    assert not any(c in text.text for c in "\x1b\x07\u202e\u200b")
    page = browser.get(_base(fleet, fleet["found"]["id"]))
    assert page.status_code == 200
    assert "\\x1b]52" in page.text and "\\u202e" in page.text and "\\u200b" in page.text
    assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert not any(c in page.text for c in "\x1b\x07\u202e\u200b")
    now = browser.get(f"{_base(fleet, fleet['kept']['id'])}?against=now").text
    assert "From this snapshot to the working tree now" in now and "README.md" in now and "notes.txt" in now
    assert browser.get(f"{_base(fleet, 'zz')}").status_code == 400
    assert browser.get(f"{_base(fleet, '0' * 40)}").status_code == 404
    assert browser.get(f"{_base(fleet, fleet['found']['id'])}/diff?path=../x").status_code == 400


def test_the_confirmation_names_what_it_would_overwrite_and_changes_nothing(browser, fleet):
    work = fleet["work"]
    write(work / "README.md", "newer work\n")
    before = (work / "README.md").read_bytes(), git(work, "status", "--porcelain", "-uall")
    page = browser.get(f"{_base(fleet, fleet['kept']['id'])}/restore")
    assert page.status_code == 200
    assert 'id="overwritten"' in page.text and "<li><code>README.md</code></li>" in page.text
    assert 'id="recreated"' in page.text and "<li><code>notes.txt</code></li>" in page.text
    assert "+newer work" not in page.text and "-newer work" in page.text   # the diff from now to the snapshot
    assert 'data-enhance="decide"' in page.text and 'name="expect"' in page.text
    assert ((work / "README.md").read_bytes(), git(work, "status", "--porcelain", "-uall")) == before


def _form(page: str) -> dict:
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))


def test_restore_all_brings_the_bytes_back(browser, login, fleet):
    """As the page's script sends it (the shared decision form: the tab's decision key as a header), then
    the page it goes to after (the form's data-done)."""
    work = fleet["work"]
    url = f"{_base(fleet, fleet['kept']['id'])}/restore"
    page = browser.get(url).text
    fields = _form(page)
    r = browser.post(url, data=fields, headers=login.decide)
    assert r.status_code == 200 and r.json()["snapshot"] == fleet["kept"]["id"], r.text
    done = re.search(r'data-done="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert (work / "README.md").read_bytes() == HOSTILE.encode()
    assert (work / "notes.txt").read_bytes() == b"untracked notes\n"
    assert git(work, "status", "--porcelain", "-uall") == " M README.md\n?? notes.txt\n"
    page = browser.get(done).text
    assert "Restored from snapshot" in page     # the present was snapshotted first: the one that found the discard
    assert f'just before is snapshot <code class="sha">{fleet["found"]["id"][:10]}</code>' in page


def test_restore_this_file_restores_only_it(browser, login, fleet):
    url = f"{_base(fleet, fleet['kept']['id'])}/restore"
    fields = _form(browser.get(url + "?path=notes.txt").text)
    assert fields["path"] == "notes.txt"
    assert browser.post(url, data=fields, headers=login.decide).status_code == 200
    assert (fleet["work"] / "notes.txt").exists() and git(fleet["work"], "diff", "--name-only") == ""


def test_a_change_after_the_confirmation_is_never_overwritten(browser, login, fleet):
    """The confirmation named what would be overwritten; work written after it is not what the person agreed
    to lose: STALE, nothing written."""
    url = f"{_base(fleet, fleet['kept']['id'])}/restore"
    fields = _form(browser.get(url).text)
    write(fleet["work"] / "README.md", "written after the confirmation\n")
    r = browser.post(url, data=fields, headers=login.decide)
    assert r.status_code == 409 and r.json()["error"]["code"] == "STALE"
    assert (fleet["work"] / "README.md").read_bytes() == b"written after the confirmation\n"
    assert not (fleet["work"] / "notes.txt").exists()


def test_restoring_takes_the_rules_of_approving(client, browser, login, fleet):
    """Each refused the way an approval is, the working tree untouched: the MCP bearer token (even with the
    session), the session without the tab's decision key (a plain form post, or a guessed key), no CSRF
    token, another Origin. The person's approver token (their own scripts) may restore."""
    url = f"{_base(fleet, fleet['kept']['id'])}/restore"
    api = f"/api{url}"
    fields = _form(browser.get(url).text)
    untouched = lambda: not (fleet["work"] / "notes.txt").exists()   # noqa: E731
    r = client.post(api, headers={**BEARER, "Accept": "application/json"}, json={})
    assert r.status_code == 403 and r.json()["error"]["code"] == "BEARER_CANNOT_DECIDE" and untouched()
    for extra in ({}, {"X-Fleetdeck-Decision": "guess"}):
        r = browser.post(url, data=fields, headers={**login.form, "Accept": "application/json", **extra})
        assert r.status_code == 403 and r.json()["error"]["code"] == "DECISION_KEY_REQUIRED" and untouched()
    r = browser.post(url, data=fields, headers={**ORIGIN, "Accept": "text/html"})      # the page without its script
    assert r.status_code == 403 and "decision key" in r.text and untouched()
    no_csrf = {k: v for k, v in login.decide.items() if k != "X-CSRF-Token"}
    assert browser.post(url, data={"expect": fields["expect"]}, headers=no_csrf).status_code == 403 and untouched()
    evil = {**login.decide, "Origin": "http://evil.example"}
    assert browser.post(url, data=fields, headers=evil).status_code == 403 and untouched()
    client.cookies.clear()
    r = client.post(api, headers={"X-Fleetdeck-Approver": approver_token(fleet["db"])}, json={})
    assert r.status_code == 200 and r.json()["restored"] == ["README.md", "notes.txt"] and not untouched()


def test_a_path_out_of_the_tree_is_refused(browser, login, fleet):
    url = f"{_base(fleet, fleet['kept']['id'])}/restore"
    for bad in ("../outside", ".git/config", "/etc/passwd"):
        fields = {**_form(browser.get(url).text), "path": bad}
        r = browser.post(url, data=fields, headers=login.decide)
        assert r.status_code == 400 and r.json()["error"]["code"] == "BAD_PATH", bad


def test_a_restore_needs_the_passkey_an_approval_of_its_risk_needs(fleet, tmp_path, monkeypatch):
    """With `[passkeys] require = "all"` and a passkey registered, approving a medium-risk proposal needs a
    fresh assertion: so does a restore. Without one it is refused and nothing is written; the options the
    page's script asks for are bound to this restore."""
    settings = tmp_path / "settings.toml"
    settings.write_text('[passkeys]\nrequire = "all"\n')
    monkeypatch.setenv("FLEETDECK_SETTINGS", str(settings))
    fleet["index"].set_meta("passkey:AAAA", {"id": "AAAA", "name": "a key", "public_key": "AA", "sign_count": 0,
                                             "created_at": "2026-01-01T00:00:00Z"})
    with TestClient(create_app(fleet["db"], TOKEN), base_url="http://localhost:8765", follow_redirects=False) as c:
        login = sign_in(c, fleet["db"])
        url = f"{_base(fleet, fleet['kept']['id'])}/restore"
        page = c.get(url).text
        passkey = re.search(r'data-passkey="([^"]+)"', page).group(1)
        need = c.post(passkey, headers=login.decide)
        assert need.status_code == 200 and need.json()["required"] is True, need.text
        assert need.json()["options"]["allowCredentials"][0]["id"] == "AAAA"
        r = c.post(url, data=_form(page), headers=login.decide)
        assert r.status_code == 403 and r.json()["error"]["code"].startswith("PASSKEY_"), r.text
        assert not (fleet["work"] / "notes.txt").exists()
        c.cookies.clear()
        r = c.post(f"/api{url}", headers={"X-Fleetdeck-Approver": approver_token(fleet["db"])}, json={})
        assert r.status_code == 403 and r.json()["error"]["code"] == "PASSKEY_REQUIRED"
        assert not (fleet["work"] / "notes.txt").exists()

