"""How reflog lines and events are stored (schema m009): no unique index over message text, events that point at
their reflog line, the migration that carries an older index forward, and the one-pass reflog parser.

Git is the oracle throughout: what the index holds is compared with `git reflog` and with the log files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from fleet.git import files as gitfiles
from fleet.index import reflogs
from fleet.index.events import DELETED_MESSAGE, prune_events, record_events
from fleet.index.lost import lost_commits
from fleet.index.scan import ingest, refresh_repo, scan
from fleet.git.layout import found_at
from fleet.index.schema import migrations
from fleet.index.search import search
from fleet.index.store import SCHEMA_VERSION, open_index
from fleet.repo.record import read_repo
from tests.fleets.gitbuild import commit_file, git, init_repo
from tests.fleets.repo_states import busy_repo

LINE = "select repo_id, ref, old_sha, new_sha, at, tz, identity, message, kind from reflog"


def git_lines(repo: Path, ref: str) -> list[tuple[str, str]]:
    """(new sha, message) of every entry git holds for `ref`, oldest first."""
    out = git(repo, "reflog", "show", "--format=%H%x00%gs", ref, "--")
    return [tuple(line.split("\0")) for line in reversed(out.splitlines()) if line]


def events_of(index, ref: str) -> list[tuple[str, str]]:
    return index.conn.execute("select new_sha, message from events where ref = ? order by at, id", (ref,)).fetchall()


def test_a_version_8_index_migrates_with_its_history_and_keeps_recording(tmp_path: Path) -> None:
    """An index written at schema 8 (events copying their lines, a deleted branch's event, an event whose line
    was pruned) opens at the current version with every reflog line and every event as they were, and goes on
    recording new moves exactly once."""
    root = tmp_path / "src"
    repo = busy_repo(root)
    current = open_index(tmp_path / "current.db")
    scan(current, [str(root)])
    git(repo, "branch", "-q", "-D", "doomed")
    refresh_repo(current, str(repo))
    current.close()

    old = tmp_path / "v8.db"
    conn = sqlite3.connect(old, isolation_level=None)
    migrations.apply(Database(conn), stop_before="m009_lean_history")
    conn.execute(f"attach database '{tmp_path / 'current.db'}' as cur")
    for table in ("roots", "repos", "branches", "worktrees", "submodules", "stashes", "remotes", "reflog",
                  "reflog_files", "event_cursor"):
        conn.execute(f"insert into {table} select * from cur.{table}")
    conn.execute("insert into events select * from cur.events")
    conn.execute("detach database cur")
    # an event whose reflog line is gone (a line pruned by hand): its own copy must survive the migration
    orphan = conn.execute("select reflog_id from events where ref = 'refs/heads/main' and"
                          " message like 'commit (initial)%'").fetchone()[0]
    assert orphan < conn.execute("select max(id) from reflog").fetchone()[0]
    conn.execute("delete from reflog where id = ?", (orphan,))
    conn.execute("PRAGMA user_version = 8")
    reflog_v8 = conn.execute(f"{LINE} order by id").fetchall()
    events_v8 = conn.execute("select * from events order by id").fetchall()
    conn.close()
    assert any(row[8] == DELETED_MESSAGE for row in events_v8) and len(events_v8) > 8

    index = open_index(old)
    assert index.schema_version == SCHEMA_VERSION  # m009 and every later migration applied
    assert index.conn.execute(f"{LINE} order by id").fetchall() == reflog_v8
    assert index.conn.execute("select * from events order by id").fetchall() == events_v8
    copies = index.conn.execute("select count(*) from event_rows where message is not null").fetchone()[0]
    assert copies == 2  # the deleted branch's event and the orphan: the others point at their line
    indexes = {r[0] for r in index.conn.execute("select name from sqlite_master where type = 'index'"
                                                " and tbl_name = 'reflog'")}
    assert indexes == {"idx_reflog_repo_id_at"}

    commit_file(repo, "later.txt", "later\n", "later work")
    git(repo, "checkout", "-q", "topic")
    refresh_repo(index, str(repo))
    for ref in ("refs/heads/main", "refs/heads/topic"):  # main's first: the orphan, from its own copy
        assert events_of(index, ref) == git_lines(repo, ref)
    main_events = events_of(index, "refs/heads/main")
    assert index.conn.execute("select count(*) from events where ref = 'refs/heads/doomed'"
                              " and message = ?", (DELETED_MESSAGE,)).fetchone()[0] == 1
    hits = search(index, "topic work, amended", kinds=["commit"])
    assert hits["matches"] and hits["matches"][0]["ref"] in ("HEAD", "refs/heads/topic")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    refresh_repo(index, str(repo))
    assert git_lines(repo, "refs/heads/main") == [] and events_of(index, "refs/heads/main") == main_events
    assert len(index.conn.execute(f"{LINE} where ref = 'refs/heads/main'").fetchall()) == len(
        [r for r in reflog_v8 if r[1] == "refs/heads/main"]) + 1  # every line stays after git forgets it
    index.close()


def test_a_rewritten_or_regrown_log_adds_no_line_twice(tmp_path: Path, db_path: Path) -> None:
    """Lines are told apart by ref, shas, time and message (what the unique index did): a log git rewrote is read
    again from its start and adds only what is new; a repeated line appended later is held once."""
    root = tmp_path / "src"
    repo = busy_repo(root)
    index = open_index(db_path)
    scan(index, [str(root)])
    held = index.conn.execute(f"{LINE} where ref = 'HEAD' order by id").fetchall()
    assert [r[7] for r in held] == [m for _sha, m in git_lines(repo, "HEAD")]

    head_log = repo / ".git" / "logs" / "HEAD"
    inode = head_log.stat().st_ino
    git(repo, "reflog", "delete", "HEAD@{1}")  # rewrites the log (a new file) without that entry
    commit_file(repo, "n.txt", "n\n", "after the rewrite")
    assert head_log.stat().st_ino != inode
    refresh_repo(index, str(repo))
    now = index.conn.execute(f"{LINE} where ref = 'HEAD' order by id").fetchall()
    assert now[:len(held)] == held and [r[7] for r in now[len(held):]] == ["commit: after the rewrite"]

    head_log.write_bytes(head_log.read_bytes() + head_log.read_bytes().splitlines(keepends=True)[-1])
    refresh_repo(index, str(repo))
    assert index.conn.execute(f"{LINE} where ref = 'HEAD' order by id").fetchall() == now
    assert events_of(index, "refs/heads/main") == git_lines(repo, "refs/heads/main")
    index.close()


def test_a_repo_another_process_stores_between_prepare_and_write_is_held_once(tmp_path: Path, monkeypatch) -> None:
    """The scan reads and parses a new repo's lines, and decides its events, before taking the write lock. When
    another process stores that repo meanwhile, the write reads its lines again against what is held then:
    every line and every event once, as git has them."""
    root = tmp_path / "src"
    repo = busy_repo(root)
    db = tmp_path / "fleet.db"
    first, second = open_index(db), open_index(db)
    found = found_at(str(repo), str(root))
    record = read_repo(found)
    read = reflogs.read

    def read_then_the_other_stores(prepared):
        prepared = read(prepared)
        monkeypatch.setattr(reflogs, "read", read)
        assert prepared[0].repo_id is None and prepared[0].logs  # prepared as new, its lines at hand
        git(repo, "commit", "--allow-empty", "-qm", "meanwhile")  # the logs grow, and the other reads them
        ingest(second, [(found, read_repo(found))])
        return prepared

    monkeypatch.setattr(reflogs, "read", read_then_the_other_stores)
    [repo_id] = ingest(first, [(found, record)])
    assert ingest(second, [(found, record)]) == [repo_id]
    for ref in ("HEAD", "refs/heads/main", "refs/heads/topic"):
        held = first.conn.execute("select new_sha, message from reflog where ref = ? order by id", (ref,)).fetchall()
        assert held == git_lines(repo, ref)
    assert events_of(first, "refs/heads/main") == git_lines(repo, "refs/heads/main")
    assert events_of(first, "refs/heads/topic") == git_lines(repo, "refs/heads/topic")
    top = first.conn.execute("select max(id) from reflog").fetchone()[0]
    assert first.conn.execute("select repo_id, reflog_id from event_cursor").fetchall() == [(repo_id, top)]
    # what the index has read of each log is where the files end now: the next read starts there
    logs = repo / ".git" / "logs"
    on_disk = {str(path.relative_to(logs)): path.stat().st_size for path in logs.rglob("*") if path.is_file()}
    assert dict(first.conn.execute("select ref, size from reflog_files")) == on_disk
    assert {"HEAD", "refs/heads/main", "refs/heads/topic"} <= on_disk.keys()
    first.close()
    second.close()


def test_two_handles_recording_the_same_lines_record_each_event_once(tmp_path: Path) -> None:
    """A store's lines recorded by another process first: the first process then adds nothing, and the cursor
    never moves back."""
    root = tmp_path / "src"
    repo = busy_repo(root)
    db = tmp_path / "fleet.db"
    first, second = open_index(db), open_index(db)
    found = found_at(str(repo), str(root))
    [repo_id] = first.store_repos([(found, read_repo(found), [])])
    added = record_events(second, [(repo_id, str(repo))])
    assert added > 0 and record_events(first, [(repo_id, str(repo))]) == 0
    top = first.conn.execute("select max(id) from reflog").fetchone()[0]
    assert first.conn.execute("select reflog_id from event_cursor").fetchall() == [(top,)]
    assert events_of(first, "refs/heads/main") == git_lines(repo, "refs/heads/main")
    assert events_of(first, "refs/heads/topic") == git_lines(repo, "refs/heads/topic")
    assert first.conn.execute("select count(*) from events").fetchone()[0] == added
    assert lost_commits(first)["commits"]  # the amended and the reset-away commits are still recoverable
    first.close()
    second.close()


_text = st.binary(max_size=30).filter(lambda b: b"\n" not in b and b"\t" not in b)
_message = st.one_of(st.binary(max_size=40).filter(lambda b: b"\n" not in b),
                     st.sampled_from([b"commit (amend): x", b"commit: \xff\xfe", b"reset: moving to HEAD~1",
                                      b"Branch: renamed a to b", b"merge topic", b"pull: Fast-forward", b""]))


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.tuples(_text, st.integers(0, 10**12 - 1), _message, st.booleans()), min_size=1,
                      max_size=6))
def test_one_decode_per_log_gives_each_field_what_decoding_it_alone_gives(lines) -> None:
    """The parser decodes a whole log once (invalid UTF-8 replaced) and classifies each line in the same pass:
    every field equals the field's bytes decoded alone, and the kind equals `reflog_kind` of the message."""
    old, new = "1" * 40, "0" * 40
    data = b"".join(b"%s %s %s %d +0100%s\n" % (old.encode(), new.encode(), who, at,
                                                  b"\t" + msg if with_tab else b"")
                    for who, at, msg, with_tab in lines)
    parsed = gitfiles.reflog_fields(data)
    expected = []
    for who, at, msg, with_tab in lines:
        message = msg.decode("utf-8", "replace") if with_tab else ""
        expected.append((old, None, who.decode("utf-8", "replace"), at, "+0100", message,
                         gitfiles.reflog_kind(message)))
    assert parsed == [e for e in expected if e[3] <= gitfiles.MAX_REFLOG_TIME]


