"""Reading an audit log from where the last read ended (fleet.audit.read.entries_after with `seen`, what team
mode's pusher does every push): the same entries as a read from the start, and a read from the start whenever
that place no longer holds the entry it held (the active segment rotated, the log recreated, a line edited).
A real log with small segments, filled by the audit writer itself."""

from __future__ import annotations

import shutil

from fleet.audit.read import entries_after, still_at
from tests.fleets.audit_log import fill, files, make_log


def _read(folder, seq, seen=None):
    return [(e["seq"], line, where) for e, line, where in entries_after(folder, seq, seen)]


def _seen(folder, seq):
    [(entry, _line, where)] = [r for r in entries_after(folder, seq - 1) if r[0]["seq"] == seq][:1]
    return where, entry["hash"]


def test_a_resumed_read_gives_what_a_read_from_the_start_gives(tmp_path):
    log = make_log(tmp_path, segment_max_bytes=16 * 1024, segments_kept=1000)
    fill(log, 120)
    log.close()
    assert len(files(log.dir)) > 3
    for seq in (1, 37, 119, 120):
        seen = _seen(log.dir, seq)
        assert still_at(log.dir, seq, seen)
        assert _read(log.dir, seq, seen) == _read(log.dir, seq)
    assert [s for s, _, _ in _read(log.dir, 119, _seen(log.dir, 119))] == [120]
    assert _read(log.dir, 120, _seen(log.dir, 120)) == []


def test_a_resumed_read_reads_only_what_follows_its_place(tmp_path):
    log = make_log(tmp_path, segment_max_bytes=1 << 30)
    fill(log, 50)
    seen = _seen(log.dir, 50)
    fill(log, 5)
    log.close()
    active = files(log.dir)[-1]
    head = active.read_bytes()[:seen[0][1]]
    active.write_bytes(b"X" * len(head) + active.read_bytes()[len(head):])   # what precedes the place: unreadable
    assert [s for s, _, _ in _read(log.dir, 50, seen)] == [51, 52, 53, 54, 55]


def test_a_place_that_no_longer_holds_its_entry_reads_from_the_start(tmp_path):
    log = make_log(tmp_path, segment_max_bytes=8 * 1024, segments_kept=1000)
    fill(log, 10)
    seen = _seen(log.dir, 10)                       # in the active segment, which rotates as the log grows
    fill(log, 200)
    log.close()
    assert not still_at(log.dir, 10, seen)
    assert [s for s, _, _ in _read(log.dir, 10, seen)] == list(range(11, 211))


def test_another_log_with_the_same_entry_at_the_same_place_is_told_apart_by_its_hash(tmp_path):
    log = make_log(tmp_path, segment_max_bytes=1 << 30)
    fill(log, 20)
    log.close()
    before = _seen(log.dir, 10)
    shutil.rmtree(log.dir)                           # the log recreated: the same calls, the same file, new hashes
    again = make_log(tmp_path, segment_max_bytes=1 << 30)
    fill(again, 20)
    again.close()
    (name, offset, length), digest = before
    assert _seen(log.dir, 10)[0] == (name, offset, length)   # entry 10 sits exactly where it sat...
    assert _seen(log.dir, 10)[1] != digest                   # ...with another hash
    assert not still_at(log.dir, 10, before)
    assert [s for s, _, _ in _read(log.dir, 10, before)] == list(range(11, 21))
