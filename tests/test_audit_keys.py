"""Audit keys and settings: keygen, the documented key id, the settings file's audit keys, fail-closed loads."""

from __future__ import annotations

import hashlib
import json
import os
import re

import pytest
from cryptography.hazmat.primitives import serialization

from fleet.audit.config import resolve
from fleet.audit.keys import AuditKeyError, load_public, load_signer
from fleet.audit.read import export
from fleet.audit.verify import verify_log
from tests.fleets.audit_log import make_log, pubkeys
from tests.fleets.cli import run_cli


def test_keygen_writes_a_private_pair_and_says_how_to_use_it(tmp_path):
    run = run_cli("audit", "keygen", "--out-dir", str(tmp_path / "keys"))
    assert run.returncode == 0, run.stderr
    kid = re.search(r"^key ([0-9a-f]{16})$", run.stdout, re.M).group(1)
    private, public = tmp_path / "keys" / f"{kid}.pem", tmp_path / "keys" / f"{kid}.pub.pem"
    assert os.stat(private).st_mode & 0o777 == 0o600 and os.stat(tmp_path / "keys").st_mode & 0o777 == 0o700
    assert "FLEETDECK_AUDIT_KEY=" in run.stdout and "[audit]" in run.stdout
    raw = load_public(public).public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert kid == hashlib.sha256(raw).hexdigest()[:16] == load_signer(private).key_id   # the documented key id


@pytest.mark.slow
def test_settings_file_names_the_folder_and_the_key(tmp_path, monkeypatch):
    kid = re.search(r"^key (\w+)$", run_cli("audit", "keygen", "--out-dir", str(tmp_path / "k")).stdout, re.M)[1]
    config = tmp_path / "config" / "fleetdeck"
    config.mkdir(parents=True)
    (config / "settings.toml").write_text(f'[audit]\ndir = "{tmp_path}/elsewhere"\nkey = "{tmp_path}/k/{kid}.pem"\n'
                                          "fsync_batch = 8\nsegments_kept = 3\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    resolved = resolve(tmp_path / "fleet.db")
    assert (resolved.dir, resolved.fsync_batch, resolved.segments_kept) == (tmp_path / "elsewhere", 8, 3)
    assert resolved.data_dir == tmp_path
    monkeypatch.setenv("FLEETDECK_AUDIT_DIR", str(tmp_path / "env-wins"))
    assert resolve(tmp_path / "fleet.db").dir == tmp_path / "env-wins"
    status = run_cli("--db", str(tmp_path / "fleet.db"), "audit", "status", "--json",
                     env={"XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert json.loads(status.stdout)["key_id"] == kid
    # verify without --pubkey trusts the configured key
    log = make_log(tmp_path, key=tmp_path / "k" / f"{kid}.pem")
    log.record("tool_call", summary="=HYPERLINK(1)")
    log.close()
    verified = run_cli("audit", "verify", "--dir", str(log.dir), "--require-signed", "--json",
                       env={"XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert verified.returncode == 0 and json.loads(verified.stdout)["keys"] == [kid]


def test_csv_export_neutralises_formulas(tmp_path):
    import io

    log = make_log(tmp_path)
    log.record("tool_call", summary="=HYPERLINK(\"http://x\")", agent="+agent")
    log.close()
    out = io.StringIO()
    assert export(log.dir, out, "csv") == 1
    row = out.getvalue().splitlines()[1]
    assert "'=HYPERLINK" in row and ",'+agent," in row


@pytest.mark.parametrize("case", ["missing", "loose", "garbage", "public-only"])
def test_unusable_signing_keys_are_refused(tmp_path, case):
    kid = re.search(r"^key (\w+)$", run_cli("audit", "keygen", "--out-dir", str(tmp_path)).stdout, re.M)[1]
    path = {"missing": tmp_path / "nope.pem", "loose": tmp_path / f"{kid}.pem",
            "garbage": tmp_path / "garbage.pem", "public-only": tmp_path / f"{kid}.pub.pem"}[case]
    if case == "loose":
        os.chmod(path, 0o604)
    if case == "garbage":
        path.write_bytes(b"\x00" * 100)
        os.chmod(path, 0o600)
    if case == "public-only":
        os.chmod(path, 0o600)
    with pytest.raises(AuditKeyError):
        make_log(tmp_path / "log", key=path)
    assert not (tmp_path / "log" / "audit").exists()           # refused before anything was written


def test_signed_then_unsigned_entries_are_counted(tmp_path):
    kid = re.search(r"^key (\w+)$", run_cli("audit", "keygen", "--out-dir", str(tmp_path / "k")).stdout, re.M)[1]
    signed = make_log(tmp_path, key=tmp_path / "k" / f"{kid}.pem")
    signed.record("tool_call")
    signed.close()
    plain = make_log(tmp_path)
    plain.record("tool_call")
    plain.close()
    report = verify_log(plain.dir, pubkeys(tmp_path / "k" / f"{kid}.pub.pem"))
    assert report.ok and (report.signed, report.unsigned) == (1, 1)
    strict = verify_log(plain.dir, pubkeys(tmp_path / "k" / f"{kid}.pub.pem"), require_signed=True)
    assert (strict.first_bad_seq, strict.reason) == (2, "unsigned")