# Fields as git writes them and near misses: what the regex refuses (a sha of 39 or 41 digits, upper case or
# not hex, a time of 13 digits or not ASCII digits, a zone cut short), what it keeps but leaves out (past 9999).
_sha = st.sampled_from([b"0" * 40, b"1" * 40, b"0123456789abcdef" * 2 + b"01234567", b"b" * 64, b"0" * 64,
                        b"c" * 39, b"d" * 41, b"E" * 40, b"g" * 40, b"\xc3\xa9" * 20])
_time = st.sampled_from([b"0", b"1700000000", b"0017", b"9" * 12, b"9" * 13, b"253402300799", b"253402300800", b"",
                         b"+5", b"5_0", b"\xd9\xa3", b"1 2"])
_zone = st.sampled_from([b"+0000", b"-0130", b"+000", b"+00000", b"00000", b"+0a00", b"++000", b"+\xd9\xa3000"])
_log_line = st.builds(lambda old, new, who, at, zone, msg: b"%s %s %s %s %s%s" % (old, new, who, at, zone, msg),
                      _sha, _sha, st.one_of(_text, st.sampled_from([b"x 12 +0000", b"a\x0cb"])), _time, _zone,
                      st.one_of(st.just(b""), st.just(b"\t"), _message.map(lambda m: b"\t" + m)))


