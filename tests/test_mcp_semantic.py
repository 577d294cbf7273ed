"""diff.semantic on real Python changes (a function added, one renamed, a method body changed, a class
removed) and on files it cannot parse, over the official MCP client; git gives the commits and line numbers."""

from __future__ import annotations

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import commit_file, git, init_repo, write
from tests.fleets.mcp_fleet import call, error_of, ok

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


GO_BEFORE = "package main\n\ntype T struct{}\n\nfunc (t *T) Run() int { return 1 }\n\nfunc Old() {}\n"
GO_AFTER = "package main\n\ntype T struct{}\n\nfunc (t *T) Run() int { return 2 }\n\nfunc New() {}\n"
RUST_BEFORE = "struct S;\nimpl S {\n    fn go(&self) -> i32 { 1 }\n}\nfn gone() {}\n"
RUST_AFTER = "struct S;\nimpl S {\n    // note\n    fn go(&self) -> i32 { 1 }\n    fn more(&self) {}\n}\n"
JAVA_BEFORE = "class App {\n  int x() { return 1; }\n  void y() {}\n}\n"
JAVA_AFTER = "class App {\n  int x() { return 2; }\n}\n"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("semantic")
    repo = init_repo(base / "fleet" / "code", commits=1)
    commit_file(repo, "pkg/service.py", BEFORE, "add service")
    write(repo / "web/app.js", "function a() { return 1 }\n")
    write(repo / "lib/tool.rb", "def a\n  1\nend\n")
    write(repo / "src/main.go", GO_BEFORE)
    write(repo / "src/lib.rs", RUST_BEFORE)
    write(repo / "src/App.java", JAVA_BEFORE)
    write(repo / "web/types.ts", "interface Shape { area(): number }\nclass Sq { side = 1; area() { return 1 } }\n")
    write(repo / "pkg/broken.py", "def fine():\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "js and more")
    write(repo / "pkg/service.py", AFTER)
    write(repo / "web/app.js", "// a comment\nfunction a() { return 2 }\nconst b = () => 1\n"
                               "class K { m() { return 1 } }\n")
    write(repo / "lib/tool.rb", "def a\n  2\nend\n")
    write(repo / "src/main.go", GO_AFTER)
    write(repo / "src/lib.rs", RUST_AFTER)
    write(repo / "src/App.java", JAVA_AFTER)
    write(repo / "web/types.ts", "interface Shape { area(): number; name: string }\n"
                                 "class Sq { side = 1; area() { return 1 } }\n")
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


@pytest.mark.slow
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
    assert data["supported"] is False and data["supported_count"] == len(data["files"]) - 2  # .rb, broken.py


async def test_unsupported_files_say_so_and_point_at_the_text_diff(server, fleet):
    data = ok(await call(server, "diff.semantic", {"repo": "code", "base": "HEAD~1", "path_filter": "lib"}))
    (rb,) = data["files"]
    assert rb["path"] == "lib/tool.rb" and rb["supported"] is False and "added" not in rb
    assert ".rb" in rb["reason"] and data["supported"] is False
    args = rb["text_diff"]["arguments"]
    assert rb["text_diff"]["tool"] == "diff.refs" and args["path_filter"] == "lib/tool.rb"
    text = ok(await call(server, "diff.refs", {"repo": "code", **args}))
    assert [c["path"] for c in text["changes"]] == ["lib/tool.rb"]
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


async def test_other_languages_through_tree_sitter(server, fleet):
    pytest.importorskip("tree_sitter_javascript")
    data = ok(await call(server, "diff.semantic", {"repo": "code", "base": "HEAD~1"}))
    files = {f["path"]: f for f in data["files"]}
    js = files["web/app.js"]
    assert js["supported"] is True and js["language"] == "javascript"
    assert names(js["changed"]) == {("a", "function")}
    assert names(js["added"]) == {("b", "function"), ("K", "class"), ("K.m", "method")}
    go = files["src/main.go"]
    assert names(go["changed"]) == {("T.Run", "method")}
    assert names(go["added"]) == {("New", "function")} and names(go["removed"]) == {("Old", "function")}
    rust = files["src/lib.rs"]
    assert rust["changed"] == [] and names(rust["added"]) == {("S.more", "method")}  # a comment is no change
    assert names(rust["removed"]) == {("gone", "function")}
    java = files["src/App.java"]
    assert names(java["changed"]) == {("App.x", "method")} and names(java["removed"]) == {("App.y", "method")}
    ts = files["web/types.ts"]
    assert names(ts["changed"]) == {("Shape", "interface")} and ts["added"] == [] and ts["removed"] == []
