"""Appending to the audit log: one hash chain shared by every fleetdeck process on the machine.

Appends take an exclusive fcntl lock on `.lock`, learn the chain's head from the active segment (re-read only
when its size or inode changed, i.e. another process appended or rotated), write whole lines with one
`write()`, and release. fsync is batched: a background thread syncs at most `fsync_interval_ms` after an
append, or at once after `fsync_batch` appends; an entry carrying a decision is synced before `append`
returns. A failed append never raises to the caller: the log goes "degraded" (logged, shown by `status()`),
and the next successful append first writes a `gap` entry saying how many entries were lost, when and why.
A torn last line (a crash mid-write) is moved to a `torn-*.part` side file and recorded in the chain.
"""

from __future__ import annotations

import atexit
import calendar
import errno
import fcntl
import functools
import hmac
import json
import logging
import os
import secrets
import stat
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from fleet.agents.identity import is_authenticated
from fleet.audit import segments as seg
from fleet.audit.canon import (CHAIN, GENESIS, MAX_ENTRY_BYTES, NAME_CHARS, RESERVED, SCHEMA, SIGNATURE,
                               SUMMARY_CHARS, canonical, clean_text, entry_hash, plain)
from fleet.audit.config import AuditConfig, unavailable
from fleet.audit.degraded import DegradedState
from fleet.audit.fold import Folds
from fleet.audit.keys import Signer, load_signer
from fleet.errors import FleetError
from fleet.timespec import iso

log = logging.getLogger("fleetdeck.audit")
_ARGS = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=plain)

SECRET = "audit.secret"
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class AuditError(FleetError):
    """The audit folder or its files cannot be used safely (refused at start, like a bad key)."""

    def __init__(self, message: str) -> None:
        super().__init__("AUDIT_UNUSABLE", message)


def now_iso() -> str:
    return iso(time.time())


