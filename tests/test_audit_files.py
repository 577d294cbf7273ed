"""The audit files: permissions, torn lines after a crash, kill -9, several processes, disk full, audit off."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fleet.audit.ledger import AuditError
from fleet.audit.verify import verify_log
from tests.fleets.audit_log import fill, files, make_log, read_lines
from tests.fleets.cli import fleetdeck_env, run_cli

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tests.fleets.audit_log import make_log
    base, count, name = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    log = make_log(base, segment_max_bytes=int(sys.argv[4]), segments_kept=1000)
    print("ready", flush=True)
    sys.stdin.readline()                       # start together
    i = 0
    while count < 0 or i < count:
        entry = log.record("tool_call", tool="t", agent=name, summary=f"{name} {i}")
        print(entry["seq"] if entry else "lost", flush=count < 0)
        i += 1
    log.close()
""")


def spawn(base: Path, count: int, name: str, segment_bytes: int = 1 << 30) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(base), str(count), name, str(segment_bytes)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=fleetdeck_env())
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_private_folder_and_files(tmp_path):
    log = make_log(tmp_path)
    fill(log, 3)
    log.close()
    assert os.stat(log.dir).st_mode & 0o777 == 0o700
    for name in ("current.jsonl", ".lock"):
        assert os.stat(log.dir / name).st_mode & 0o777 == 0o600
    assert os.stat(tmp_path / "audit.secret").st_mode & 0o777 == 0o600
    open_dir = tmp_path / "other"
    (open_dir / "audit").mkdir(parents=True)
    os.chmod(open_dir / "audit", 0o755)
    with pytest.raises(AuditError, match="open to other users"):
        make_log(open_dir)


def test_torn_last_line_is_set_aside_and_recorded(tmp_path):
    log = make_log(tmp_path)
    fill(log, 5)
    log.close()
    active = log.dir / "current.jsonl"
    torn = b'{"actor":null,"agent":{"name":"test-agent","self_decl'
    with open(active, "ab") as fh:
        fh.write(torn)
    before = verify_log(log.dir)
    assert (before.ok, before.reason, before.first_bad_seq) == (False, "torn line", 6)
    again = make_log(tmp_path)                                  # the next start
    (side,) = again.set_aside
    assert (log.dir / side).read_bytes() == torn and side.endswith("-after-5.part")
    assert os.stat(log.dir / side).st_mode & 0o777 == 0o600
    again.close()
    entry = json.loads(read_lines(active)[-1])
    assert (entry["seq"], entry["event"]) == (6, "torn_line_set_aside") and side in entry["summary"]
    after = verify_log(log.dir)
    assert after.ok and after.last_seq == 6
    status = run_cli("audit", "status", "--dir", str(log.dir))
    assert f"set aside after a crash (kept, recorded in the chain): {log.dir / side}" in status.stdout


def test_kill_9_during_a_burst(tmp_path):
    child = spawn(tmp_path, -1, "burst", segment_bytes=64 * 1024)
    child.stdin.write("go\n")
    child.stdin.flush()
    reported = []
    while len(reported) < 400:
        reported.append(int(child.stdout.readline()))
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    reported += [int(x) for x in child.stdout.read().split()]
    log = make_log(tmp_path, segment_max_bytes=64 * 1024)       # the next start
    log.record("tool_call", summary="after the crash")
    log.close()
    report = verify_log(log.dir)
    assert report.ok, report
    assert len(files(log.dir)) > 1                             # the burst rotated segments
    assert report.last_seq >= reported[-1] + 1 and reported == list(range(1, len(reported) + 1))


@pytest.mark.slow
def test_processes_appending_at_once_make_one_chain(tmp_path):
    children = [spawn(tmp_path, 1500, f"p{i}", segment_bytes=128 * 1024) for i in range(3)]
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    seqs = []
    for child in children:
        out, _ = child.communicate(timeout=300)
        assert child.returncode == 0
        seqs += [int(x) for x in out.split()]
    assert sorted(seqs) == list(range(1, 4501))               # every append got its own seq, none lost
    report = verify_log(tmp_path / "audit")
    assert report.ok and report.entries == 4500 and report.segments > 3, report


FULL = textwrap.dedent("""
    import json, os, resource, signal, sys
    from pathlib import Path
    from tests.fleets.audit_log import make_log
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    log = make_log(Path(sys.argv[1]))
    log.record("tool_call", summary="before")
    size = os.path.getsize(log.dir / "current.jsonl")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1500, hard))       # the disk fills up
    results = [log.record("tool_call", summary=f"call {i}") is not None for i in range(6)]
    degraded = log.status()
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))              # space again
    last = log.record("tool_call", summary="after")
    log.close()
    print(json.dumps({"results": results, "degraded": degraded, "last": last, "status": log.status()}))
""")


