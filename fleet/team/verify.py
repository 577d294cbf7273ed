"""`fleetdeck audit verify --team DSN --machine NAME`: the hub's copy of a machine's audit chains, checked.

A machine whose audit log was recreated has several chains on the hub (fleet/team/auditchain.py), each checked on
its own, oldest first. On its own, each chain must be one: consecutive seqs, each entry's `prev_hash` the hash before it, each
entry's hash its content's (when the hub holds the signed line: `share = "paths"`), and each signature valid for
a trusted key. With the machine's own log beside it, every seq both hold must carry the same hash, and no seq
the machine still has may be missing on the hub below the hub's newest: a hub that dropped, altered or reordered
entries is caught. The machine's log is compared with the chain it was pushed as (the index says which, run on
the machine), else with the chain sharing its entries; a log the hub holds no chain of is not pushed yet.
Entries the machine wrote after its last push are reported, not failed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fleet.audit.canon import entry_hash
from fleet.audit.keys import check
from fleet.audit.read import entries
from fleet.team import pg


@dataclass
class HubReport:
    machine: str
    hub: str
    ok: bool = True
    entries: int = 0
    signed: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    first_bad_seq: int | None = None
    reason: str | None = None
    compared_with_local: bool = False
    not_pushed_yet: int = 0
    problems: list[str] = field(default_factory=list)
    chains: list[dict] = field(default_factory=list)   # each chain: its key, entries, seqs and times, intact or not
    local_chain: str | None = None                      # the chain the machine's log is on the hub (compared)
    chain: str = ""                                     # the chain being checked (the problems name it)

    def bad(self, seq: int, reason: str) -> None:
        if self.ok:
            self.ok, self.first_bad_seq, self.reason = False, seq, reason
        self.problems.append(f"seq {seq}: {reason}" if not self.chain else f"chain {self.chain[:12]}: seq {seq}: {reason}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def hub_entries(dsn: str, machine: str) -> list[tuple[str, int, str, dict, str | None]]:
    """(chain, seq, hash, entry, signed line or None) of `machine`'s entries on the hub, by chain and seq."""
    conn = pg.connect(dsn)
    try:
        return conn.execute("SELECT chain, seq, hash, entry, line FROM fleetdeck.audit WHERE machine_id = %s "
                            "ORDER BY chain, seq", (machine,)).fetchall()
    except pg.psycopg().Error as exc:
        raise pg.unreachable(dsn, exc) from None
    finally:
        conn.close()


def chains(held: list[tuple]) -> list[tuple[str, list[tuple]]]:
    """The rows by chain, oldest chain first (by its first entry's time)."""
    grouped: dict[str, list[tuple]] = {}
    for row in held:
        grouped.setdefault(row[0], []).append(row[1:])
    return sorted(grouped.items(), key=lambda item: (str(item[1][0][2].get("at") or ""), item[0]))


def verify_hub(dsn: str, machine: str, pubkeys: dict[str, Ed25519PublicKey],
               local_dir: Path | None = None, pushed_as: str | None = None) -> HubReport:
    """`pushed_as`: the chain the machine's index says its log was pushed as (None: not known here)."""
    report = HubReport(machine, pg.hub_label(dsn))
    found = chains(hub_entries(dsn, machine))
    for chain, rows in found:
        report.chain = chain if len(found) > 1 else ""
        _check(report, rows, pubkeys)
        report.chains.append({"chain": chain, "entries": len(rows), "first_seq": rows[0][0], "last_seq": rows[-1][0],
                              "first_at": rows[0][2].get("at"), "last_at": rows[-1][2].get("at")})
    report.chain = ""
    if local_dir is not None:
        held = {chain: {seq: digest for seq, digest, _, _ in rows} for chain, rows in found}
        report.local_chain = pushed_as if pushed_as is not None else _sharing(held, local_dir)
        if pushed_as is not None and pushed_as not in held:
            report.bad(0, f"dropped: the hub holds no entry of chain {pushed_as[:12] or '(first)'}, which this "
                          "machine's log was pushed as")
        _compare(report, held.get(report.local_chain, {}) if report.local_chain is not None else {}, local_dir)
    return report


def _check(report: HubReport, held: list[tuple], pubkeys: dict[str, Ed25519PublicKey]) -> None:
    """One chain as the hub holds it: (seq, hash, entry, line) by seq."""
    previous: tuple[int, str] | None = None
    for seq, digest, entry, line in held:
        report.entries += 1
        report.first_seq = seq if report.first_seq is None else min(report.first_seq, seq)
        report.last_seq = seq if report.last_seq is None else max(report.last_seq, seq)
        if line is not None:
            try:
                signed = json.loads(line)
            except ValueError:
                signed = None
            if not isinstance(signed, dict) or signed.get("seq") != seq or signed.get("hash") != digest \
                    or entry_hash(signed) != digest:
                report.bad(seq, "altered: the entry's content does not give its hash")
            elif signed != entry:
                report.bad(seq, "altered: the row's entry is not its signed line")
            entry = signed if isinstance(signed, dict) else entry
        if entry.get("hash") != digest:
            report.bad(seq, "altered: the entry's hash differs from the row's")
        if previous is not None:
            if seq != previous[0] + 1:
                report.bad(seq, f"missing: seq {previous[0] + 1}..{seq - 1} are not on the hub")
            elif entry.get("prev_hash") != previous[1]:
                report.bad(seq, "reordered or altered: its previous hash is not the entry before it")
        if entry.get("sig") is not None:
            report.signed += 1
            key = pubkeys.get(str(entry.get("key_id")))
            if pubkeys and (key is None or not check(key, digest, entry["sig"])):
                report.bad(seq, "bad signature" if key is not None else "signed by a key not trusted here")
        previous = (seq, digest)


def _sharing(held: dict[str, dict[int, str]], local_dir: Path) -> str | None:
    """The chain holding the most of the local log's entries (None: the hub holds none of them)."""
    shared: dict[str, int] = {}
    for entry in entries(local_dir):
        for chain, hashes in held.items():
            if hashes.get(entry.get("seq")) == entry.get("hash"):
                shared[chain] = shared.get(chain, 0) + 1
    return max(shared, key=lambda c: shared[c]) if shared else None


def _compare(report: HubReport, hub: dict[int, str], local_dir: Path) -> None:
    """The machine's own log against the hub's copy of its chain."""
    report.compared_with_local = True
    newest = max(hub) if hub else 0
    for entry in entries(local_dir):
        seq = entry.get("seq")
        if not isinstance(seq, int):
            continue
        if seq > newest:
            report.not_pushed_yet += 1
        elif seq not in hub:
            if not hub or seq >= min(hub):
                report.bad(seq, "dropped: the machine's log has it, the hub does not")
        elif hub[seq] != entry.get("hash"):
            report.bad(seq, "differs: the hub's entry is not the machine's")
