"""One `git fetch` moving many refs does not crowd real work out of the digest: fetches are grouped per repo
in the report (Markdown, HTML, dashboard data), while `--kind fetch` still lists them one by one."""

from __future__ import annotations

from pathlib import Path

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.views.digest import digest, report
from fleet.views.report import render_html, render_markdown
from tests.fleets.gitbuild import commit_file, git, with_upstream

EPOCH = "1970-01-01T00:00:00Z"
BRANCHES = 30


def test_fetches_are_grouped_per_repo_and_work_stays_listed(tmp_path: Path):
    repo = with_upstream(tmp_path, "work")
    seed = tmp_path / "work-seed"
    for n in range(BRANCHES):
        git(seed, "branch", f"topic-{n:02d}")
    git(seed, "push", "-q", "origin", "--all")
    git(repo, "fetch", "-q")
    commit_file(repo, "a.txt", "a\n", "real work one")
    commit_file(repo, "b.txt", "b\n", "real work two")
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(repo)])
    flat = digest(index, EPOCH, max_events=1000)
    fetches = [e for e in flat["events"] if e["kind"] == "fetch"]
    # the oracle: one reflog line per remote-tracking ref the fetch created
    remote_refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/remotes/origin").split()
    remote_refs = [r for r in remote_refs if r != "refs/remotes/origin/HEAD"]
    reflog_lines = sum(len(git(repo, "reflog", "show", "--format=%H", r, "--").split()) for r in remote_refs)
    assert len(fetches) >= BRANCHES and len(fetches) <= reflog_lines

    data = report(index, EPOCH, max_events=3)
    listed = [e["message"] for e in data["digest"]["events"]]
    assert listed[:2] == ["commit: real work two", "commit: real work one"]
    assert all(e["kind"] != "fetch" for e in data["digest"]["events"])
    (group,) = data["bulk"]["groups"]
    assert (group["repo"], group["kind"], group["count"]) == ("work", "fetch", len(fetches))
    assert group["ref_count"] == len({e["ref"] for e in fetches}) and len(group["refs"]) == 5
    assert data["bulk"]["event_count"] == len(fetches)
    assert sum(row["total"] for row in data["activity"]["rows"]) == data["digest"]["event_count"]

    md = render_markdown(data)
    assert "## Fetches and other bulk updates, per repository" in md
    assert f"work: {len(fetches)} `fetch` events on {group['ref_count']} refs" in md
    assert f"plus {len(fetches)} fetch events in 1 repository (grouped per repository)" in md
    html = render_html(data)
    assert 'id="digest-bulk"' not in html and "Fetches and other bulk updates" in html
    assert f"<td>{len(fetches)}</td>" in html

    asked = report(index, EPOCH, kinds=["fetch"], max_events=1000)
    assert len(asked["digest"]["events"]) == len(fetches) and asked["bulk"]["groups"] == []
    index.close()


def test_a_window_with_only_fetches_says_so(tmp_path: Path):
    repo = with_upstream(tmp_path, "quiet", behind=1)
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(repo)])
    since = "2100-01-01T00:00:00Z"
    assert "No activity" in render_markdown(report(index, since))
    index.conn.execute("delete from events where kind != 'fetch'")
    data = report(index, EPOCH)
    assert data["digest"]["event_count"] == 0 and data["bulk"]["event_count"] >= 1
    assert "**No work** in the fleet" in render_markdown(data)
    index.close()
