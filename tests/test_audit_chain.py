"""The audit chain: entry shape, canonical hashing, and every tamper case named by its first bad seq."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from fleet.audit.canon import MAX_ENTRY_BYTES, RESERVED, canonical, entry_hash
from fleet.audit.keys import load_signer
from fleet.audit.verify import verify_log
from tests.fleets.audit_log import fill, files, locate, make_log, new_key, pubkeys, read_lines, rewrite, write_lines
from tests.fleets.cli import run_cli


@pytest.fixture
def signed(tmp_path):
    """A signed log of 60 entries over several segments (small rotation size), and its public key."""
    private, public, kid = new_key(tmp_path / "keys")
    log = make_log(tmp_path, key=private, segment_max_bytes=8 * 1024, segments_kept=100)
    fill(log, 60)
    log.close()
    assert len(files(log.dir)) >= 4
    return log.dir, public, kid


def check(folder, public=None, **kw):
    return verify_log(folder, pubkeys(public) if public else None, **kw)


def test_entry_fields_and_canonical_hash(tmp_path):
    log = make_log(tmp_path)
    entry = log.record("tool_call", tool="repo.status", agent="claude-code", repo_path=str(tmp_path),
                       args={"repo": "secret-name"}, risk="read", duration_ms=1.2345, summary="repo.status\nok")
    log.close()
    line = read_lines(log.dir / "current.jsonl")[1]
    stored = json.loads(line)
    assert stored == entry
    assert line == canonical(entry) + b"\n"                       # the line is the canonical form itself
    assert entry["hash"] == entry_hash(entry) and entry["hash"].startswith("sha256:")
    assert (entry["seq"], entry["prev_hash"], entry["schema"], entry["chain"], entry["signature"]) == \
        (1, "genesis", 1, 1, 0)
    assert entry["agent"] == {"name": "claude-code", "authenticated": True, "self_declared": False,
                              "declared_name": None}
    assert entry["repo"].startswith("hmac-sha256:") and str(tmp_path) not in line.decode()
    assert "secret-name" not in line.decode() and entry["args"].startswith("hmac-sha256:")
    assert entry["duration_us"] == 1234 and entry["summary"] == "repo.status ok"
    assert len(entry["id"]) == 32 and entry["at"].endswith("Z")
    assert log.fingerprint("repo", str(tmp_path) + "/.") == entry["repo"]   # canonical path, same fingerprint


def test_reserved_fields_cannot_be_set(tmp_path):
    log = make_log(tmp_path)
    for field in sorted(RESERVED):
        with pytest.raises(TypeError):
            log.record("tool_call", **{field: "forged"})
    entry = log.record("tool_call", args={"seq": 99, "hash": "x", "prev_hash": "y"}, summary='"seq":99')
    assert entry["seq"] == 1 and entry["prev_hash"] == "genesis"
    assert check(log.dir).ok


def test_oversized_entry_refused_but_never_raised(tmp_path):
    log = make_log(tmp_path)
    assert log.record("tool_call", summary="x" * (MAX_ENTRY_BYTES * 2))["summary"] == "x" * 512
    log.close()
    assert all(len(line) <= MAX_ENTRY_BYTES for line in read_lines(log.dir / "current.jsonl"))


def test_intact_signed_log_verifies(signed):
    folder, public, kid = signed
    report = check(folder, public, require_signed=True)
    assert report.ok, report
    assert (report.entries, report.signed, report.unsigned, report.first_seq, report.last_seq) == (60, 60, 0, 1, 60)
    assert report.segments == len(files(folder)) and report.keys == [kid]


def test_edit_one_byte_of_a_field(signed):
    folder, public, _ = signed
    path, i = locate(folder, 17)
    lines = read_lines(path)
    lines[i] = lines[i].replace(b'"summary":"call 16"', b'"summary":"call 15"')
    write_lines(path, lines)
    report = check(folder, public)
    assert (report.ok, report.first_bad_seq, report.reason, report.verified_through) == \
        (False, 17, "hash mismatch", 16)


def test_edit_a_hash(signed):
    folder, public, _ = signed
    path, i = locate(folder, 30)
    entry = json.loads(read_lines(path)[i])
    lines = read_lines(path)
    lines[i] = lines[i].replace(entry["hash"].encode(), entry["hash"][:-1].encode() + b"0" if
                                not entry["hash"].endswith("0") else entry["hash"][:-1].encode() + b"1")
    write_lines(path, lines)
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason) == (30, "hash mismatch")


def test_delete_a_line(signed):
    folder, public, _ = signed
    path, i = locate(folder, 22)
    lines = read_lines(path)
    del lines[i]
    write_lines(path, lines)
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason, report.verified_through) == (23, "gap", 21)


def test_reorder_two_lines(signed):
    folder, public, _ = signed
    path, i = locate(folder, 40)
    lines = read_lines(path)
    if i + 1 >= len(lines):
        path, i = locate(folder, 39)
        lines = read_lines(path)
    seq = json.loads(lines[i])["seq"]
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    write_lines(path, lines)
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason, report.verified_through) == (seq + 1, "reorder", seq - 1)


def test_duplicate_a_line(signed):
    folder, public, _ = signed
    path, i = locate(folder, 12)
    lines = read_lines(path)
    lines.insert(i + 1, lines[i])
    write_lines(path, lines)
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason, report.verified_through) == (12, "duplicate", 12)


def test_truncate_mid_line(signed):
    folder, public, _ = signed
    active = files(folder)[-1]
    data = active.read_bytes()
    active.write_bytes(data[:-40])
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason, report.verified_through) == (60, "torn line", 59)


def test_drop_a_whole_middle_segment(signed):
    folder, public, _ = signed
    segments = files(folder)
    dropped = segments[1]
    first_dropped = json.loads(read_lines(dropped)[0])["first_seq"]
    next_first = json.loads(read_lines(segments[2])[0])["first_seq"]
    dropped.unlink()
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason, report.verified_through) == (next_first, "gap", first_dropped - 1)


def test_swap_segments(signed):
    folder, public, _ = signed
    a, b = files(folder)[1:3]
    first_b = json.loads(read_lines(b)[0])["first_seq"]
    first_a = json.loads(read_lines(a)[0])["first_seq"]
    tmp = a.with_suffix(".tmp")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason, report.verified_through) == (first_b, "reorder", first_a - 1)


def test_resign_with_an_unknown_key(signed, tmp_path):
    folder, public, _ = signed
    attacker = load_signer(new_key(tmp_path / "attacker")[0])

    def edit(entry):
        if entry["seq"] == 25:
            entry["result"] = "ok"
            entry["summary"] = "nothing to see"

    rewrite(folder, edit, signer=attacker, from_seq=25)
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason, report.verified_through) == (25, "unknown key", 24)


def test_forged_key_id_is_a_bad_signature(signed, tmp_path):
    folder, public, kid = signed
    attacker = load_signer(new_key(tmp_path / "attacker")[0])
    object.__setattr__(attacker, "forged_id", kid)
    rewrite(folder, lambda entry: entry.update(result="ok"), signer=attacker, from_seq=41)
    report = check(folder, public)
    assert (report.first_bad_seq, report.reason) == (41, "bad signature")


def test_strip_signatures_needs_require_signed(signed):
    folder, public, _ = signed
    rewrite(folder, lambda entry: None, strip=True)
    loose = check(folder, public)
    assert loose.ok and (loose.signed, loose.unsigned) == (0, 60)
    strict = check(folder, public, require_signed=True)
    assert (strict.ok, strict.first_bad_seq, strict.reason) == (False, 1, "unsigned")


def test_rotated_keys_coexist(tmp_path):
    old_private, old_public, old_id = new_key(tmp_path / "keys")
    log = make_log(tmp_path, key=old_private)
    fill(log, 5)
    log.close()
    new_private, new_public, new_id = new_key(tmp_path / "keys")
    log = make_log(tmp_path, key=new_private)
    fill(log, 5)
    log.close()
    both = verify_log(log.dir, pubkeys(old_public, new_public), require_signed=True)
    assert both.ok and both.entries == 10 and both.keys == sorted([old_id, new_id])
    only_new = verify_log(log.dir, pubkeys(new_public))
    assert (only_new.first_bad_seq, only_new.reason) == (1, "unknown key")


def test_rotation_pruning_keeps_the_chain_verifiable(tmp_path):
    private, public, _ = new_key(tmp_path / "keys")
    log = make_log(tmp_path, key=private, segment_max_bytes=8 * 1024, segments_kept=2,
                   retention_days=0)  # pruning by count alone: no age floor
    fill(log, 80)
    log.close()
    kept = files(log.dir)
    assert len(kept) == 3                                            # two rotated + the active one
    checkpoint = json.loads((log.dir / "checkpoint.json").read_text())
    first_kept = json.loads(read_lines(kept[0])[0])["first_seq"]
    assert checkpoint["seq"] == first_kept - 1 and checkpoint["sig"]
    report = verify_log(log.dir, pubkeys(public), require_signed=True)
    assert report.ok and report.first_seq == first_kept and report.last_seq == 80
    assert report.checkpoint["seq"] == first_kept - 1
    kept[0].unlink()                                                 # pruning by hand, without a checkpoint
    report = verify_log(log.dir, pubkeys(public))
    assert (report.ok, report.reason, report.first_bad_seq) == (False, "gap", json.loads(
        read_lines(kept[1])[0])["first_seq"])


def test_forged_checkpoint_is_refused(tmp_path):
    private, public, _ = new_key(tmp_path / "keys")
    log = make_log(tmp_path, key=private, segment_max_bytes=8 * 1024, segments_kept=2,
                   retention_days=0)  # pruning by count alone: no age floor
    fill(log, 80)
    log.close()
    path = log.dir / "checkpoint.json"
    checkpoint = json.loads(path.read_text())
    checkpoint["seq"] += 1
    path.write_bytes(canonical(checkpoint))
    assert verify_log(log.dir, pubkeys(public)).reason == "bad checkpoint"
    checkpoint["hash"] = entry_hash(checkpoint)
    path.write_bytes(canonical(checkpoint))
    assert verify_log(log.dir, pubkeys(public)).reason == "bad signature"


@pytest.mark.slow
def test_cli_verify_exit_codes_anchor_and_export(tmp_path):
    private, public, _ = new_key(tmp_path / "keys")
    log = make_log(tmp_path, key=private)
    fill(log, 10)
    anchor = run_cli("audit", "anchor", "--dir", str(log.dir))
    assert anchor.returncode == 0, anchor.stderr
    kept = json.loads(anchor.stdout)
    assert kept["seq"] == 10 and kept["sig"]
    fill(log, 3)
    log.close()
    ok = run_cli("audit", "verify", "--dir", str(log.dir), "--pubkey", str(public), "--require-signed",
                 "--anchor", anchor.stdout.strip(), "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = json.loads(ok.stdout)
    assert report["verified_through"] == 13 and report["anchor"]["reached"] is True
    text = run_cli("audit", "verify", "--dir", str(log.dir), "--pubkey", str(public))
    assert "verified up to seq 13" in text.stdout and "cut off" in text.stdout
    # cut the tail back to seq 8: the chain alone is intact, only the anchor shows the cut
    active = files(log.dir)[-1]
    write_lines(active, read_lines(active)[:9])
    assert run_cli("audit", "verify", "--dir", str(log.dir), "--pubkey", str(public)).returncode == 0
    cut = run_cli("audit", "verify", "--dir", str(log.dir), "--pubkey", str(public), "--anchor",
                  anchor.stdout.strip(), "--json")
    assert cut.returncode == 3 and json.loads(cut.stdout)["reason"] == "tail cut"
    assert run_cli("audit", "verify", "--dir", str(log.dir), "--pubkey", str(tmp_path / "nope.pem")).returncode == 2
    assert run_cli("audit", "verify", "--dir", str(log.dir), "--bogus").returncode == 2
    assert run_cli("audit", "verify", "--dir", str(log.dir), "--require-signed",
                   env={"XDG_CONFIG_HOME": str(tmp_path / "empty-config")}).returncode == 2
    jsonl = run_cli("audit", "export", "--dir", str(log.dir), "--since", "1h")
    assert [json.loads(x)["seq"] for x in jsonl.stdout.splitlines()] == list(range(1, 9))
    csv = run_cli("audit", "export", "--dir", str(log.dir), "--format", "csv", "--until", "1h")
    assert csv.stdout.splitlines()[0].startswith("seq,at,event") and len(csv.stdout.splitlines()) == 1
    tampered = active.read_bytes().replace(b'"call 3"', b'"call 9"')
    active.write_bytes(tampered)
    bad = run_cli("audit", "verify", "--dir", str(log.dir), "--pubkey", str(public))
    assert bad.returncode == 3 and "NOT INTACT at seq 4 (hash mismatch)" in bad.stdout
    assert os.stat(log.dir).st_mode & 0o777 == 0o700


def test_monitor_reports_verified_through_and_the_first_bad_seq(signed):
    from fleet.audit.monitor import ChainMonitor

    folder, public, _ = signed
    monitor = ChainMonitor(folder, pubkeys(public), min_interval_s=0.01, clock=lambda: 1234.5)
    assert monitor.status() == {"state": "unchecked"}
    status = monitor.check()
    assert (status["state"], status["verified_through"], status["at"], status["signed"]) == ("intact", 60, 1234.5, 60)
    path, i = locate(folder, 33)
    lines = read_lines(path)
    lines[i] = lines[i].replace(b'"result":"ok"', b'"result":"no"')
    write_lines(path, lines)
    stop = threading.Event()
    worker = threading.Thread(target=monitor.run, args=(stop,))
    worker.start()
    deadline = time.monotonic() + 30
    while monitor.status()["state"] != "broken" and time.monotonic() < deadline:
        stop.wait(0.01)
    stop.set()
    worker.join(30)
    status = monitor.status()
    assert (status["state"], status["first_bad_seq"], status["reason"], status["verified_through"]) == \
        ("broken", 33, "hash mismatch", 32)


def test_a_symlinked_segment_is_not_followed(signed, tmp_path):
    folder, public, _ = signed
    victim = files(folder)[1]
    first = json.loads(read_lines(victim)[0])["first_seq"]
    moved = tmp_path / "elsewhere.jsonl"
    victim.rename(moved)
    victim.symlink_to(moved)                                         # same bytes, reached through a link
    report = check(folder, public)
    assert (report.ok, report.reason, report.first_bad_seq) == (False, "malformed", first)


def test_a_prune_interrupted_after_its_checkpoint_still_verifies(tmp_path):
    log = make_log(tmp_path, segment_max_bytes=8 * 1024, segments_kept=100)
    fill(log, 60)
    log.close()
    backup = {path.name: path.read_bytes() for path in files(log.dir)[:-1]}
    log = make_log(tmp_path, segment_max_bytes=8 * 1024, segments_kept=2,
                   retention_days=0)  # pruning by count alone: no age floor
    fill(log, 30)                                                    # rotations now prune behind a checkpoint
    log.close()
    checkpoint = json.loads((log.dir / "checkpoint.json").read_text())
    pruned = [name for name in backup if not (log.dir / name).exists()]
    assert pruned
    (log.dir / pruned[-1]).write_bytes(backup[pruned[-1]])           # the unlink never happened
    report = verify_log(log.dir)
    assert report.ok and report.first_seq == checkpoint["seq"] + 1 and report.last_seq == 90, report
