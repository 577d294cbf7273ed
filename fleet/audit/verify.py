"""The verifier: streams every segment once, in bounded memory, and names the first entry that is not intact.

    from fleet.audit.verify import verify_log
    report = verify_log("/path/to/audit", pubkeys=[...], require_signed=True, anchor=None)
    report.ok, report.first_bad_seq, report.reason, report.verified_through

"Verified through seq N" means: entries from the first retained seq (or the signed checkpoint) to N are
present, in order, unmodified since they were hashed, chained without gaps, and (when signed) signed by a
key given to the verifier. It does not prove that nothing came after N (only an anchor kept elsewhere can:
`anchor=`), nor that an entry's content was true when written, nor anything about pruned entries beyond the
checkpoint's seq and hash.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterator

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fleet.audit import segments as seg
from fleet.audit.canon import GENESIS, MAX_ENTRY_BYTES, entry_hash
from fleet.audit.keys import check
from fleet.audit.sigpool import POOL_MIN_BYTES, Pending, SignaturePool, default_workers
from fleet.errors import FleetError

RECENT = 4096   # (seq -> hash) remembered to tell a duplicate from a reordered line

@dataclass
class Report:
    ok: bool = True
    entries: int = 0
    signed: int = 0
    unsigned: int = 0
    segments: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    last_hash: str | None = None
    verified_through: int | None = None
    first_bad_seq: int | None = None
    reason: str | None = None
    detail: str | None = None
    segment: str | None = None
    checkpoint: dict | None = None
    anchor: dict | None = None
    keys: list[str] = field(default_factory=list)
    signatures_checked: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


class _Bad(Exception):
    def __init__(self, seq: int | None, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.seq, self.reason, self.detail = seq, reason, detail


class _BadSignature(_Bad):
    """A signature a worker found bad: the report is rewound to that entry (`_rewind`)."""

    def __init__(self, entry: Pending) -> None:
        super().__init__(entry.seq, "bad signature",
                         f"seq {entry.seq}'s signature does not verify with key {entry.key_id}")
        self.entry = entry


def verify_log(folder: str | Path, pubkeys: dict[str, Ed25519PublicKey] | None = None, *,
               require_signed: bool = False, anchor: dict | None = None, workers: int | None = None) -> Report:
    """Verify the audit folder; `pubkeys` by key id (None or empty: signatures counted, not checked).

    `workers`: processes that check signatures while this one checks the chain (None: one per available
    CPU; 1: all in this process). A pool is started only for logs of at least 16 MiB with keys to check;
    the report is the same either way."""
    folder = Path(folder)
    report = Report(keys=sorted(pubkeys or {}), signatures_checked=bool(pubkeys))
    if anchor is not None:
        if not isinstance(anchor.get("seq"), int) or not isinstance(anchor.get("hash"), str):
            raise FleetError("BAD_ARGUMENT", "an anchor needs an integer seq and a hash")
    checkpoint, files = _snapshot(folder)
    workers = default_workers() if workers is None else workers
    pool = SignaturePool(pubkeys, workers) if pubkeys and workers > 1 and \
        sum(size for *_, size in files) >= POOL_MIN_BYTES else None
    state = _State(report, pubkeys or {}, require_signed, pool)
    if anchor is not None:
        state.want_anchor = (anchor["seq"], anchor["hash"])
    try:
        state.start(checkpoint)
        if anchor is not None and anchor.get("sig") is not None:
            state.signature(anchor, anchor["seq"], "the anchor")
        for index, (named_seq, path, fh, size) in enumerate(files):
            if state.leftover([(n, p) for n, p, _, _ in files], index):
                continue
            report.segments += 1
            report.segment = path.name
            if fh is None:
                raise _Bad(named_seq or state.expected, "malformed", f"{path.name} is not a regular file")
            state.segment(path, fh, size, named_seq, last=index == len(files) - 1)
        state.settle()
        if anchor is not None:
            state.check_anchor(anchor)
        report.segment = None
    except _Bad as bad:
        if not isinstance(bad, _BadSignature) and pool is not None:
            late = pool.settle()       # a signature queued before this failure fails first, as inline
            bad = _BadSignature(late) if late is not None else bad
        if isinstance(bad, _BadSignature):
            _rewind(report, bad.entry)
        report.ok = False
        report.first_bad_seq, report.reason, report.detail = bad.seq, bad.reason, bad.detail
    finally:
        if pool is not None:
            pool.close()
        for _, _, fh, _ in files:
            if fh is not None:
                fh.close()
    return report


def _rewind(report: Report, entry: Pending) -> None:
    """The report as a pass that stopped at `entry` (a bad signature found later, by a worker) leaves it."""
    report.entries = entry.signed_before + entry.unsigned_before
    report.signed, report.unsigned = entry.signed_before + 1, entry.unsigned_before
    report.segments, report.segment = entry.segments, entry.segment
    report.anchor = None
    if report.entries == 0:
        report.first_seq = report.last_seq = report.verified_through = report.last_hash = None
    else:
        report.last_seq = report.verified_through = entry.seq - 1
        report.last_hash = entry.prev_hash


class _State:
    def __init__(self, report: Report, keys: dict[str, Ed25519PublicKey], require_signed: bool,
                 pool: SignaturePool | None = None) -> None:
        self.report = report
        self.keys = keys
        self.require_signed = require_signed
        self.pool = pool
        self.expected = 1
        self.prev = GENESIS
        self.recent: OrderedDict[int, str] = OrderedDict()
        self.want_anchor: tuple[int, str] | None = None

    # --- the checkpoint (entries pruned before the first retained segment) --------------------------

    def start(self, checkpoint: dict | None) -> None:
        if checkpoint is None:
            return
        if checkpoint.get("_malformed") or not isinstance(checkpoint.get("seq"), int):
            raise _Bad(None, "bad checkpoint", "checkpoint.json is not a valid checkpoint")
        if entry_hash(checkpoint) != checkpoint.get("hash"):
            raise _Bad(checkpoint["seq"], "bad checkpoint", "checkpoint.json does not match its hash")
        self.signature(checkpoint, checkpoint["seq"], "checkpoint")
        self.report.checkpoint = {k: checkpoint.get(k) for k in ("seq", "last_hash", "at", "pruned", "key_id")}
        self.expected = checkpoint["seq"] + 1
        self.prev = checkpoint["last_hash"]

    # --- segments -----------------------------------------------------------------------------------

    def leftover(self, files: list[tuple[int | None, Path]], index: int) -> bool:
        """A rotated segment wholly behind the checkpoint (a prune interrupted between its two steps)."""
        following = files[index + 1][0] if index + 1 < len(files) else None
        return (self.report.checkpoint is not None and self.report.entries == 0 and files[index][0] is not None
                and following is not None and following <= self.expected)

    def segment(self, path: Path, fh: BinaryIO, size: int, named_seq: int | None, last: bool) -> None:
        lines = _lines(fh, size)
        header_line = next(lines, None)
        if header_line is None:
            if last and named_seq is None:
                return                                  # a brand-new active segment, still empty
            raise _Bad(named_seq or self.expected, "bad segment header", f"{path.name} is empty")
        header = self._parse(header_line, named_seq or self.expected)
        if not seg.is_header(header) or not isinstance(header.get("first_seq"), int):
            raise _Bad(named_seq or self.expected, "bad segment header", f"{path.name} has no header")
        first = header["first_seq"]
        if named_seq is not None and first != named_seq:
            raise _Bad(first, "reorder", f"{path.name} holds the segment that starts at seq {first}")
        self._header(header, path.name)
        pending = None
        for raw in lines:
            entry = self._parse(raw, self.expected)
            if pending is not None:
                self._out_of_order(pending, entry)
            if entry["seq"] > self.expected:
                pending = entry                          # a gap, or the first of two swapped lines
                continue
            self._entry(entry)
        if pending is not None:
            self._out_of_order(pending, None)

    def _header(self, header: dict, name: str) -> None:
        first = header["first_seq"]
        if first > self.expected:
            raise _Bad(first, "gap", f"{name} starts at seq {first}; seq {self.expected} to {first - 1} "
                                     "are missing")
        if first < self.expected:
            raise _Bad(first, "reorder", f"{name} starts at seq {first}, after seq {self.expected - 1}")
        if header.get("prev_hash") != self.prev:
            raise _Bad(first, "bad segment header", f"{name}'s header does not continue the chain")

    def _parse(self, raw: bytes, seq: int) -> dict:
        if not raw.endswith(b"\n"):
            if len(raw) > MAX_ENTRY_BYTES:
                raise _Bad(seq, "malformed", f"a line longer than {MAX_ENTRY_BYTES} bytes after seq {seq - 1}")
            raise _Bad(seq, "torn line", f"{self.report.segment} ends in an incomplete line after seq {seq - 1}")
        try:
            value = json.loads(raw)
        except ValueError:
            raise _Bad(seq, "malformed", f"the line after seq {seq - 1} is not JSON") from None
        if not isinstance(value, dict) or not (seg.is_header(value) or (
                isinstance(value.get("seq"), int) and isinstance(value.get("hash"), str))):
            raise _Bad(seq, "malformed", f"the line after seq {seq - 1} is not an audit entry")
        return value

    def _out_of_order(self, ahead: dict, following: dict | None) -> None:
        if following is not None and following["seq"] == self.expected:
            raise _Bad(ahead["seq"], "reorder", f"seq {ahead['seq']} comes before seq {self.expected}")
        raise _Bad(ahead["seq"], "gap", f"seq {ahead['seq']} follows seq {self.expected - 1}: "
                                        f"seq {self.expected} to {ahead['seq'] - 1} are missing")

    def _entry(self, entry: dict) -> None:
        seq = entry["seq"]
        if seq < self.expected:
            if self.recent.get(seq) == entry["hash"]:
                raise _Bad(seq, "duplicate", f"seq {seq} appears again after seq {self.expected - 1}")
            raise _Bad(seq, "reorder", f"seq {seq} comes after seq {self.expected - 1}")
        if entry_hash(entry) != entry["hash"]:
            raise _Bad(seq, "hash mismatch", f"seq {seq}'s content does not match its hash")
        if entry.get("prev_hash") != self.prev:
            raise _Bad(seq, "chain break", f"seq {seq}'s prev_hash is not seq {seq - 1}'s hash")
        self.signature(entry, seq, f"seq {seq}")
        report = self.report
        report.entries += 1
        if report.first_seq is None:
            report.first_seq = seq
        report.last_seq = report.verified_through = seq
        report.last_hash = self.prev = entry["hash"]
        self.expected = seq + 1
        self.recent[seq] = entry["hash"]
        if len(self.recent) > RECENT:
            self.recent.popitem(last=False)
        if self.want_anchor and seq == self.want_anchor[0] and entry["hash"] != self.want_anchor[1]:
            raise _Bad(seq, "tail cut", f"seq {seq} is not the anchored entry (its hash differs)")

    def signature(self, record: dict, seq: int, what: str) -> None:
        sig = record.get("sig")
        if sig is None:
            if self.require_signed:
                raise _Bad(seq, "unsigned", f"{what} is not signed (--require-signed)")
            if "prev_hash" in record:
                self.report.unsigned += 1
            return
        if "prev_hash" in record:
            self.report.signed += 1
        if not self.keys:
            return
        key = self.keys.get(record.get("key_id"))
        if key is None:
            raise _Bad(seq, "unknown key", f"{what} is signed by key {str(record.get('key_id'))[:32]!r}, "
                                           "which is not among the keys given")
        if self.pool is not None and "prev_hash" in record:     # an entry: checked by a worker, in order
            report = self.report
            bad = self.pool.add(Pending(seq, record["key_id"], record["hash"], sig, record["prev_hash"],
                                        report.signed - 1, report.unsigned, report.segments, report.segment))
            if bad is not None:
                raise _BadSignature(bad)
            return
        if not check(key, record["hash"], sig):
            raise _Bad(seq, "bad signature", f"{what}'s signature does not verify with key {record['key_id']}")

    def settle(self) -> None:
        """Wait for the workers' checks of every queued signature (before the anchor is compared)."""
        bad = self.pool.settle() if self.pool is not None else None
        if bad is not None:
            raise _BadSignature(bad)

    # --- anchors -------------------------------------------------------------------------------------

    def check_anchor(self, anchor: dict) -> None:
        seq, digest = anchor["seq"], anchor["hash"]
        report = self.report
        checkpoint = report.checkpoint
        result = {"seq": seq, "hash": digest, "reached": False}
        report.anchor = result
        if report.last_seq is None or report.last_seq < seq:
            raise _Bad(seq, "tail cut", f"the log ends at seq {report.last_seq} but the anchor names seq {seq}: "
                                        "entries were cut off the end")
        if report.first_seq is not None and seq < report.first_seq:
            if checkpoint and checkpoint["seq"] == seq and checkpoint["last_hash"] != digest:
                raise _Bad(seq, "tail cut", f"the checkpoint's seq {seq} is not the anchored entry")
            result["pruned"] = True          # older than the retained log: its hash cannot be compared
            return
        result["reached"] = True


