"""diff.semantic on real Python changes (a function added, one renamed, a method body changed, a class
removed) and on files it cannot parse, over the official MCP client; git gives the commits and line numbers."""

from __future__ import annotations

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from mcp_bridge.server import build_server
from tests.gitbuild import commit_file, git, init_repo, write
from tests.mcpfleet import call, error_of, ok

BEFORE = '''\
import os


def keep():
    return 1


def old_name(x):
    total = x * 2
    return total + 1


class Service:
    """A service."""

    def start(self):
        return "go"

    def stop(self):
        return "halt"


class Legacy:
    def run(self):
        pass
'''

AFTER = '''\
import os


def keep():
    # a comment and different spacing are not a change
    return   1


def new_name(x):
    total = x * 2
    return total + 1


def helper(y):
    return y


class Service:
    """A service."""

    def start(self):
        return "going"

    def stop(self):
        return "halt"
'''


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("semantic")
    repo = init_repo(base / "fleet" / "code", commits=1)
    commit_file(repo, "pkg/service.py", BEFORE, "add service")
    write(repo / "web/app.js", "function a() { return 1 }\n")
    write(repo / "pkg/broken.py", "def fine():\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "js and more")
    write(repo / "pkg/service.py", AFTER)
    write(repo / "web/app.js", "function a() { return 2 }\nfunction b() {}\n")
    write(repo / "pkg/broken.py", "def fine(:\n")
    write(repo / "pkg/new.py", "class Fresh:\n    def go(self):\n        pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "rework")
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(base / "fleet")])
    return {"repo": repo, "db": db}


@pytest.fixture(scope="module")
def server(fleet):
    return build_server(str(fleet["db"]))


def names(items) -> set[tuple[str, str]]:
    return {(i["name"], i["kind"]) for i in items}


async def test_python_changes_are_named_per_symbol(server, fleet):
    repo = fleet["repo"]
    data = ok(await call(server, "diff.semantic", {"repo": "code", "base": "HEAD~1"}))
    assert data["repo"]["name"] == "code"
    assert data["base_sha"] == git(repo, "rev-parse", "HEAD~1").strip()
    changed_files = set(git(repo, "diff", "--name-only", "HEAD~1", "HEAD").split())
    assert {f["path"] for f in data["files"]} == changed_files and data["file_count"] == len(changed_files)
    files = {f["path"]: f for f in data["files"]}
    service = files["pkg/service.py"]
    assert service["supported"] is True and service["language"] == "python"
    assert names(service["added"]) == {("new_name", "function"), ("helper", "function")}
    assert names(service["removed"]) == {("old_name", "function"), ("Legacy", "class"), ("Legacy.run", "method")}
    assert names(service["changed"]) == {("Service.start", "method")}  # not keep (comment), not Service itself
    renamed = next(a for a in service["added"] if a["name"] == "new_name")
    assert renamed["same_body_as"] == "old_name"
    assert next(a for a in service["added"] if a["name"] == "helper")["same_body_as"] is None
    start_line = AFTER.splitlines().index("    def start(self):") + 1
    assert next(c for c in service["changed"] if c["name"] == "Service.start")["line"] == start_line
    fresh = files["pkg/new.py"]
    assert fresh["status"] == "added" and names(fresh["added"]) == {("Fresh", "class"), ("Fresh.go", "method")}
    assert data["supported"] is False and data["supported_count"] == 2


async def test_unsupported_files_say_so_and_point_at_the_text_diff(server, fleet):
    data = ok(await call(server, "diff.semantic", {"repo": "code", "base": "HEAD~1", "path_filter": "web"}))
    (js,) = data["files"]
    assert js["path"] == "web/app.js" and js["supported"] is False and "added" not in js
    assert ".js" in js["reason"]
    args = js["text_diff"]["arguments"]
    assert js["text_diff"]["tool"] == "diff.refs" and args["path_filter"] == "web/app.js"
    text = ok(await call(server, "diff.refs", {"repo": "code", **args}))
    assert [c["path"] for c in text["changes"]] == ["web/app.js"]
    broken = ok(await call(server, "diff.semantic", {"repo": "code", "base": "HEAD~1",
                                                     "path_filter": "pkg/broken.py"}))["files"][0]
    assert broken["supported"] is False and "head side at line 1" in broken["reason"]


async def test_ranges_and_bad_input(server, fleet):
    data = ok(await call(server, "diff.semantic", {"repo": "code", "base": "HEAD~3..HEAD~1",
                                                   "path_filter": "pkg"}))
    (service,) = [f for f in data["files"] if f["path"] == "pkg/service.py"]
    assert service["status"] == "added" and ("Service.start", "method") in names(service["added"])
    code, _ = error_of(await call(server, "diff.semantic", {"repo": "code", "base": "--output=x"}))
    assert code == "BAD_REF"
    code, _ = error_of(await call(server, "diff.semantic", {"repo": "code", "base": "HEAD", "path_filter": "../x"}))
    assert code == "BAD_PATH"
