"""Which chain on the hub this machine's audit log is. A log recreated on the machine (its folder lost, deleted or
restored from elsewhere) starts its seqs again at 1 with a new hash chain: pushed under the old chain's key, its
entries would be dropped as already held, or sit after the old ones as a broken chain. Each chain is keyed on
the hub by its own identity instead: the hash of the oldest entry the machine pushed of it ('' for what was
pushed before chains were told apart), so a new log is a new chain beside the old one.

The index keeps the chain it pushes and one entry it pushed of it (`CHAIN_KEY`); the log still holding that
entry (or having pruned past it: its checkpoint) is the same log. Otherwise the hub is asked which of this
machine's chains holds the log's oldest entry, and a log it has never seen is a new chain, pushed from seq 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleet.audit import segments as seg
from fleet.audit.read import entries_after
from fleet.index import outbox
from fleet.index.store import Index

CHAIN_KEY = outbox.AUDIT_CHAIN_KEY   # meta: {"chain", "seq", "hash"} of an entry pushed of the chain the log is


def continues(folder: Path, seq: int, digest: str) -> bool:
    """Whether the log in `folder` is the one whose entry `seq` had hash `digest`."""
    found = next(entries_after(folder, seq - 1), None)
    if found is not None and found[0].get("seq") == seq:
        return found[0].get("hash") == digest
    checkpoint = seg.read_checkpoint(folder) or {}
    pruned = checkpoint.get("seq")
    if not isinstance(pruned, int) or pruned < seq:
        return False                  # the log ends before that entry: another log
    return pruned > seq or checkpoint.get("last_hash") == digest


def known(index: Index, folder: Path) -> tuple[str | None, int]:
    """(the chain this log is, the seq pushed up to) as far as the index knows; (None, the seq to push after
    if the hub holds this log): the hub must be asked (`resolve`)."""
    kept = index.meta(CHAIN_KEY)
    cursor = outbox.cursor(index, "audit")
    if isinstance(kept, dict):
        if continues(folder, int(kept["seq"]), str(kept["hash"])):
            return str(kept["chain"]), cursor
        return None, 0                # another log than the one pushed: none of it is on the hub yet
    return None, cursor               # pushed before chains were kept (or never): the hub knows


def resolve(conn: Any, machine: str, folder: Path, after: int) -> tuple[str, int] | None:
    """(chain, seq to push after) of the log in `folder`, asked of the hub: the chain of this machine holding the
    log's oldest entry (pushed from `after`), else a new chain keyed by that entry's hash (pushed from the
    start). None: the log holds no entry yet."""
    oldest = next(entries_after(folder, 0), None)
    if oldest is None:
        return None
    entry = oldest[0]
    with conn.transaction():
        held = conn.execute("SELECT chain FROM fleetdeck.audit WHERE machine_id = %s AND seq = %s AND hash = %s",
                            (machine, entry["seq"], entry.get("hash") or "")).fetchone()
    if held is not None:
        return held[0], after
    return str(entry.get("hash") or ""), 0


def keep(index: Index, chain: str, entry: tuple) -> None:
    """After the hub committed: `entry` (a pushed audit row) is of `chain`."""
    index.set_meta(CHAIN_KEY, {"chain": chain, "seq": entry[2], "hash": entry[3]})
