"""`fleetdeck audit verify --team DSN --machine NAME`: the hub's copy of a machine's audit chain, checked.

On its own, the hub's copy must be a chain: consecutive seqs, each entry's `prev_hash` the hash before it, each
entry's hash its content's (when the hub holds the signed line: `share = "paths"`), and each signature valid for
a trusted key. With the machine's own log beside it, every seq both hold must carry the same hash, and no seq
the machine still has may be missing on the hub below the hub's newest: a hub that dropped, altered or reordered
entries is caught. Entries the machine wrote after its last push are reported, not failed.
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

    def bad(self, seq: int, reason: str) -> None:
        if self.ok:
            self.ok, self.first_bad_seq, self.reason = False, seq, reason
        self.problems.append(f"seq {seq}: {reason}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def hub_entries(dsn: str, machine: str) -> list[tuple[int, str, dict, str | None]]:
    """(seq, hash, entry, signed line or None) of `machine`'s entries on the hub, by seq."""
    conn = pg.connect(dsn)
    try:
        return conn.execute("SELECT seq, hash, entry, line FROM fleetdeck.audit WHERE machine_id = %s "
                            "ORDER BY seq", (machine,)).fetchall()
    except pg.psycopg().Error as exc:
        raise pg.unreachable(dsn, exc) from None
    finally:
        conn.close()


def verify_hub(dsn: str, machine: str, pubkeys: dict[str, Ed25519PublicKey],
               local_dir: Path | None = None) -> HubReport:
    report = HubReport(machine, pg.hub_label(dsn))
    held = hub_entries(dsn, machine)
    previous: tuple[int, str] | None = None
    for seq, digest, entry, line in held:
        report.entries += 1
        report.first_seq = seq if report.first_seq is None else report.first_seq
        report.last_seq = seq
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
    if local_dir is not None:
        _compare(report, {seq: digest for seq, digest, _, _ in held}, local_dir)
    return report


def _compare(report: HubReport, hub: dict[int, str], local_dir: Path) -> None:
    """The machine's own log against the hub's copy."""
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