_good_line = st.builds(lambda old, new, who, at, zone, msg: b"%s %s %s %s %s%s" % (old, new, who, at, zone, msg),
                       st.sampled_from([b"0" * 40, b"1" * 40, b"0123456789abcdef" * 4, b"0" * 64]),
                       st.sampled_from([b"a" * 40, b"0" * 40, b"b" * 64]),
                       st.one_of(_text, st.just(b"x 12 +0000")),
                       st.sampled_from([b"0", b"0017", b"1700000000", b"9" * 11]), st.sampled_from([b"+0000", b"-0130"]),
                       st.one_of(st.just(b""), _message.map(lambda m: b"\t" + m)))


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(st.one_of(_log_line, _log_line.map(lambda b: b[:-3]), st.binary(max_size=90)), max_size=6),
       ending=st.sampled_from([b"", b"\n", b"\n\n"]))
def test_the_split_parser_gives_what_the_regex_gives(lines: list[bytes], ending: bytes) -> None:
    """A log is cut into its fields with str methods when every line is as git writes it, and matched with the
    regex otherwise: both give the same fields, junk lines skipped (a line past the last time a datetime can
    hold included)."""
    data = b"\n".join(lines) + ending
    text = data.decode("utf-8", "replace")
    assert gitfiles.reflog_fields(data) == gitfiles.matched_fields(text)
    split = gitfiles.split_fields([text])
    assert split is None or split == [gitfiles.matched_fields(text)]


