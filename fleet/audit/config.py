"""Where this process's audit log lives and how it behaves: settings file, environment, then defaults.

The folder defaults to `audit/` next to the index (the index path comes from --db, $FLEETDECK_DB or
$XDG_DATA_HOME). `FLEETDECK_AUDIT_DIR` and `FLEETDECK_AUDIT_KEY` override the settings file's `audit.dir`
and `audit.key`; `FLEETDECK_AUDIT=off` (or `audit.enabled = false`) turns the log off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fleet.errors import FleetError
from fleet.index.store import default_db_path
from fleet.settings import SECTIONS, load_settings, settings_path


@dataclass(frozen=True)
class AuditConfig:
    enabled: bool
    dir: Path                       # the segments, lock, checkpoint and set-aside torn lines
    data_dir: Path                  # holds audit.secret (the repo/args fingerprint key), never shipped
    key: Path | None                # signing key; None = unsigned entries
    keys_dir: Path                  # the person's key pairs (keygen writes here; verify trusts *.pub.pem)
    verify_keys: tuple[Path, ...] = ()
    fsync_interval_ms: int = 200
    fsync_batch: int = 256
    segment_max_bytes: int = 8 * 1024 * 1024
    segments_kept: int = 16
    retention_days: int = 90        # a segment with an entry younger than this is never pruned (0: no floor)
    allow_degraded_writes: bool = False  # decisions go on while appends fail (else AUDIT_UNAVAILABLE)
    settings_error: str | None = None   # the settings file could not be read: file values unknown, defaults used


def unavailable(folder: Path | str, why: str) -> FleetError:
    return FleetError("AUDIT_UNAVAILABLE", f"the audit log in {folder} cannot be written ({why}): nothing was "
                                           "decided or run. Fix the audit folder (`fleetdeck audit status`), or "
                                           "set [audit] allow_degraded_writes = true to decide without it")


def keys_dir() -> Path:
    return settings_path().parent / "audit-keys"


def resolve(db_path: str | os.PathLike[str] | None = None) -> AuditConfig:
    """The audit configuration for an index at `db_path` (FleetError BAD_ARGUMENT on a bad value)."""
    try:
        audit, settings_error = load_settings()["audit"], None
    except FleetError as exc:  # the bridge keeps answering (as presence does); the log says it is degraded
        audit = {key: spec.default for key, spec in SECTIONS["audit"].items()}
        settings_error = exc.message
    data_dir = (Path(db_path) if db_path else default_db_path()).expanduser().absolute().parent
    enabled = audit["enabled"]
    switch = os.environ.get("FLEETDECK_AUDIT", "").strip().lower()
    if switch in ("off", "0", "false", "no"):
        enabled = False
    elif switch not in ("", "on", "1", "true", "yes"):
        raise FleetError("BAD_ARGUMENT", f"FLEETDECK_AUDIT must be on or off, not {switch!r}")
    folder = os.environ.get("FLEETDECK_AUDIT_DIR") or audit["dir"]
    key = os.environ.get("FLEETDECK_AUDIT_KEY") or audit["key"]
    return AuditConfig(
        enabled=enabled,
        dir=Path(folder).expanduser().absolute() if folder else data_dir / "audit",
        data_dir=data_dir,
        key=Path(key).expanduser() if key else None,
        keys_dir=keys_dir(),
        verify_keys=tuple(Path(p).expanduser() for p in audit["verify_keys"]),
        fsync_interval_ms=audit["fsync_interval_ms"],
        fsync_batch=audit["fsync_batch"],
        segment_max_bytes=audit["segment_max_bytes"],
        segments_kept=audit["segments_kept"],
        retention_days=audit["retention_days"],
        allow_degraded_writes=audit["allow_degraded_writes"],
        settings_error=settings_error,
    )