def private_dir(folder: Path) -> None:
    """Create `folder` 0700, or refuse one that others can enter or a symlink."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise AuditError(f"audit folder {folder} is not a directory (a symlink?)")
    if info.st_mode & 0o077:
        raise AuditError(f"audit folder {folder} is open to other users (mode {stat.S_IMODE(info.st_mode):04o}); "
                         f"run: chmod 700 {folder}")


def load_secret(data_dir: Path) -> bytes:
    """The per-install key of repo and argument fingerprints (created 0600 on first use, never shipped)."""
    path = data_dir / SECRET
    data_dir.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        tmp = data_dir / f".{SECRET}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, path)  # atomic create-if-absent: a concurrent first start keeps one secret
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    fd = os.open(path, os.O_RDONLY | O_NOFOLLOW)
    try:
        if os.fstat(fd).st_mode & 0o077:
            raise AuditError(f"{path} is readable by others; run: chmod 600 {path}")
        text = os.read(fd, 200).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != 32:
        raise AuditError(f"{path} is not a 64-hex-digit fingerprint key")
    return secret


class AuditLog:
    """One process's handle on the audit folder; thread-safe, and safe beside other processes."""

    def __init__(self, config: AuditConfig) -> None:
        self.config = config
        self.enabled = config.enabled
        self.dir = config.dir
        self._active = str(config.dir / seg.ACTIVE)
        self.signer: Signer | None = None
        self.degraded: dict[str, Any] | None = None
        self.set_aside: list[str] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._syncer: threading.Thread | None = None
        self._fd: int | None = None
        self._ino = -1
        self._size = -1
        self._head = (0, GENESIS)       # (seq, hash) of the last entry, valid while size and inode match
        self._unsynced = 0
        self._closed = False
        self.shared = DegradedState(config.data_dir)  # "degraded" as other processes see it
        self._orphans_seen: int | None = None
        self.folds = Folds()                          # unauthenticated refusals: one counted entry per window
        if not self.enabled:
            return
        if config.settings_error:
            log.error("audit log: %s; recording with the defaults and the environment's settings (shown as "
                      "degraded)", config.settings_error)
        if config.key is not None:
            self.signer = load_signer(config.key)     # fail closed: a configured key must work
        private_dir(self.dir)
        self.secret = load_secret(config.data_dir)
        try:
            self._lock_fd = os.open(self.dir / seg.LOCK, os.O_RDWR | os.O_CREAT | O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise AuditError(f"cannot open the audit lock in {self.dir}: {exc.strerror}") from None
        try:
            self.head()  # sets a torn line aside now, at start, and says so in the chain
        except (OSError, ValueError, AuditError) as exc:
            self._degrade(exc, 0)
        atexit.register(self.close)

    # --- public ---------------------------------------------------------------------------------------

    def fingerprint(self, kind: str, value: Any) -> str:
        """Keyed hash of a repo path (canonical: resolved) or of call arguments: comparable, not readable."""
        if kind == "repo":
            data = _realpath(str(value)).encode("utf-8", "surrogateescape")
        else:
            data = _ARGS.encode(value).encode("utf-8", "surrogateescape")
        return "hmac-sha256:" + hmac.digest(self.secret, kind.encode() + b"\0" + data, "sha256").hex()

    def record(self, event: str, *, tool: str | None = None, op: str | None = None, agent: str | None = None,
               agent_declared: str | None = None, actor: str | None = None, repo_path: str | None = None,
               args: Any = None, risk: str | None = None, proposal_id: str | None = None, decision: str | None = None,
               result: str | None = "ok", duration_ms: float | None = None, summary: str = "") -> dict | None:
        """Append one entry; the entry written, or None (audit off, or degraded: the failure is logged).

        `agent` is the caller's identity (fleet/agents/identity.py), `agent_declared` the name its MCP client
        declared: the entry's `agent` is `{name, authenticated, self_declared, declared_name}`."""
        if not self.enabled or self._closed:
            return None
        try:
            fields = _fields(
                event, summary, result=_name(result), tool=_name(tool), op=_name(op),
                agent=_agent(agent, agent_declared),
                actor=_name(actor), repo=self.fingerprint("repo", repo_path) if repo_path else None,
                args=self.fingerprint("args", args) if args is not None else None, risk=_name(risk),
                proposal_id=_name(proposal_id), decision=_name(decision),
                duration_us=None if duration_ms is None else max(0, round(duration_ms * 1000)))
        except Exception as exc:  # a caller's odd argument must not cost its tool call either
            self._degrade(exc, 1)
            return None
        with self._lock:
            try:
                with self._flock():
                    pending = self._sync_state()
                    if self.degraded:
                        pending.append(self._gap_fields(self.degraded))
                    orphans = self._orphans()
                    pending += [self._gap_fields(state, ended=True) for _, state in orphans]
                    pending += [_folded(f) for f in self.folds.due()]
                    written = self._write([*pending, fields], durable=decision is not None)
                    for path, _ in orphans:     # under the lock: no other process writes these gaps again
                        self.shared.clear(path)
            except Exception as exc:
                self._degrade(exc, 1)
                return None
            if self.degraded:
                log.warning("audit log appends again after losing %d entries", self.degraded["lost"])
                self.degraded = None
                self.shared.clear()
        self._kick()
        return written[-1]

    def fold(self, key: str, event: str, **fields: Any) -> dict | None:
        """`record` for a call nobody authenticated: the first of a window under `key` gets its entry, the
        window's others are counted into one `calls_folded` entry (fleet/audit/fold.py)."""
        if not self.enabled or not self.folds.admit(key, str(fields.get("result") or "ok")):
            return None
        return self.record(event, **fields)

    def require(self, event: str, **fields: Any) -> dict | None:
        """`record`, for an entry a decision or an execution cannot go without: FleetError AUDIT_UNAVAILABLE
        when it cannot be appended (the caller then decides and runs nothing), unless the person set
        `[audit] allow_degraded_writes = true` (then None, and the log shows itself degraded)."""
        entry = self.record(event, **fields)
        if entry is None and self.enabled and not self.config.allow_degraded_writes:
            raise unavailable(self.dir, (self.degraded or {}).get("error") or "the log is closed")
        return entry

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the chain's last entry, as it is on disk now."""
        with self._lock, self._flock():
            pending = self._sync_state()
            if pending:
                self._write(pending, durable=True)
            return self._head

    def status(self) -> dict[str, Any]:
        elsewhere = self.shared.others() if self.enabled else []
        problem = self.degraded or self.config.settings_error or elsewhere
        state = "off" if not self.enabled else ("degraded" if problem else "ok")
        return {"state": state, "dir": str(self.dir), "signed": self.signer is not None,
                "settings_error": self.config.settings_error,
                "key_id": self.signer.key_id if self.signer else None,
                "degraded": dict(self.degraded) if self.degraded else None, "elsewhere": elsewhere,
                "set_aside": list(self.set_aside)}

    def sync(self) -> None:
        """fsync what this process appended (the background thread does this on its own)."""
        with self._lock:
            fd = os.dup(self._fd) if self._unsynced and self._fd is not None else None
            self._unsynced = 0
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        if not self.enabled or self._closed:
            return
        self._write_folds(final=True)
        try:
            self.sync()
        except OSError as exc:
            log.error("audit log: final fsync failed: %s", exc)
        self._closed = True
        self._wake.set()
        with self._lock:
            for fd in (self._fd, self._lock_fd):
                if fd is not None:
                    os.close(fd)
            self._fd = None

    # --- the chain head and the active segment -------------------------------------------------------

    def _flock(self):
        return _Flock(self._lock_fd)

    def _sync_state(self) -> list[dict]:
        """Make the handle and the cached head match the files (under the lock); internal entries to write."""
        active = self._active
        try:
            info = os.stat(active, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is None or info.st_size == 0:
            self._start_segment(self._head_from_rotated(), replace=info is not None)
            return []
        if not stat.S_ISREG(info.st_mode):
            raise AuditError(f"{active} is not a regular file")
        if self._fd is None or info.st_ino != self._ino:
            self._open_active()
        if info.st_size == self._size:
            return []
        line, torn = seg.tail(self._fd, info.st_size)
        notes = []
        if torn:
            notes.append(self._set_aside(torn, info.st_size, line))
            info = os.fstat(self._fd)
        self._head = _head_of(line)
        self._size = info.st_size
        return notes

    def _open_active(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self._active, os.O_RDWR | os.O_APPEND | O_NOFOLLOW)
        self._ino = os.fstat(self._fd).st_ino
        self._size = -1

    def _head_from_rotated(self) -> tuple[int, str]:
        rotated = [path for first, path in seg.segment_files(self.dir) if first is not None]
        if rotated:
            return _head_of_record(seg.last_record(rotated[-1]))
        checkpoint = seg.read_checkpoint(self.dir)
        if checkpoint and "seq" in checkpoint:
            return int(checkpoint["seq"]), str(checkpoint["last_hash"])
        return 0, GENESIS

    def _start_segment(self, head: tuple[int, str], replace: bool = False) -> None:
        """A new active segment whose header continues the chain at `head` (the caller holds the lock)."""
        header = {"segment": 1, "schema": SCHEMA, "chain": CHAIN, "first_seq": head[0] + 1, "prev_hash": head[1],
                  "created_at": now_iso()}
        tmp = _durable_file(self.dir / f".{seg.ACTIVE}.{os.getpid()}.new", canonical(header) + b"\n")
        if replace:
            os.replace(tmp, self.dir / seg.ACTIVE)    # an empty active segment (a crash right after creating it)
        else:
            os.link(tmp, self.dir / seg.ACTIVE)       # never clobber a segment another process just made
            os.unlink(tmp)
        _fsync_dir(self.dir)
        self._open_active()
        self._size = os.fstat(self._fd).st_size
        self._head = head

    def _set_aside(self, torn: bytes, size: int, line: bytes | None) -> dict:
        """Move a torn last line to a side file, cut it from the segment, and say so in the chain."""
        after = _head_of(line)[0]
        name = f"torn-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-after-{after}.part"
        _durable_file(self.dir / name, torn, exclusive=True)
        os.ftruncate(self._fd, size - len(torn))
        os.fsync(self._fd)
        self.set_aside.append(name)
        log.warning("audit log: a torn last line (%d bytes after seq %d) was set aside in %s",
                    len(torn), after, self.dir / name)
        return _fields("torn_line_set_aside", f"{len(torn)} bytes after seq {after} (an incomplete line) "
                                              f"moved to {name}", actor="fleetdeck")

    def _gap_fields(self, d: dict, ended: bool = False) -> dict:
        """The gap entry for a degraded spell: this process's own, or (`ended`) one another process left."""
        who = f" by process {d.get('pid')} ({d.get('role')}), which ended before it could record this gap" \
            if ended else ""
        return _fields("gap", f"{d.get('lost', 0)} entries could not be appended between {d.get('since')} "
                              f"and {d.get('last_at')}{who} ({d.get('error')})", result="error", actor="fleetdeck")

    def _orphans(self) -> list[tuple[Path, dict]]:
        """Degraded spells of processes that ended before their gap entry (looked for when the state folder
        changed since the last look: one stat per append otherwise)."""
        stamp = self.shared.stamp()
        if stamp is None or stamp == self._orphans_seen:
            return []
        found = self.shared.orphans()
        if not found:
            self._orphans_seen = stamp
        return found

    # --- writing -------------------------------------------------------------------------------------

    def _write(self, fields_list: list[dict], durable: bool) -> list[dict]:
        seq, prev = self._head
        entries, lines = [], []
        for fields in fields_list:
            seq += 1
            entry = {**fields, "schema": SCHEMA, "chain": CHAIN, "signature": SIGNATURE if self.signer else 0,
                     "seq": seq, "id": uuid.uuid4().hex, "at": now_iso(), "prev_hash": prev}
            if self.signer:
                entry["key_id"] = self.signer.key_id
            entry["hash"] = prev = entry_hash(entry)
            if self.signer:
                entry["sig"] = self.signer.sign(prev)
            line = canonical(entry) + b"\n"
            if len(line) > MAX_ENTRY_BYTES:
                raise ValueError(f"an audit entry of {len(line)} bytes is over the {MAX_ENTRY_BYTES}-byte limit")
            entries.append(entry)
            lines.append(line)
        data = b"".join(lines)
        if self._size + len(data) > self.config.segment_max_bytes and self._has_entries():
            self._rotate()
        try:
            _write_all(self._fd, data)
        except OSError:
            self._undo_partial()
            raise
        self._size += len(data)
        self._head = (seq, prev)
        self._unsynced += len(entries)
        if durable:
            os.fsync(self._fd)
            self._unsynced = 0
        return entries

    def _undo_partial(self) -> None:
        """Cut what a failed write left behind (our own bytes, under the lock), or leave it for set-aside."""
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self._size = -1

    def _has_entries(self) -> bool:
        first = json.loads(os.pread(self._fd, 4096, 0).split(b"\n", 1)[0])
        return self._head[0] >= first["first_seq"]

    def _rotate(self) -> None:
        """Close the active segment under its first seq's name, start a new one, prune behind a checkpoint."""
        first = json.loads(os.pread(self._fd, 4096, 0).split(b"\n", 1)[0])["first_seq"]
        os.fsync(self._fd)
        target = self.dir / seg.segment_name(first)
        if target.exists():
            raise AuditError(f"cannot rotate: {target} already exists")
        os.rename(self.dir / seg.ACTIVE, target)
        self._start_segment(self._head)
        self._prune()

    def _prune(self) -> None:
        """Delete the oldest rotated segments over `segments_kept`, each behind a checkpoint, but never one whose
        last entry is younger than `retention_days`: a flood of entries cannot push recent ones out."""
        rotated = [path for first, path in seg.segment_files(self.dir) if first is not None]
        excess = len(rotated) - self.config.segments_kept
        floor = time.time() - self.config.retention_days * 86400 if self.config.retention_days else None
        pruned = 0
        for path in rotated[:max(0, excess)]:
            record = seg.last_record(path)
            if floor is not None and _written_at(record) > floor:
                break                            # this one and every later segment are within retention
            seq, last_hash = _head_of_record(record)
            checkpoint = {"checkpoint": 1, "seq": seq, "last_hash": last_hash, "at": now_iso(),
                          "pruned": path.name, "signature": SIGNATURE if self.signer else 0}
            if self.signer:
                checkpoint["key_id"] = self.signer.key_id
            checkpoint["hash"] = entry_hash(checkpoint)
            if self.signer:
                checkpoint["sig"] = self.signer.sign(checkpoint["hash"])
            tmp = _durable_file(self.dir / f".{seg.CHECKPOINT}.{os.getpid()}", canonical(checkpoint) + b"\n")
            os.replace(tmp, self.dir / seg.CHECKPOINT)
            _fsync_dir(self.dir)
            os.unlink(path)
            log.info("audit log: pruned %s (through seq %d) behind a checkpoint", path.name, seq)
            pruned += 1
        if pruned:
            _fsync_dir(self.dir)

    # --- degraded mode and batched fsync ------------------------------------------------------------

    def _degrade(self, exc: BaseException, lost: int) -> None:
        at = now_iso()
        first = self.degraded is None
        if first:
            self.degraded = {"since": at, "last_at": at, "lost": 0, "error": clean_text(
                f"{exc.__class__.__name__}: {exc}", 300)}
            log.error("audit log degraded: cannot append (%s); tool calls go on, the gap will be recorded", exc)
        self.degraded["lost"] += lost
        self.degraded["last_at"] = at
        if first or lost:                           # tell the other processes (best-effort)
            self.shared.publish(self.degraded, self.dir)

    def _kick(self) -> None:
        if self._syncer is None:
            self._syncer = threading.Thread(target=self._sync_loop, name="fleetdeck-audit-fsync", daemon=True)
            self._syncer.start()
        if self._unsynced >= self.config.fsync_batch:
            self._wake.set()

    def _write_folds(self, final: bool = False) -> None:
        """Append the counted entries whose window is over (all of them when `final`); never raises."""
        due = self.folds.due(final)
        if not due:
            return
        with self._lock:
            try:
                with self._flock():
                    self._write([*self._sync_state(), *map(_folded, due)], durable=final)
            except Exception as exc:
                self._degrade(exc, len(due))

    def _sync_loop(self) -> None:
        interval = self.config.fsync_interval_ms / 1000
        while not self._closed:
            self._wake.wait(interval)
            self._wake.clear()
            if self.folds.has_due():
                self._write_folds()
            try:
                self.sync()
            except OSError as exc:
                self._degrade(exc, 0)


class _Flock:
    """The cross-process append lock (fcntl on `.lock`); threads are serialized by AuditLog._lock first."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


def _fields(event: str, summary: str, **given: Any) -> dict[str, Any]:
    """Every caller-settable field of an entry (absent ones null), so all entries have one shape."""
    if RESERVED & given.keys():
        raise ValueError(f"reserved audit fields are set by the log alone: {sorted(RESERVED & given.keys())}")
    fields = dict.fromkeys(("tool", "op", "agent", "actor", "repo", "args", "risk", "proposal_id", "decision",
                            "duration_us"))
    fields.update(given)
    fields.setdefault("result", "ok")
    fields["event"] = clean_text(event, 64)
    fields["summary"] = clean_text(summary, SUMMARY_CHARS)
    return fields


def _written_at(record: dict | None) -> float:
    """When a segment's last record was written (unix seconds); +inf when it cannot be told, so it is kept."""
    stamp = (record or {}).get("at") or (record or {}).get("created_at")
    try:
        return float(calendar.timegm(time.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return float("inf")


def _folded(window: dict) -> dict[str, Any]:
    given = dict(window)
    return _fields(given.pop("event"), given.pop("summary"), **given)


def _agent(agent: str | None, declared: str | None) -> dict | None:
    """The entry's `agent`: the identity (`name`, as before), whether a credential proved it, and the name
    the client declared. `self_declared` stays for older readers: true when only the client vouches for it."""
    if not agent:
        return None
    authenticated = is_authenticated(str(agent))
    return {"name": clean_text(agent, NAME_CHARS), "authenticated": authenticated, "self_declared": not authenticated,
            "declared_name": clean_text(declared, NAME_CHARS) if declared else None}


@functools.lru_cache(maxsize=1024)
def _realpath(path: str) -> str:
    """A repo's canonical path; cached, as the bridge asks for the same few repos again and again."""
    return os.path.realpath(path)


def _name(value: object) -> str | None:
    return None if value is None else clean_text(value, NAME_CHARS)


def _head_of(line: bytes | None) -> tuple[int, str]:
    if not line:
        raise AuditError("the active audit segment has no header")
    try:
        record = json.loads(line)
    except ValueError:
        raise AuditError("the last line of the active audit segment is not JSON; run `fleetdeck audit "
                         "verify`") from None
    return _head_of_record(record)


def _head_of_record(record: dict | None) -> tuple[int, str]:
    if seg.is_header(record):
        return int(record["first_seq"]) - 1, str(record["prev_hash"])
    if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
        raise AuditError("the last audit record has no seq; run `fleetdeck audit verify`")
    return record["seq"], str(record["hash"])


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written != len(data):
        raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")


def _durable_file(path: Path, data: bytes, exclusive: bool = False) -> Path:
    """`path` (0600, never through a symlink; a new file when `exclusive`, else truncated) holding `data`,
    fsynced: ready to link or rename."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC) | O_NOFOLLOW, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
