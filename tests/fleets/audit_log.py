"""Helpers for the audit tests: a log in a temp dir with small segments, and an attacker's file edits."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.audit.canon import canonical, entry_hash
from fleet.audit.config import AuditConfig
from fleet.audit.keys import Signer, keygen, load_public
from fleet.audit.ledger import AuditLog
from fleet.audit.segments import segment_files
from tests.fleets.cli import run_cli  # noqa: F401  (the audit tests import it from here)


def make_log(base: Path, key: Path | None = None, **overrides) -> AuditLog:
    config = AuditConfig(enabled=True, dir=base / "audit", data_dir=base, key=key, keys_dir=base / "keys",
                         **{"fsync_interval_ms": 50, "fsync_batch": 64, **overrides})
    return AuditLog(config)


def new_key(folder: Path) -> tuple[Path, Path, str]:
    kid, private, public = keygen(folder)
    return private, public, kid


def fill(log: AuditLog, count: int, **fields) -> list[dict]:
    return [log.record("tool_call", tool="repo.status", agent="test-agent", repo_path="/tmp", args={"n": i},
                       risk="read", duration_ms=0.25, summary=f"call {i}", **fields) for i in range(count)]


def pubkeys(*paths: Path) -> dict:
    from fleet.audit.keys import key_id

    return {key_id(k): k for k in map(load_public, paths)}


def files(folder: Path) -> list[Path]:
    return [path for _, path in segment_files(folder)]


def read_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def locate(folder: Path, seq: int) -> tuple[Path, int]:
    """(segment, line index) of the entry with `seq`."""
    for path in files(folder):
        for i, line in enumerate(read_lines(path)):
            if json.loads(line).get("seq") == seq:
                return path, i
    raise AssertionError(f"seq {seq} not found")


def rewrite(folder: Path, edit, signer: Signer | None = None, strip: bool = False, from_seq: int = 1) -> None:
    """An attacker with write access: apply `edit(entry)` to every entry, then recompute every hash (and
    header) so the chain is self-consistent; re-sign entries from `from_seq` on with `signer`, or drop
    signatures with `strip`."""
    prev = "genesis"
    for path in files(folder):
        out = []
        for line in read_lines(path):
            value = json.loads(line)
            if "segment" in value:
                value["prev_hash"] = prev
                out.append(canonical(value) + b"\n")
                continue
            edit(value)
            value["prev_hash"] = prev
            if strip:
                value.pop("sig", None)
                value.pop("key_id", None)
                value["signature"] = 0
            if signer is not None and value["seq"] >= from_seq:
                value["key_id"] = getattr(signer, "forged_id", signer.key_id)
                value["signature"] = 1
            value["hash"] = prev = entry_hash(value)
            if signer is not None and value["seq"] >= from_seq:
                value["sig"] = signer.sign(value["hash"])
            out.append(canonical(value) + b"\n")
        write_lines(path, out)


