"""fleet.digest: the contract, its errors, the activity chart data and the CLI's three formats."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fleet.views.digest import activity_by_repo_day, digest, report
from fleet.errors import FleetError
from fleet.index.store import open_index
from fleet.index.scan import refresh_repo, scan
from fleet.timespec import parse_since
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream

EVENT_KEYS = {"repo", "ref", "kind", "old_sha", "new_sha", "at", "identity", "message", "rewrote"}
EPOCH = "1970-01-01T00:00:00Z"


@pytest.fixture
def fleet(tmp_path: Path, db_path: Path):
    root = tmp_path / "src"
    alpha = init_repo(root / "alpha", commits=3)
    beta = init_repo(root / "beta", commits=1)
    git(beta, "commit", "-q", "--amend", "-m", "beta amended")
    index = open_index(db_path)
    scan(index, [str(root)])
    yield index, alpha, beta, root
    index.close()


def cli(db_path: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, db=db_path)


def test_contract_shape_order_and_counts(fleet) -> None:
    index, alpha, beta, _root = fleet
    out = digest(index, EPOCH)
    assert set(out) == {"since", "events", "event_count", "truncated", "omitted_count", "repos_scanned", "errors",
                        "gone_repos", "history"}
    assert out["history"] == {"complete": True, "read": 0, "total": 0}  # a scan stores history with the state
    assert out["since"] == EPOCH and out["repos_scanned"] == 2 and out["errors"] == []
    assert out["event_count"] == len(out["events"]) == 5 and out["truncated"] is False
    for ev in out["events"]:
        assert set(ev) == EVENT_KEYS
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ev["at"])
    stamps = [ev["at"] for ev in out["events"]]
    assert stamps == sorted(stamps, reverse=True)
    newest = out["events"][0]
    assert (newest["repo"], newest["ref"], newest["kind"], newest["rewrote"]) == ("beta", "refs/heads/main", "amend", True)
    assert newest["new_sha"] == git(beta, "rev-parse", "HEAD").strip()
    assert newest["identity"] == "Test Person <test@example.com>"
    initial = [ev for ev in out["events"] if ev["message"].startswith("commit (initial)")]
    assert len(initial) == 2 and all(ev["old_sha"] is None for ev in initial)
    alpha_msgs = [ev["message"] for ev in out["events"] if ev["repo"] == "alpha"]
    assert alpha_msgs == [f"commit: commit {i}" for i in (2, 1)] + ["commit (initial): commit 0"]


def test_truncation_filters_and_since(fleet) -> None:
    index, alpha, _beta, _root = fleet
    two = digest(index, EPOCH, max_events=2)
    assert len(two["events"]) == 2 and two["event_count"] == 5 and two["truncated"] is True
    only = digest(index, EPOCH, repos=["alpha"], kinds=["commit"])
    assert {e["repo"] for e in only["events"]} == {"alpha"} and only["event_count"] == 3
    assert only["repos_scanned"] == 1
    by_path = digest(index, EPOCH, repos=[str(alpha)])
    assert by_path["event_count"] == 3
    amends = digest(index, EPOCH, kinds=["amend"])
    assert [e["repo"] for e in amends["events"]] == ["beta"]
    second = sorted(e["at"] for e in digest(index, EPOCH)["events"])[1]
    ms = int(datetime.fromisoformat(second).timestamp() * 1000)
    assert digest(index, ms)["event_count"] == 4
    assert digest(index, str(ms))["event_count"] == 4
    assert digest(index, second)["event_count"] == 4
    assert digest(index, "24h")["event_count"] == 0  # the test clock is in 2025: nothing in the last day


@pytest.mark.parametrize("kwargs, code", [
    ({"max_events": 0}, "BAD_ARGUMENT"), ({"max_events": 1001}, "BAD_ARGUMENT"),
    ({"max_events": True}, "BAD_ARGUMENT"), ({"since": "yesterday"}, "BAD_ARGUMENT"),
    ({"since": -5}, "BAD_ARGUMENT"), ({"kinds": ["push"]}, "BAD_ARGUMENT"), ({"kinds": "commit"}, "BAD_ARGUMENT"),
    ({"repos": ["nope"]}, "REPO_NOT_IN_FLEET"), ({"repos": "alpha"}, "BAD_ARGUMENT"),
])
def test_bad_arguments_are_structured_errors(fleet, kwargs: dict, code: str) -> None:
    index = fleet[0]
    args = {"since": EPOCH, **kwargs}
    with pytest.raises(FleetError) as err:
        digest(index, **args)
    assert err.value.code == code


def test_parse_since_forms() -> None:
    now = 1_750_000_000.0
    assert parse_since("90m", now) == now - 5400
    assert parse_since("24h", now) == now - 86400
    assert parse_since("7d", now) == now - 7 * 86400
    assert parse_since("1750000000000") == 1_750_000_000
    assert parse_since(1_750_000_000_500) == 1_750_000_000.5
    assert parse_since("2025-06-15T12:00:00+02:00") == datetime(2025, 6, 15, 10, tzinfo=timezone.utc).timestamp()
    assert parse_since("2025-06-15T10:00:00Z") == datetime(2025, 6, 15, 10, tzinfo=timezone.utc).timestamp()


def test_activity_by_repo_day() -> None:
    start = datetime(2025, 3, 1, 12).timestamp()  # local time, as the chart's days are local
    evs = [{"repo": "a", "at": _iso_local(2025, 3, 1, 13)}, {"repo": "a", "at": _iso_local(2025, 3, 3, 9)},
           {"repo": "b", "at": _iso_local(2025, 3, 3, 10)}, {"repo": "a", "at": _iso_local(2025, 3, 3, 11)},
           {"repo": "c", "at": _iso_local(2025, 3, 2, 11)}]
    chart = activity_by_repo_day(evs, start=start, end=datetime(2025, 3, 3, 23).timestamp(), max_repos=2)
    assert chart["days"] == ["2025-03-01", "2025-03-02", "2025-03-03"]
    assert chart["rows"] == [{"repo": "a", "counts": [1, 0, 2], "total": 3},
                             {"repo": "b", "counts": [0, 0, 1], "total": 1},
                             {"repo": "(other repos: 1)", "counts": [0, 1, 0], "total": 1}]
    assert chart["max"] == 2
    assert activity_by_repo_day([], start=start, end=start)["rows"] == []


def _iso_local(*parts: int) -> str:
    return datetime(*parts).astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def test_cli_json_follows_the_contract(fleet, db_path: Path) -> None:
    index = fleet[0]
    proc = cli(db_path, "digest", "--since", EPOCH, "--format", "json", "--max-events", "3")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == digest(index, EPOCH, max_events=3)
    bad = cli(db_path, "digest", "--max-events", "5000", "--format", "json")
    assert bad.returncode == 2 and "--max-events" in bad.stderr and bad.stdout == ""  # a usage error


def test_markdown_and_html_reports(tmp_path: Path, db_path: Path) -> None:
    root = tmp_path / "src"
    with_upstream(root, "ahead", ahead=2)
    dirty = init_repo(root / "dirty", commits=1)
    (dirty / "README.md").write_text("changed\n")
    dropped = commit_file(dirty, "gone.txt", "x\n", "work that gets reset away")
    git(dirty, "reset", "-q", "--hard", "HEAD~1")
    (dirty / "README.md").write_text("changed\n")
    git(dirty, "stash", "-q")  # the test clock puts this stash well over a week ago
    (dirty / "new.txt").write_text("untracked\n")
    with open_index(db_path) as index:
        scan(index, [str(root)])
        data = report(index, EPOCH)
    assert data["fleet"]["unpushed"] == [{"repo": "ahead", "branch": "main", "ahead": 2, "upstream": "origin/main"},
                                         {"repo": "dirty", "branch": "main", "ahead": None, "upstream": None}]
    assert git(dirty, "rev-parse", "--abbrev-ref", "main@{upstream}", check=False) == ""  # git: never pushed
    assert [d["repo"] for d in data["fleet"]["dirty"]] == ["dirty"]
    assert [s["repo"] for s in data["fleet"]["stale_stashes"]] == ["dirty"]
    assert [c["sha"] for c in data["fleet"]["recoverable"]] == [dropped]
    assert data["fleet"]["rewrite_count"] >= 1

    out = tmp_path / "digest.md"
    proc = cli(db_path, "digest", "--since", EPOCH, "--format", "md", "--out", str(out))
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    md = out.read_text()
    assert md.startswith("# Fleet digest since 1970-01-01T00:00:00Z")
    assert "**Unpushed commits:** 2" in md and "ahead `main`: 2 ahead of origin/main" in md
    assert "dirty `main`: no upstream (never pushed)" in md
    assert "HEAD~1" in md and "\\~" not in md  # plain text stays plain in a plain-text mail
    assert "**Uncommitted changes:** 1" in md and "**Stashes older than a week:** 1" in md
    assert f"`{dropped[:10]}` work that gets reset away — dropped by reset" in md
    assert "rewrote history" in md

    html = cli(db_path, "digest", "--since", EPOCH, "--format", "html").stdout
    assert html.startswith("<!doctype html>") and "<svg" in html and "<style>" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the page must render offline"
    assert "work that gets reset away" in html and dropped in html
    assert html.count('class="cell"') >= 1


def test_no_activity_is_an_explicit_report(fleet, db_path: Path) -> None:
    proc = cli(db_path, "digest", "--since", "1h")
    assert proc.returncode == 0, proc.stderr
    assert "**No activity** in the fleet since" in proc.stdout
    assert "**Unpushed commits:** 2" in proc.stdout  # the fixture's two repos were never pushed
    assert proc.stdout.count("no upstream (never pushed)") == 2
    html = cli(db_path, "digest", "--since", "1h", "--format", "html")
    assert html.returncode == 0 and "No activity" in html.stdout and "<svg" not in html.stdout
    data = json.loads(cli(db_path, "digest", "--since", "1h", "--format", "json").stdout)
    assert data["events"] == [] and data["event_count"] == 0 and data["truncated"] is False


def test_events_of_a_repo_read_after_new_work_show_up(fleet) -> None:
    index, alpha, _beta, _root = fleet
    before = digest(index, EPOCH)["event_count"]
    commit_file(alpha, "n.txt", "n\n", "new work")
    refresh_repo(index, str(alpha))
    newest = digest(index, EPOCH, max_events=1)
    assert newest["event_count"] == before + 1
    assert newest["events"][0]["message"] == "commit: new work"


@pytest.mark.parametrize("since", ["99999999999999999999999999999999", "99999999999999999999999999d",
                                   "0001-01-01", "-5", "9999-99-99", 10**40])
def test_absurd_since_values_are_clear_errors(since):
    with pytest.raises(FleetError) as err:
        parse_since(since)
    assert err.value.code == "BAD_ARGUMENT"


def test_absurd_since_on_the_cli_exits_1_without_a_traceback(tmp_path):
    open_index(tmp_path / "f.db").close()
    proc = run_cli("digest", "--since", "99999999999999999999999999999999", db=tmp_path / "f.db", timeout=60)
    assert proc.returncode == 1 and "BAD_ARGUMENT" in proc.stderr and "Traceback" not in proc.stderr


def test_a_repo_gone_from_disk_is_marked_gone_and_the_header_says_so(tmp_path: Path, db_path: Path) -> None:
    import shutil

    from fleet.views.report import render_markdown

    root = tmp_path / "src"
    kept = init_repo(root / "kept", commits=2)
    doomed = init_repo(root / "doomed", commits=2)
    with open_index(db_path) as index:
        scan(index, [str(root)])
        shutil.rmtree(doomed)
        scan(index, [str(root)])
        assert index.repo(str(doomed.resolve()))["gone"]
        data = report(index, EPOCH)
    md = render_markdown(data)
    assert data["digest"]["repos_scanned"] == 1 and data["digest"]["gone_repos"] == ["doomed"]
    assert "1 repositories watched (and 1 gone from disk, listed for their events)." in md
    assert "### doomed (gone from disk)" in md and "### kept\n" in md
    assert git(kept, "rev-list", "--count", "HEAD").strip() == "2"


def test_a_stash_is_shown_as_a_stash(tmp_path: Path, db_path: Path) -> None:
    """`git stash` writes `reset: moving to HEAD` in HEAD's reflog; the digest and the timeline say stash."""
    from fleet.views.detail import timeline

    root = tmp_path / "src"
    repo = init_repo(root / "stasher", commits=1)
    (repo / "README.md").write_text("half done\n")
    git(repo, "stash", "push", "-q", "-m", "half an idea")
    assert git(repo, "reflog", "-1", "--format=%gs", "HEAD").strip() == "reset: moving to HEAD"  # git's own words
    with open_index(db_path) as index:
        scan(index, [str(root)])
        events = digest(index, EPOCH)["events"]
        shown = timeline(index, index.repo(str(repo.resolve()))["id"])
    stash = [e for e in events if e["kind"] == "stash"]
    assert [e["message"] for e in stash] == ["stash: On main: half an idea"] and stash[0]["rewrote"] is False
    assert not [e for e in events if e["message"] == "reset: moving to HEAD"]
    assert [e["kind"] for e in shown if e["message"].startswith("stash:")] == ["stash"]
