"""The dashboard's digest: `/api/digest` is exactly `fleet.digest.digest()`, `/digest` shows the same events
with the shared chart, rewrites and recoverable commits marked. Events are checked against `git reflog`."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from fleet.views.digest import BULK_KINDS, digest
from fleet.index.scan import refresh_repo
from tests.fleets.gitbuild import git
from tests.fleets.repo_states import amend_and_reset
from tests.fleets.serving import sign_in
from web.app import create_app

TOKEN = "test-token-digest-0123456789abcdefghijklmnop"
BASE = "http://127.0.0.1:8765"
SINCE = "2025-01-01T00:00:00+00:00"  # tests/gitbuild.py's clock starts in October 2025
EVENT_FIELDS = {"repo", "ref", "kind", "old_sha", "new_sha", "at", "identity", "message", "rewrote"}


@pytest.fixture
def authed(dashboard_fleet, tmp_path: Path):
    with TestClient(create_app(tmp_path / "fleet.db", TOKEN), base_url=BASE, follow_redirects=False) as c:
        sign_in(c, tmp_path / "fleet.db")
        yield c


def rewrite_history(index, repo: Path) -> tuple[str, str]:
    """Amend one commit and reset another away; returns (amended-away sha, reset-away sha)."""
    amended, reset = amend_and_reset(repo)
    git(repo, "branch", "keep-amended", amended)  # reachable again: rewritten, but not lost
    refresh_repo(index, str(repo.resolve()))
    return amended, reset


# --- /api/digest ----------------------------------------------------------------------------------------------

def test_api_digest_is_exactly_the_library_contract(authed: TestClient, dashboard_fleet) -> None:
    index, _repos = dashboard_fleet
    body = authed.get("/api/digest", params={"since": SINCE}).json()
    assert body == digest(index, SINCE)
    assert set(body) == {"since", "events", "event_count", "truncated", "omitted_count", "repos_scanned", "errors",
                         "gone_repos", "history"}
    assert body["events"] and all(set(e) == EVENT_FIELDS for e in body["events"])
    assert body["repos_scanned"] == 4 and body["truncated"] is False
    stamps = [e["at"] for e in body["events"]]
    assert stamps == sorted(stamps, reverse=True)


def test_api_digest_events_match_git_reflog(authed: TestClient, dashboard_fleet) -> None:
    _index, repos = dashboard_fleet
    body = authed.get("/api/digest", params={"since": SINCE, "repos": "dirty"}).json()
    assert {e["repo"] for e in body["events"]} == {"dirty"}
    head_log = git(repos["dirty"], "reflog", "show", "--format=%H %gs", "HEAD").splitlines()
    assert [f"{e['new_sha']} {e['message']}" for e in body["events"]] == head_log


def test_api_digest_filters_by_repo_kind_and_caps_the_list(authed: TestClient, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    amended, reset = rewrite_history(index, repos["clean"])
    two = authed.get("/api/digest", params=[("since", SINCE), ("repos", "clean"), ("repos", "dirty")]).json()
    assert {e["repo"] for e in two["events"]} == {"clean", "dirty"}
    kinds = authed.get("/api/digest", params={"since": SINCE, "kinds": "amend,reset"}).json()
    assert {(e["kind"], e["old_sha"], e["rewrote"]) for e in kinds["events"]} == {("amend", amended, True),
                                                                                  ("reset", reset, True)}
    assert authed.get("/api/digest", params=[("since", SINCE), ("kinds", "amend"), ("kinds", "reset")]).json() == kinds
    capped = authed.get("/api/digest", params={"since": SINCE, "max_events": "2"}).json()
    assert len(capped["events"]) == 2 and capped["truncated"] is True and capped["event_count"] > 2
    assert authed.get("/api/digest").json()["since"] > SINCE  # default: the last 24 hours


@pytest.mark.parametrize("params, code", [
    ({"since": "yesterday"}, "BAD_ARGUMENT"), ({"since": "-5"}, "BAD_ARGUMENT"),
    ({"kinds": "commit,teleport"}, "BAD_ARGUMENT"), ({"max_events": "0"}, "BAD_ARGUMENT"),
    ({"max_events": "1001"}, "BAD_ARGUMENT"), ({"max_events": "many"}, "BAD_ARGUMENT"),
    ({"repos": "not-a-repo"}, "REPO_NOT_IN_FLEET"),
])
def test_api_digest_bad_arguments_are_structured_400s(authed: TestClient, params: dict, code: str) -> None:
    r = authed.get("/api/digest", params=params)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == code and error["message"]


# --- /digest ----------------------------------------------------------------------------------------------------

def test_digest_page_lists_events_with_the_chart_and_marks_rewrites_and_recoverable_commits(authed, dashboard_fleet) -> None:
    index, repos = dashboard_fleet
    amended, reset = rewrite_history(index, repos["clean"])
    r = authed.get("/digest", params={"since": "custom", "custom": SINCE})
    assert r.status_code == 200
    html = r.text
    assert html.count('<svg class="chart"') == 1 and "events per repository per day" in html
    body = digest(index, SINCE)
    assert html.count('<tr class="ev ') == len([e for e in body["events"] if e["kind"] not in BULK_KINDS])
    fetched = {e["repo"] for e in body["events"] if e["kind"] in BULK_KINDS}
    assert html.count('<tr class="bulk ') == len(fetched)   # fetches: one row per repository
    rows = html.split('<tr class="ev ')[1:]
    amend_row, = [row for row in rows if row.startswith("kind-amend")]
    reset_row, = [row for row in rows if row.startswith("kind-reset")]
    assert amend_row.startswith('kind-amend rewrite"') and f'title="{amended}"' in amend_row  # still reachable
    assert reset_row.startswith('kind-reset rewrite recover"') and f'title="{reset}"' in reset_row  # lost
    assert f"git branch rescue-{reset[:10]} {reset}" in reset_row
    assert len([row for row in rows if " recover\"" in row.split(">", 1)[0]]) == 1
    assert "The fleet now" in html and "Recoverable commits</strong> (no ref reaches them): 1" in html
    assert '<a href="/digest" aria-current="page">Digest</a>' in html


def test_digest_page_filters_and_keeps_the_form(authed: TestClient, dashboard_fleet) -> None:
    index, _repos = dashboard_fleet
    html = authed.get("/digest", params={"since": SINCE, "repos": "dirty", "kinds": "commit"}).text
    body = digest(index, SINCE, repos=["dirty"], kinds=["commit"])
    assert html.count('<tr class="ev kind-commit') == len(body["events"]) == body["event_count"] > 0
    assert '<option value="custom" selected>' in html and f'value="{SINCE}"' in html  # an ISO since is custom
    assert '<option value="dirty" selected>' in html and '<option value="commit" selected>' in html


def test_digest_page_with_no_activity_says_so(authed: TestClient) -> None:
    html = authed.get("/digest", params={"since": "90m"}).text
    assert "<strong>No activity</strong>" in html and '<option value="90m" selected>' in html
    assert '<svg class="chart"' not in html and "The fleet now" in html


@pytest.mark.parametrize("params", [{"since": "custom", "custom": "not a date"}, {"since": "custom"},
                                    {"since": "24h", "kinds": "teleport"}])
def test_digest_page_bad_form_is_a_400_with_the_message(authed: TestClient, params: dict) -> None:
    r = authed.get("/digest", params=params)
    assert r.status_code == 400
    assert 'id="digest-error"' in r.text and 'id="filters"' in r.text
    assert authed.get("/fragments/digest", params=params).status_code == 400


def test_the_heatmap_is_big_enough_to_read() -> None:
    from fleet.views.report import chart_geometry

    geometry = chart_geometry({"days": ["2026-01-01", "2026-01-02"], "rows": [{"repo": "a", "counts": [1, 0],
                                                                              "total": 1}], "max": 1})
    assert geometry["cell"] >= 20 and geometry["height"] >= 60  # was 14-pixel cells