@settings(max_examples=300, deadline=None)
@given(logs=st.lists(st.lists(st.one_of(_good_line, _log_line, st.binary(max_size=90)), max_size=4).map(
    lambda lines: b"".join(line + b"\n" for line in lines)), max_size=5))
def test_logs_parsed_together_give_what_each_gives_alone(logs: list[bytes]) -> None:
    """A repo's reflogs are cut together and checked once for all: each log's fields are what the regex gives it
    alone, whether its neighbours are as git writes them or not (one that is not sends each to its own parse)."""
    assert gitfiles.logs_fields(logs) == [gitfiles.matched_fields(log.decode("utf-8", "replace")) for log in logs]
    split = gitfiles.split_fields([log.decode("utf-8", "replace") for log in logs])
    assert split is None or split == [gitfiles.matched_fields(log.decode("utf-8", "replace")) for log in logs]


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_good_line, min_size=1, max_size=6), ending=st.sampled_from([b"", b"\n", b"\n\n"]))
def test_a_log_as_git_writes_it_takes_the_split_path(lines: list[bytes], ending: bytes) -> None:
    text = (b"\n".join(lines) + ending).decode("utf-8", "replace")
    assert gitfiles.split_fields([text]) == [gitfiles.matched_fields(text)] != [[]]


@settings(max_examples=100, deadline=None)
@given(logs=st.lists(st.lists(_good_line, max_size=4).map(lambda lines: "".join(
    line.decode("utf-8", "replace") + "\n" for line in lines)), min_size=2, max_size=5).filter(any))
def test_logs_as_git_writes_them_take_the_split_path_together(logs: list[str]) -> None:
    assert gitfiles.split_fields(logs) == [gitfiles.matched_fields(log) for log in logs]


def test_lines_after_a_prune_of_the_newest_ones_reach_events_and_search(tmp_path: Path, db_path: Path) -> None:
    """`prune-events` may delete the lines with the highest ids: a later line must not take one of their ids,
    which events (the repo's cursor) and search (what it indexed) have already passed."""
    root = tmp_path / "src"
    repo = init_repo(root / "app", commits=2)
    for log in (repo / ".git" / "logs").rglob("*"):  # make every line a day old
        if log.is_file():
            log.write_bytes(b"".join(_older(line) for line in log.read_bytes().splitlines(keepends=True)))
    index = open_index(db_path)
    scan(index, [str(root)])
    assert search(index, "commit", kinds=["reflog", "commit"])["match_count"] > 0  # indexes the lines
    held, newest = index.conn.execute("select count(*), max(at) from reflog").fetchone()
    # git's clock in the tests is fixed: "now" is a day after the (moved back) newest line
    assert prune_events(index, 3600, now=newest + 86400)["reflog_lines_deleted"] == held == 4
    commit_file(repo, "n.txt", "n\n", "after the prune")
    refresh_repo(index, str(repo))
    head = git(repo, "rev-parse", "HEAD").strip()
    assert events_of(index, "refs/heads/main") == [(head, "commit: after the prune")]
    found = search(index, "after the prune", kinds=["reflog", "commit"])["matches"]
    assert [(m["source"], m["sha"]) for m in found] == [("reflog", head)]
    index.close()


def _older(line: bytes) -> bytes:
    """A reflog line with its time moved a day back."""
    head, tab, message = line.partition(b"\t")
    fields = head.split(b" ")
    fields[-2] = str(int(fields[-2]) - 86400).encode()
    return b" ".join(fields) + tab + message
