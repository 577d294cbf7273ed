"""The read tools agents know from FluxGit and Segmint: which repo answered, lost work, freshness, branch
stacks, scope (churn + CODEOWNERS) and house rules — over the official MCP client, with git as the oracle."""

from __future__ import annotations

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.repo.ownership import owners_of, parse_codeowners
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import bare_remote, clone, commit_file, git, init_repo, write
from tests.fleets.mcp_fleet import call, error_of, ok


def build(base):
    root = base / "fleet"
    remote = bare_remote(base / "mono-remote.git")
    seed = init_repo(base / "seed", commits=1)
    git(seed, "remote", "add", "origin", str(remote))
    git(seed, "push", "-q", "-u", "origin", "main")
    mono = clone(remote, root / "mono")
    write(mono / ".github" / "CODEOWNERS", "# owners\n*.md @docs-team\n/src/ @core\nsrc/web/ @web-team @ux\n"
                                          "/src/api/**/*.sql @dba\n")
    write(mono / "CODEOWNERS", "* @root-file-only\n")
    git(mono, "add", "-A")
    git(mono, "commit", "-q", "-m", "chore: add owners\n\nSigned-off-by: Test Person <test@example.com>")
    commit_file(mono, "src/api/app.py", "v1\n", "feat(api): add app")
    commit_file(mono, "src/api/app.py", "v2\n", "fix(api): PROJ-12 handle errors")
    write(mono / "src/web/page.html", "<p>\n")
    git(mono, "add", "-A")
    git(mono, "commit", "-q", "--author=Other Dev <other@example.com>", "-m", "feat(web): PROJ-13 page")
    commit_file(mono, "src/api/db/schema.sql", "create table t();\n", "feat: schema")
    git(mono, "push", "-q", "origin", "main")
    git(mono, "checkout", "-q", "-b", "feature")
    commit_file(mono, "src/api/feature.py", "f\n", "feat: feature one")
    commit_file(mono, "src/api/feature.py", "ff\n", "feat: feature two")
    git(mono, "push", "-q", "-u", "origin", "feature")
    commit_file(mono, "src/api/feature.py", "fff\n", "feat: unpushed")
    git(mono, "checkout", "-q", "-b", "feature-2")
    commit_file(mono, "src/web/more.html", "m\n", "feat: stacked")
    git(mono, "checkout", "-q", "main")
    commit_file(mono, "docs/guide.md", "g\n", "docs: guide")
    # work that a reset drops (recoverable), and a subfolder to address the repo by
    git(mono, "checkout", "-q", "-b", "scratch")
    dropped = commit_file(mono, "scratch.txt", "lost\n", "wip: to be dropped")
    git(mono, "reset", "-q", "--hard", "HEAD~1")
    git(mono, "checkout", "-q", "main")
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    return {"mono": mono, "root": root, "db": db, "dropped": dropped}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    return build(tmp_path_factory.mktemp("parity"))


@pytest.fixture(scope="module")
def server(fleet):
    return build_server(str(fleet["db"]))


@pytest.mark.slow
async def test_every_per_repo_answer_names_the_repo_it_resolved(server, fleet):
    mono = fleet["mono"]
    for args in ({"repo": "mono"}, {"repo": str(mono / "src" / "api")}, {"repo": str(mono)}):
        for tool, extra in (("repo.status", {}), ("repo.brief", {}), ("repo.history", {"limit": 1}),
                            ("worktree.list", {}), ("repo.scope", {}), ("repo.lost", {})):
            data = ok(await call(server, tool, {**args, **extra}))
            assert data["repo"] == {"name": "mono", "relative_path": "mono", "root": str(fleet["root"]),
                                    "path": str(mono)}, (tool, args)
    tools = {t.name: t for t in await server.list_tools()}
    assert "repo" in tools["repo.blame"].output_schema["required"]
    assert tools["repo.scope"].output_schema["properties"]["repo"]


async def test_lost_commits_over_mcp_match_git(server, fleet):
    mono, sha = fleet["mono"], fleet["dropped"]
    assert git(mono, "cat-file", "-t", sha).strip() == "commit"
    assert git(mono, "rev-list", sha, "--not", "--all").split() == [sha]  # no ref reaches it
    data = ok(await call(server, "repo.lost", {"repo": "mono"}))
    assert [c["sha"] for c in data["commits"]] == [sha] and data["commit_count"] == 1
    commit = data["commits"][0]
    assert commit["subject"] == "wip: to be dropped" and commit["dropped_by"] == "reset"
    assert commit["recover"] == f"git -C {mono} branch recovered-{sha[:8]} {sha}"
    fleet_wide = ok(await call(server, "fleet.lost", {}))
    assert [c["sha"] for c in fleet_wide["commits"]] == [sha]
    assert ok(await call(server, "fleet.lost", {"limit": 1, "since": "1h"}))["commits"] == []
    code, _ = error_of(await call(server, "fleet.lost", {"repos": ["nope"]}))
    assert code == "REPO_NOT_IN_FLEET"