def test_disk_full_degrades_then_records_the_gap(tmp_path):
    run = subprocess.run([sys.executable, "-c", FULL, str(tmp_path)], capture_output=True, text=True,
                         env=fleetdeck_env(), timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    lost = out["results"].count(False)
    assert 1 <= lost < 6 and out["results"][:2] == [True, True]
    assert out["degraded"]["state"] == "degraded" and out["degraded"]["degraded"]["lost"] == lost
    assert "audit log degraded" in run.stderr
    assert out["status"]["state"] == "ok"
    entries = [json.loads(line) for line in read_lines(tmp_path / "audit" / "current.jsonl")[1:]]
    gap = entries[-2]
    assert gap["event"] == "gap" and gap["summary"].startswith(f"{lost} entries could not be appended")
    assert entries[-1]["summary"] == "after" and entries[-1]["seq"] == gap["seq"] + 1
    assert verify_log(tmp_path / "audit").ok


def test_audit_off_is_a_named_setting(tmp_path):
    config = tmp_path / "config"
    (config / "fleetdeck").mkdir(parents=True)
    (config / "fleetdeck" / "settings.toml").write_text("[audit]\nenabled = false\n")
    db = tmp_path / "fleet.db"
    status = run_cli("--db", str(db), "audit", "status", "--json", env={"XDG_CONFIG_HOME": str(config)})
    assert json.loads(status.stdout)["enabled"] is False
    code = ("from fleet import audit; log = audit.setup(); print(log.record('tool_call'), "
            "audit.status()['state'])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=fleetdeck_env(XDG_CONFIG_HOME=str(config), FLEETDECK_DB=str(db)))
    assert run.stdout.split() == ["None", "off"], run.stderr
    assert not (tmp_path / "audit").exists()
    (config / "fleetdeck" / "settings.toml").write_text("[presence]\nrecord_mcp_clients = false\n[audit]\n"
                                                       "enabled = false\n")     # one file, both sections
    both = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=fleetdeck_env(XDG_CONFIG_HOME=str(config), FLEETDECK_DB=str(db)))
    assert both.stdout.split() == ["None", "off"], both.stderr
    env_off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env=fleetdeck_env(FLEETDECK_AUDIT="off", FLEETDECK_DB=str(db)))
    assert env_off.stdout.split() == ["None", "off"]


@pytest.mark.parametrize("text,message", [
    ("[audit]\nfsync_batch = 0\n", "audit.fsync_batch must be between 1 and"),
    ("[audit]\nenabeld = true\n", "unknown key audit.enabeld"),
    ("[audti]\n", "unknown section [audti]"),
    ("[audit]\nenabled = 'yes'\n", "audit.enabled must be a bool"),
    ("[audit\n", "not valid TOML"),
    ("[presence]\nrecord_mcp_clients = 1\n", "presence.record_mcp_clients must be a bool"),
])
def test_bad_settings_are_clear_errors(tmp_path, text, message):
    config = tmp_path / "config"
    (config / "fleetdeck").mkdir(parents=True)
    (config / "fleetdeck" / "settings.toml").write_text(text)
    run = run_cli("--db", str(tmp_path / "fleet.db"), "audit", "status", env={"XDG_CONFIG_HOME": str(config)})
    assert run.returncode == 1 and message in run.stderr and "BAD_ARGUMENT" in run.stderr


def test_fsync_is_batched_by_time(tmp_path):
    log = make_log(tmp_path, fsync_interval_ms=20, fsync_batch=10_000)
    fill(log, 5)
    assert log._unsynced == 5
    deadline = time.monotonic() + 5
    while log._unsynced and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log._unsynced == 0
    log.record("decision", decision="approved", actor="dashboard")
    assert log._unsynced == 0                                 # a decision is synced before record returns
    log.close()


@pytest.mark.slow
def test_verify_while_processes_append(tmp_path):
    """The verifier reads a snapshot taken under the append lock: lines in flight, rotations and prunes
    happening meanwhile never show up as torn lines or gaps."""
    children = [spawn(tmp_path, 2000, f"w{i}", segment_bytes=64 * 1024) for i in range(2)]
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    reports = []
    while any(child.poll() is None for child in children):
        if (tmp_path / "audit").is_dir():
            reports.append(verify_log(tmp_path / "audit"))
    for child in children:
        child.communicate(timeout=120)
    assert len(reports) >= 3 and all(r.ok for r in reports), [r for r in reports if not r.ok][:1]
    assert verify_log(tmp_path / "audit").entries == 4000


def test_an_unreadable_settings_file_degrades_the_log_instead_of_stopping_the_bridge(tmp_path):
    settings = tmp_path / "settings.toml"
    settings.write_text("[audit\n")
    code = ("from fleet import audit; log = audit.setup(); s = audit.status(); "
            "print(log.record('tool_call') is not None, s['state'], 'not valid TOML' in s['settings_error'])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=fleetdeck_env(FLEETDECK_SETTINGS=str(settings), FLEETDECK_DB=str(tmp_path / "fleet.db")))
    assert run.stdout.split() == ["True", "degraded", "True"], run.stderr
    assert "recording with the defaults" in run.stderr
