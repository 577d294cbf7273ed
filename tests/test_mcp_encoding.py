"""An answer is encoded once: the changes of commit.details / diff.refs keep the JSON they were measured by
(fleet.repo.jsonbudget.Measured) and the envelope splices it in. The text mirror must stay byte for byte the
compact JSON of the structured content, whole changes and changes cut hunk by hunk alike, with non-ASCII,
quotes, backslashes and control characters in paths and lines; `iso_times` copies only what it converts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.repo.blame import repo_blame
from fleet.repo.jsonbudget import Measured, Rows, Timeless, encode, json_size
from fleet.views.records import iso_times
from mcp_bridge.envelope import compact
from mcp_bridge.server import build_server
from tests.fleets.gitbuild import commit_file, git, init_repo, write
from tests.fleets.mcp_fleet import ok

ODD = 'naïve "quoted" back\\slash\ttab \x01 ctrl — ☃'


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("encoding")
    repo = init_repo(base / "root" / "enc")
    for n in range(12):
        write(repo / f"dir é/{ODD[:6]} {n}.txt", "".join(f"{ODD} {n} {i}\n" for i in range(60)))
        write(repo / f"plain/{n}.txt", "".join(f"plain {n} {i}\n" for i in range(60)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "many files")
    for n in range(12):
        write(repo / f"dir é/{ODD[:6]} {n}.txt", "".join(f"{ODD} {n} {i}{' x' * (i % 7 == 0)}\n" for i in range(60)))
        write(repo / f"plain/{n}.txt", "".join(f"plain {n} {i}{' y' * (i % 5 == 0)}\n" for i in range(60)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"edit them: {ODD}")
    commit_file(repo, "last.txt", "last\n")
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(base / "root")])
    return repo, db


def house(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize("max_bytes", [1024, 6000, 20000, 256 * 1024])
async def test_the_text_is_the_compact_json_of_the_answer_whole_or_cut(repo, max_bytes):
    path, db = repo
    server = build_server(str(db))
    for name, args in (("commit.details", {"rev": "HEAD~1"}), ("diff.refs", {"base": "HEAD~2", "head": "HEAD"})):
        result = await server.call_tool(name, {"repo": str(path), "max_bytes": max_bytes, **args})
        data = ok(result)
        assert isinstance(data["changes"], Measured)  # the splice was used: the control for what follows
        assert result.content[0].text == house(data)
        assert len(result.content[0].text.encode()) <= max_bytes + 1024
        if max_bytes == 256 * 1024:
            assert not data["truncated"] and len(data["changes"]) == data["file_count"] >= 24
        elif max_bytes == 6000:
            assert data["truncated"] and any(c["truncated"] for c in data["changes"])  # cut hunk by hunk


def test_measured_falls_back_when_its_texts_do_not_match_its_items():
    items = [{"a": ODD}, {"b": [1, 2]}]
    assert Measured(items, [house(items[0]), None]).encode() == house(items)
    assert compact({"x": 1, "changes": Measured(items, ["WRONG"])}) == house({"x": 1, "changes": items})
    assert compact({"changes": Measured(items, ['{"a":"spliced"}', None])}) == '{"changes":[{"a":"spliced"},{"b":[1,2]}]}'
    for value in (ODD, [ODD, "x"], {"k": ODD}, "ascii only"):
        assert json_size(value) == len(house(value).encode())


def test_iso_times_copies_only_what_it_converts():
    lines = ["a", "b"]
    hunk = {"lines": lines, "header": "@@", "old_start": 1}
    changes = Measured([{"hunks": [hunk]}], [None])
    answer = {"changes": changes, "author_time": 0, "nested": {"at": 86400, "n": 1}}
    out = iso_times(answer)
    assert out == {"changes": [{"hunks": [hunk]}], "author_time": "1970-01-01T00:00:00Z",
                   "nested": {"at": "1970-01-02T00:00:00Z", "n": 1}}
    assert out["changes"] is changes and answer["author_time"] == 0 and answer["nested"]["at"] == 86400
    plain = {"a": [1, {"b": "c"}]}
    assert iso_times(plain) is plain


def test_rows_times_are_written_in_place_as_the_generic_walk_writes_them():
    """A Rows (dicts made for one answer) has its times converted in place; the result is what the generic walk
    gives a copy, for every hour, minute and second of a day and times it cannot convert."""
    import copy
    import time

    seconds = list(range(0, 3 * 86400, 997)) + [86399, 86400, 10**22, -1]
    rows = Rows([{"sha": "a", "author_time": s, "committer_time": float(s % 5000), "boundary": True,
                  "previous": None} for s in seconds] + [{"sha": "b", "author_time": None, "committer_time": True,
                                                          "boundary": False, "previous": {"sha": "c"}}],
                ("author_time", "committer_time"))
    plain = copy.deepcopy(list(rows))
    expected = iso_times(plain)
    assert expected is not plain and iso_times(rows) is rows and list(rows) == expected
    for row, s in zip(rows, seconds[:-2]):
        assert row["author_time"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s))
    assert rows[-3]["author_time"] is None and rows[-2]["author_time"] == "1969-12-31T23:59:59Z"
    assert rows[-1]["author_time"] is None and rows[-1]["committer_time"] is True


def test_a_blame_of_many_commits_made_at_the_same_second_answers_git_s_times(tmp_path):
    """repo_blame's commits are Rows: the MCP answer writes their times in place. Commits sharing one second,
    and others, each get git's own time as ISO, and the text mirror is the compact JSON of the answer."""
    import datetime

    repo = init_repo(tmp_path / "same")
    for n in range(8):
        write(repo / "f.txt", "".join(f"line {i} by {min(i, n)}\n" for i in range(n + 1)))
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", f"c{n}", f"--date=@{1_700_000_000 + 3600 * (n % 3 == 0)} +0200")
    result = repo_blame(str(repo), "f.txt")
    assert isinstance(result["commits"], Rows) and len(result["commits"]) == 8
    answer = iso_times(result)
    for commit in answer["commits"]:
        at = int(git(repo, "log", "-1", "--format=%at", commit["sha"]).strip())
        ct = int(git(repo, "log", "-1", "--format=%ct", commit["sha"]).strip())
        iso = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert commit["author_time"] == iso and commit["author_tz"] == "+0200"
        assert commit["committer_time"] == datetime.datetime.fromtimestamp(
            ct, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert len({c["author_time"] for c in answer["commits"]}) == 2
    assert compact(answer) == json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    assert encode(answer) == compact(answer)


def _hostile_blame_repo(path: Path) -> Path:
    """A repository whose blame holds everything JSON escapes or git cannot date: a commit object written by
    hand (an author with a tab, quotes, a backslash, a control character and non-ASCII, a time stamp git clamps
    to 2**64 - 1, an empty mail, a summary with invalid UTF-8), a boundary root, `previous`, lines
    copied from another file (-C), lines with quotes, backslashes, tabs and control characters, and
    uncommitted lines."""
    repo = init_repo(path, commits=0)
    name = 'odd "name" é.txt'
    write(repo / "src.txt", "".join(f"shared line number {i} with enough text to be copied\n" for i in range(8)))
    write(repo / name, 'plain\nsays "hi" \\ back\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", 'Revert "x": a \\ summary')   # the root: a boundary
    write(repo / name, (repo / name).read_text() + "tab\there \x01 ctrl ☃\n" + (repo / "src.txt").read_text())
    write(repo / "src.txt", "changed too\n")   # -C looks for copies in files changed in the same commit
    git(repo, "add", "-A")
    tree, parent = git(repo, "write-tree").strip(), git(repo, "rev-parse", "HEAD").strip()
    raw = (f"tree {tree}\nparent {parent}\n".encode()
           + 'author Na\tme "q" \\ \x01 Zoë <> 10000000000000000000000 +0000\n'.encode()
           + b"committer C\x7f <c@x> 1700000000 +0200\n\nsum \"q\" \\ \t \x02 \xff\xfe \xc3\xa9 end\n")
    made = git(repo, "hash-object", "-t", "commit", "-w", "--literally", "--stdin", input=raw).strip()
    git(repo, "update-ref", "HEAD", made)
    write(repo / name, (repo / name).read_text() + 'uncommitted "line" \\\n')
    return repo


async def test_a_blame_s_text_is_the_compact_json_of_its_answer_whatever_git_prints(tmp_path):
    """repo.blame's ranges and commits write their own JSON (fleet.repo.jsonbudget.Written); the text mirror must
    be byte for byte the generic encoder's, for every kind of commit and line git can print."""
    repo = _hostile_blame_repo(tmp_path / "root" / "hostile")
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(tmp_path / "root")])
    server = build_server(str(db))
    seen = set()
    for args in ({}, {"ref": "HEAD"}, {"detect_moves": True}, {"ignore_whitespace": True, "start_line": 2}):
        direct = repo_blame(str(repo), 'odd "name" é.txt', **args)
        assert direct["ranges"].write is not None and direct["commits"].write is not None   # the control
        answer = iso_times(direct)
        assert compact(answer) == house(answer)
        result = await server.call_tool("repo.blame", {"repo": str(repo), "file": 'odd "name" é.txt', **args})
        assert result.content[0].text == house(ok(result))
        commits = answer["commits"]
        seen |= {"null time" for c in commits if c["author_time"] is None}
        seen |= {"null mail" for c in commits if c["author_email"] is None}
        seen |= {"written" for c in commits if isinstance(c["author_time"], str) and c["author_email"]}
        seen |= {"boundary" for c in commits if c["boundary"]} | {"previous" for c in commits if c["previous"]}
        seen |= {"uncommitted" for c in commits if c["uncommitted"]}
        seen |= {"copied" for c in commits if c["filename"] == "src.txt"}
        seen |= {"invalid utf-8" for c in commits if "\ufffd" in (c["summary"] or "")}
    assert seen == {"null time", "null mail", "written", "boundary", "previous", "uncommitted", "copied",
                    "invalid utf-8"}


