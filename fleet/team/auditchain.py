"""Which chain on the hub this machine's audit log is. A log recreated on the machine (its folder lost, deleted or
restored from elsewhere) starts its seqs again at 1 with a new hash chain: pushed under the old chain's key, its
entries would be dropped as already held, or sit after the old ones as a broken chain. Each chain is keyed on
the hub by its own identity instead: the hash of the oldest entry the machine pushed of it ('' for what was
pushed before chains were told apart), so a new log is a new chain beside the old one.

The index keeps the chain it pushes and the last entry it pushed of it, with where that entry's line is in the
log (`CHAIN_KEY`); the log still holding that entry (or having pruned past it: its checkpoint) is the same log,
and the next push reads the log from right after that line (what is new, not the whole segment). Otherwise the hub is asked which of this
machine's chains holds the log's oldest entry, and a log it has never seen is a new chain, pushed from seq 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleet.audit import segments as seg
from fleet.audit.read import Where, entries_after, still_at
from fleet.index import outbox
from fleet.index.store import Index

CHAIN_KEY = outbox.AUDIT_CHAIN_KEY   # meta: {"chain", "seq", "hash"} of an entry pushed of the chain the log is


Seen = tuple[Where, str]             # where an entry's line was read, and its hash (fleet.audit.read)


def continues(folder: Path, seq: int, digest: str, where: Where | None = None) -> bool:
    """Whether the log in `folder` is the one whose entry `seq` had hash `digest` (`where`: where it was read)."""
    if where is not None and still_at(folder, seq, (where, digest)):
        return True
    found = next(entries_after(folder, seq - 1), None)
    if found is not None and found[0].get("seq") == seq:
        return found[0].get("hash") == digest
    checkpoint = seg.read_checkpoint(folder) or {}
    pruned = checkpoint.get("seq")
    if not isinstance(pruned, int) or pruned < seq:
        return False                  # the log ends before that entry: another log
    return pruned > seq or checkpoint.get("last_hash") == digest


def known(index: Index, folder: Path) -> tuple[str | None, int, Seen | None]:
    """(the chain this log is, the seq pushed up to, where that entry was read) as far as the index knows; (None,
    the seq to push after if the hub holds this log, None): the hub must be asked (`resolve`)."""
    kept = index.meta(CHAIN_KEY)
    cursor = outbox.cursor(index, "audit")
    if isinstance(kept, dict):
        where = _where(kept.get("where"))
        if continues(folder, int(kept["seq"]), str(kept["hash"]), where):
            seen = (where, str(kept["hash"])) if where is not None and int(kept["seq"]) == cursor else None
            return str(kept["chain"]), cursor, seen
        return None, 0, None          # another log than the one pushed: none of it is on the hub yet
    return None, cursor, None         # pushed before chains were kept (or never): the hub knows


def _where(value: Any) -> Where | None:
    """A stored line position, or None for one kept before positions were (or not of that shape)."""
    if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str) and \
            all(isinstance(v, int) for v in value[1:]):
        return value[0], value[1], value[2]
    return None


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


def keep(index: Index, chain: str, entry: tuple, where: Where) -> None:
    """After the hub committed: `entry` (a pushed audit row, read at `where`) is of `chain`."""
    index.set_meta(CHAIN_KEY, {"chain": chain, "seq": entry[2], "hash": entry[3], "where": list(where)})
