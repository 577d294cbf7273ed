"""Ed25519 checks for the verifier, in worker processes while the chain pass streams on.

A signature check costs several times what the rest of an entry's verification does (parse, canonical JSON,
SHA-256, chain links), so `verify_log` hands the checks of a large log to a pool of worker processes in
batches of BATCH entries, in seq order, with at most 2 batches per worker in flight (memory stays bounded:
each queued entry keeps its seq, key id, hash, signature and the counters the report needs). Batches are
settled in the order they were sent, so the first failing batch holds the first bad signature, and its worker
names the first failing seq in it: the report is the one an inline pass would give.

Workers are spawned (never forked: the caller may have threads, as `serve` has), so a pool costs a fraction of a
second to start; it is used only for logs of at least POOL_MIN_BYTES and when more than one CPU is available.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from typing import NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fleet.audit.keys import check

BATCH = 1024
POOL_MIN_BYTES = 16 * 1024 * 1024     # ~20,000 entries: below this, starting workers costs more than it saves


class Pending(NamedTuple):
    """One signed entry whose signature is still to be checked, with what the report needs if it fails."""
    seq: int
    key_id: str
    hash: str
    sig: object
    prev_hash: str
    signed_before: int
    unsigned_before: int
    segments: int
    segment: str | None


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class SignaturePool:
    """Checks queued signatures in `workers` processes; `add` and `settle` return the first failure seen."""

    def __init__(self, keys: dict[str, Ed25519PublicKey], workers: int) -> None:
        self.raw = {kid: key.public_bytes(Encoding.Raw, PublicFormat.Raw) for kid, key in keys.items()}
        self.executor = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        self.batch: list[Pending] = []
        self.inflight: deque[tuple[Future, list[Pending]]] = deque()
        self.max_inflight = 2 * workers

    def add(self, item: Pending) -> Pending | None:
        """Queue one check; the first bad entry of a batch that had to be settled to make room, or None."""
        self.batch.append(item)
        if len(self.batch) < BATCH:
            return None
        self._send()
        while len(self.inflight) > self.max_inflight:
            bad = self._settle_one()
            if bad is not None:
                return bad
        return None

    def settle(self) -> Pending | None:
        """Check everything queued; the first bad entry in seq order, or None."""
        self._send()
        while self.inflight:
            bad = self._settle_one()
            if bad is not None:
                return bad
        return None

    def close(self) -> None:
        for future, _ in self.inflight:
            future.cancel()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def _send(self) -> None:
        if self.batch:
            work = [(p.seq, p.key_id, p.hash, p.sig) for p in self.batch]
            self.inflight.append((self.executor.submit(check_batch, self.raw, work), self.batch))
            self.batch = []

    def _settle_one(self) -> Pending | None:
        future, items = self.inflight.popleft()
        bad_seq = future.result()
        return None if bad_seq is None else next(p for p in items if p.seq == bad_seq)


_loaded: dict[bytes, Ed25519PublicKey] = {}


def check_batch(raw: dict[str, bytes], work: list[tuple[int, str, str, object]]) -> int | None:
    """(In a worker.) The seq of the first entry in `work` whose signature does not verify, or None."""
    for seq, key_id, digest, sig in work:
        data = raw[key_id]
        key = _loaded.get(data)
        if key is None:
            key = _loaded[data] = Ed25519PublicKey.from_public_bytes(data)
        if not check(key, digest, sig):
            return seq
    return None
