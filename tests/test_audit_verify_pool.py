"""Signatures checked by worker processes (large logs) give exactly the report of the inline pass: the same
first bad seq and reason, and the same counters up to it."""

from __future__ import annotations

import json

import pytest

from fleet.audit import sigpool, verify
from fleet.audit.canon import canonical
from fleet.audit.keys import load_signer
from fleet.audit.verify import verify_log
from tests.fleets.audit_log import fill, locate, make_log, new_key, pubkeys, read_lines, rewrite, write_lines
from tests.fleets.cli import run_cli


@pytest.fixture
def pooled(monkeypatch):
    """Every log is large enough for the pool, in batches of 4; counts the pools started."""
    started = []
    monkeypatch.setattr(verify, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(sigpool, "BATCH", 4)
    monkeypatch.setattr(verify, "SignaturePool", lambda *a: started.append(a) or sigpool.SignaturePool(*a))
    return started


def _log(tmp_path, unsigned_first: int = 0):
    private, public, _ = new_key(tmp_path / "keys")
    if unsigned_first:
        log = make_log(tmp_path)
        fill(log, unsigned_first)
        log.close()
    log = make_log(tmp_path, key=private, segment_max_bytes=8 * 1024, segments_kept=100)
    fill(log, 60 - unsigned_first)
    log.close()
    return log.dir, public


def _edit(folder, seq: int, change) -> None:
    path, i = locate(folder, seq)
    lines = read_lines(path)
    entry = json.loads(lines[i])
    change(entry)
    lines[i] = canonical(entry) + b"\n"
    write_lines(path, lines)


def _steal_signature(folder, seq: int) -> None:
    """seq's signature replaced by its neighbour's: well-formed, by the right key, not for this hash."""
    path, i = locate(folder, seq + 1)
    other = json.loads(read_lines(path)[i])["sig"]
    _edit(folder, seq, lambda e: e.update(sig=other))


def both(folder, public, **kw):
    inline = verify_log(folder, pubkeys(public), workers=1, **kw)
    workers = verify_log(folder, pubkeys(public), workers=2, **kw)
    assert workers.as_dict() == inline.as_dict()
    return workers


@pytest.mark.slow
def test_an_intact_log_verifies_the_same_with_workers(tmp_path, pooled):
    folder, public = _log(tmp_path)
    report = both(folder, public, require_signed=True)
    assert report.ok and report.entries == report.signed == 60 and report.segments > 3
    assert len(pooled) == 1                                   # the workers ran (workers=1 starts none)


@pytest.mark.parametrize("seq", [1, 2, 13, 41, 59])
def test_one_bad_signature_is_named_exactly(tmp_path, pooled, seq):
    folder, public = _log(tmp_path)
    _steal_signature(folder, seq)
    report = both(folder, public)
    assert (report.ok, report.first_bad_seq, report.reason, report.verified_through) == (
        False, seq, "bad signature", seq - 1 if seq > 1 else None)


def test_a_bad_signature_before_a_chain_break_comes_first(tmp_path, pooled):
    folder, public = _log(tmp_path)
    _steal_signature(folder, 13)
    _edit(folder, 50, lambda e: e.update(summary="edited"))   # a hash mismatch found later in the pass
    report = both(folder, public)
    assert (report.first_bad_seq, report.reason, report.entries, report.signed) == (13, "bad signature", 12, 13)


@pytest.mark.slow
def test_a_bad_signature_before_an_unknown_key_and_before_the_anchor(tmp_path, pooled):
    folder, public = _log(tmp_path)
    attacker = load_signer(new_key(tmp_path / "attacker")[0])
    rewrite(folder, lambda entry: None, signer=attacker, from_seq=40)      # unknown key from seq 40 on
    _steal_signature(folder, 20)
    report = both(folder, public)
    assert (report.first_bad_seq, report.reason) == (20, "bad signature")
    clean, key = _log(tmp_path / "second")
    _steal_signature(clean, 58)
    report = both(clean, key, anchor={"seq": 60, "hash": "sha256:" + "0" * 64})   # a wrong anchor too
    assert (report.first_bad_seq, report.reason, report.anchor) == (58, "bad signature", None)


def test_counters_with_unsigned_entries_first(tmp_path, pooled):
    folder, public = _log(tmp_path, unsigned_first=10)
    _steal_signature(folder, 30)
    report = both(folder, public)
    assert (report.first_bad_seq, report.unsigned, report.signed, report.entries) == (30, 10, 20, 29)


@pytest.mark.slow
def test_the_cli_checks_a_large_log_with_workers(tmp_path):
    """`python -m fleet audit verify` on a log over the pool's threshold (spawned workers): the same report
    as `--workers 1`, exit 3 on a bad signature; `--workers 0` is a usage error."""
    private, public, _ = new_key(tmp_path / "keys")
    log = make_log(tmp_path, key=private, segment_max_bytes=64 * 1024 * 1024)
    while sum(p.stat().st_size for p in log.dir.glob("*.jsonl")) < sigpool.POOL_MIN_BYTES:
        fill(log, 1000)
    last = log.head()[0]
    log.close()
    _steal_signature(log.dir, last - 7)
    reports = []
    for workers in ("2", "1"):
        run = run_cli("audit", "verify", "--dir", str(log.dir), "--pubkey", str(public), "--workers", workers,
                      "--json", process=True)  # the workers are spawned from the CLI's own process
        assert run.returncode == 3, run.stderr
        reports.append(json.loads(run.stdout))
    assert reports[0] == reports[1] and reports[0]["first_bad_seq"] == last - 7
    assert reports[0]["reason"] == "bad signature"
    assert run_cli("audit", "verify", "--dir", str(log.dir), "--workers", "0").returncode == 2