async def test_reflog_entries_that_dropped_a_commit_carry_the_recovery(server, fleet):
    mono, sha = fleet["mono"], fleet["dropped"]
    data = ok(await call(server, "repo.reflog", {"repo": "mono", "ref": "scratch"}))
    dropping = [e for e in data["entries"] if e["dropped"]]
    assert len(dropping) == 1 and data["dropped_count"] == 1
    entry = dropping[0]
    assert entry["old_sha"] == sha and entry["message"].startswith("reset:")
    assert entry["dropped"] == {"sha": sha, "subject": "wip: to be dropped",
                                "recover": f"git -C {mono} branch recovered-{sha[:8]} {sha}"}
    head = ok(await call(server, "repo.reflog", {"repo": "mono"}))
    assert all(e["dropped"] is None or e["old_sha"] == sha for e in head["entries"])


async def test_fleet_answers_say_how_fresh_they_are_and_refresh_named_repos(server, fleet):
    for tool, args in (("fleet.radar", {}), ("fleet.repos", {}), ("fleet.digest", {"since": 0}),
                       ("fleet.search", {"query": "feat"})):
        data = ok(await call(server, tool, args))
        fresh = data["freshness"]
        assert fresh["watcher"]["state"] == "absent" and fresh["refreshed"] == []
        assert fresh["indexed_at"].endswith("Z") and fresh["age_s"] >= 0
    mono = fleet["mono"]
    write(mono / "new-untracked.txt", "x\n")
    try:
        before = ok(await call(server, "fleet.repos", {}))["repos"][0]["untracked"]
        data = ok(await call(server, "fleet.repos", {"refresh": ["mono", "ghost"]}))
        assert data["freshness"]["refreshed"][0] == {"repo": "mono", "refreshed": True, "error": None}
        ghost = data["freshness"]["refreshed"][1]
        assert ghost["repo"] == "ghost" and ghost["refreshed"] is False and ghost["error"]
        assert data["repos"][0]["untracked"] == before + 1
    finally:
        (mono / "new-untracked.txt").unlink()
        with open_index(fleet["db"]) as index:
            scan(index, [str(fleet["root"])])
    code, _ = error_of(await call(server, "fleet.radar", {"refresh": [f"r{i}" for i in range(11)]}))
    assert code == "BAD_ARGUMENT"


def counts(repo, left, right) -> tuple[int, int]:
    behind, ahead = git(repo, "rev-list", "--left-right", "--count", f"{left}...{right}").split()
    return int(ahead), int(behind)


async def test_branch_stack_matches_git(server, fleet):
    mono = fleet["mono"]
    data = ok(await call(server, "repo.branch_stack", {"repo": "mono", "branch": "feature"}))
    assert data["base"] == "main" and data["default_branch"] == "main"
    assert data["default_branch_source"] == "origin_head"
    assert (data["ahead"], data["behind"]) == counts(mono, "main", "feature") == (3, 1)
    assert data["merge_base"] == git(mono, "merge-base", "main", "feature").strip()
    assert data["sha"] == git(mono, "rev-parse", "feature").strip()
    up = data["upstream"]
    assert up["name"] == "origin/feature" and (up["ahead"], up["behind"]) == counts(mono, "origin/feature", "feature")
    assert up["ahead"] == 1 and up["behind"] == 0
    assert [b["name"] for b in data["stacked_above"]] == ["feature-2"]
    assert data["stacked_above"][0]["ahead"] == counts(mono, "feature", "feature-2")[0] == 1
    assert data["stacked_below"] == []
    two = ok(await call(server, "repo.branch_stack", {"repo": "mono", "branch": "feature-2", "base": "origin/main"}))
    assert (two["ahead"], two["behind"]) == counts(mono, "origin/main", "feature-2")
    assert [b["name"] for b in two["stacked_below"]] == ["feature"] and two["upstream"] is None
    current = ok(await call(server, "repo.branch_stack", {"repo": "mono"}))
    assert current["branch"] == "main" and current["ahead"] == 0 and current["behind"] == 0
    for bad in ({"branch": "nope"}, {"branch": "feature", "base": "--output=x"}):
        code, _ = error_of(await call(server, "repo.branch_stack", {"repo": "mono", **bad}))
        assert code == "BAD_REF"