def _snapshot(folder: Path) -> tuple[dict | None, list[tuple[int | None, Path, BinaryIO | None, int]]]:
    """The checkpoint and every segment, opened, with its size, taken under the append lock when the folder
    has one: a line a writer has in flight is never read half-written, and a rotation or a prune while the
    verifier runs changes nothing it reads (open files outlive a rename or an unlink)."""
    try:
        lock = os.open(folder / seg.LOCK, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        lock = None                                  # a copy on read-only media: nobody appends to it
    opened: list[tuple[int | None, Path, BinaryIO | None, int]] = []
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_SH)
        checkpoint = seg.read_checkpoint(folder)
        for named_seq, path in seg.segment_files(folder):
            try:
                fh = seg.open_regular(path)
            except FileNotFoundError:
                continue
            except OSError:                          # a symlink or a folder where a segment should be
                fh = None
            opened.append((named_seq, path, fh, os.fstat(fh.fileno()).st_size if fh else 0))
    finally:
        if lock is not None:
            os.close(lock)                           # closing releases the lock
    return checkpoint, opened


def _lines(fh: BinaryIO, size: int) -> Iterator[bytes]:
    """Lines up to the snapshot's size; a line cut by it comes back without its newline (torn)."""
    while fh.tell() < size:
        line = fh.readline(MAX_ENTRY_BYTES + 2)
        if not line:
            return
        over = fh.tell() - size
        yield line[:len(line) - over] if over > 0 else line