def test_blame_rows_writers_write_what_the_encoder_writes_for_any_value():
    """The writers of a blame's rows give encode()'s text for the rows blame makes and fall back to it for any
    other value: details git did not print (None), times not yet converted or beyond the calendar."""
    from fleet.repo.blame import _commit_json, _new_commit, _range_json

    usual = _new_commit("ab" * 20, ODD, "m@x", 1, "+0000", ODD, 2, ODD, True, {"sha": "cd" * 20, "filename": ODD},
                        ODD)
    usual.update(author_time="2026-01-31T12:00:00Z", committer_time="2026-01-31T12:00:01Z")
    rows = [usual, {**usual, "previous": None, "boundary": False}, _new_commit("0" * 40),
            {**usual, "author_time": 1}, {**usual, "committer_time": None}, {**usual, "author_email": None}]
    assert Rows(rows, ("author_time", "committer_time"), _commit_json).encode() == house(rows)
    ranges = [{"start_line": 1, "end_line": 3, "sha": "ab" * 20, "orig_start_line": 7, "lines": [ODD, "", "\\"]},
              {"start_line": 4, "end_line": 4, "sha": "0" * 40, "orig_start_line": 4, "lines": ["\x00\x1f\x7f"]}]
    assert Timeless(ranges, _range_json).encode() == house(ranges)
    assert compact({"ranges": Timeless(ranges, _range_json), "n": 1}) == house({"ranges": ranges, "n": 1})
