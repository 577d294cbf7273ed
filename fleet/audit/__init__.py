"""The audit log: every MCP tool call, proposal transition and human decision, hash-chained and signed.

The API the rest of fleetdeck uses (format and guarantees: docs/audit.md):

    from fleet import audit
    audit.setup(db_path)             # at process start: refuses (FleetError) a bad key, folder or settings
    audit.record("decision", op="commit", proposal_id=pid, decision="approved", actor="dashboard",
                 risk="medium", repo_path=path, summary="approved on the dashboard")
    audit.status()                   # {"state": "ok" | "degraded" | "off" | "not_started", ...}

`record` never raises and never blocks on fsync unless `decision` is given (human and policy decisions are
synced before it returns); it returns the entry written, or None when the audit is off or degraded. A
decision or an execution uses `audit.setup(db).require(...)` instead, which raises AUDIT_UNAVAILABLE when the
entry cannot be written (unless `[audit] allow_degraded_writes`); `fold(key, ...)` records calls nobody
authenticated as one counted entry per window.
Reserved fields (seq, hashes, id, time, versions, signature) are set by the log alone: `record` has no
parameter for them.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet.audit.ledger import AuditLog

__all__ = ["AuditLog", "record", "setup", "status", "verify_log"]

log = logging.getLogger("fleetdeck.audit")
_logs: dict[str, AuditLog] = {}
_current: AuditLog | None = None
_guard = threading.Lock()


def setup(db_path: str | os.PathLike[str] | None = None) -> AuditLog:
    """This process's audit log for the index at `db_path` (opened once per folder, then reused).

    Raises FleetError (AUDIT_KEY, AUDIT_UNUSABLE, BAD_ARGUMENT) for a configuration that cannot be honoured:
    callers let it stop the process rather than run without the audit the person configured.
    """
    global _current
    from fleet.audit.config import resolve
    from fleet.audit.ledger import AuditLog

    config = resolve(db_path)
    with _guard:
        key = f"{config.enabled}:{config.dir}:{config.key}"
        opened = _logs.get(key)
        if opened is None:
            opened = _logs[key] = AuditLog(config)
        _current = opened
        return opened


def record(event: str, **fields: Any) -> dict | None:
    """Append one entry to this process's log (see AuditLog.record for the fields); never raises."""
    target = _current
    if target is None:
        try:
            target = setup()
        except Exception as exc:  # the entry point should have called setup(); say so, lose no call
            log.error("audit log not set up and cannot be opened: %s", exc)
            return None
    return target.record(event, **fields)


def status() -> dict[str, Any]:
    if _current is None:
        return {"state": "not_started"}
    return _current.status()


def __getattr__(name: str) -> Any:
    """`fleet.audit.verify_log` and `fleet.audit.AuditLog` without importing cryptography for every CLI run."""
    if name == "verify_log":
        from fleet.audit.verify import verify_log
        return verify_log
    if name == "AuditLog":
        from fleet.audit.ledger import AuditLog
        return AuditLog
    raise AttributeError(name)