async def test_scope_churn_and_owners_match_git(server, fleet):
    mono = fleet["mono"]
    data = ok(await call(server, "repo.scope", {"repo": "mono", "path": "src/api", "since": 0}))
    shas = git(mono, "log", "--format=%H", "HEAD", "--", "src/api").split()
    assert data["commit_count"] == len(shas) == 3
    authors = {line.split("\t")[1]: int(line.split("\t")[0])
               for line in git(mono, "shortlog", "-sne", "HEAD", "--", "src/api").strip().splitlines()}
    assert {f"{a['name']} <{a['email']}>": a["commits"] for a in data["authors"]} == \
        {k.strip(): v for k, v in authors.items()}
    assert data["files"][0] == {"path": "src/api/app.py", "commits": 2, "owners": ["@core"]}
    sql = next(f for f in data["files"] if f["path"].endswith(".sql"))
    assert sql["owners"] == ["@dba"]
    owners = data["codeowners"]
    assert owners["file"] == ".github/CODEOWNERS" and owners["read_by"] == ["github"]
    assert set(owners["files_found"]) == {".github/CODEOWNERS", "CODEOWNERS"}
    assert owners["owners"] == ["@core"] and owners["rules"][0]["line"] == 3
    web = ok(await call(server, "repo.scope", {"repo": "mono", "path": "src/web", "since": 0}))
    assert web["codeowners"]["owners"] == ["@web-team", "@ux"] and web["authors"][0]["name"] == "Other Dev"
    window = ok(await call(server, "repo.scope", {"repo": "mono", "since": "1h"}))
    assert window["commit_count"] == 0  # the test clock's commits are older
    for bad in ("../outside", "/etc", ".git/config"):
        code, _ = error_of(await call(server, "repo.scope", {"repo": "mono", "path": bad}))
        assert code == "BAD_PATH"


def test_codeowners_patterns_are_gitignore_style():
    rules = parse_codeowners("* @all\n/build/ @ci\ndocs/*.md @docs\n**/logs @ops\napps/ @apps\n"
                             "[Backend][2] @backend\nsrv/ \nsrv/db/ @dba\n")
    assert owners_of(rules, "README.md")["owners"] == ["@all"]
    assert owners_of(rules, "build/x/y.o")["owners"] == ["@ci"]
    assert owners_of(rules, "src/build/x.o")["owners"] == ["@all"]  # "/build/" is anchored
    assert owners_of(rules, "docs/a.md")["owners"] == ["@docs"]
    assert owners_of(rules, "docs/sub/a.md")["owners"] == ["@all"]  # "*" does not cross "/"
    assert owners_of(rules, "deep/down/logs/x")["owners"] == ["@ops"]
    assert owners_of(rules, "x/apps/y")["owners"] == ["@apps"]  # unanchored directory
    assert owners_of(rules, "apps", is_dir=True)["owners"] == ["@apps"]
    assert owners_of(rules, "srv/db/t.sql")["owners"] == ["@all", "@dba"]  # sections add up
    assert owners_of(rules, "srv/x.py")["owners"] == ["@all", "@backend"]  # section default owners
    assert owners_of(rules, "srv", is_dir=True)["owners"] == ["@all", "@backend"]
    deeper = parse_codeowners("/a/b/ @deep\n")
    assert owners_of(deeper, "a", is_dir=True)["owners"] == []  # a deeper pattern does not own its parent


async def test_brief_has_default_branch_and_house_rules(server, fleet):
    result = await call(server, "repo.brief", {"repo": "mono", "recent_commits": 10})
    assert len(result.content[0].text) < 2500
    brief = ok(result)
    assert brief["default_branch"] == "main"
    rules = brief["conventions"]
    subjects = git(fleet["mono"], "log", "--no-merges", "-n50", "--format=%s").splitlines()
    assert rules["sampled"] == len(subjects)
    types = ("feat", "fix", "docs", "chore")
    conventional = [s for s in subjects if s.split(":")[0].split("(")[0] in types and ": " in s]
    assert rules["conventional_ratio"] == round(len(conventional) / len(subjects), 2) and conventional
    assert rules["area_prefix_ratio"] == 0 and rules["area_prefixes"] == []
    assert rules["trailers"] == {"Signed-off-by": 1} and rules["ticket_prefixes"] == {"PROJ-": 2}
    assert rules["subject_length"]["max"] == max(len(s) for s in subjects)
    assert "feat" in rules["types"]
