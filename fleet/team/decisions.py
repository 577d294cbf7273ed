"""Approvals from the hub: a person decides a machine's proposal on the hub, only the owning machine acts.

The approver signs a decision with their Ed25519 key (`fleetdeck team decide`): which machine, which proposal,
approve or reject, the reason, who, and what they saw (the arguments' fingerprint and the digest of the preview
the machine mirrored), with a nonce and the time. The hub stores it in `fleetdeck.decisions`; the machine it is
addressed to reads its waiting decisions while it pushes and settles each one — `applied` after running the
same local path a person's approval takes (compare-and-set, re-validation, restore point, execution, audit with
actor `hub:<approver>`), or `refused` with the reason — only with `[team] accept_remote_approvals = true` and the
approver's public key pinned in `[team] approver_keys`, and never for a decision this machine would take only with
the person's passkey (`[passkeys]`: a hub carries no assertion, as a terminal does not). Forged, replayed, unpinned, changed since it was seen,
no longer pending (expired, decided locally first): refused and recorded, on the hub and in the audit log; a proposal
past its expiry that still reads pending on the hub (its machine has not pushed since) gets no signature at all.

The hub's dashboard (`serve --team --key --as`, web/hubdecide.py) decides through the same `decide`, with the
digest of the mirrored proposal its page showed (`seen`): a row that changed on the hub since is refused
(STALE), so what is signed is what the person saw.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fleet.audit import setup as audit_setup
from fleet.audit.canon import canonical
from fleet.audit.keys import check, key_id, load_public, load_signer
from fleet.errors import FleetError
from fleet.index import outbox
from fleet.index.store import Index
from fleet.ops import passkeys, proposals, service
from fleet.ops.confirm import decision_risk
from fleet.team import pg, rows
from fleet.team.config import TeamConfig
from fleet.timespec import iso

log = logging.getLogger("fleetdeck.team")

DOMAIN = b"fleetdeck-hub-decision-v1\0"   # a decision's signature can never pass as an audit entry's, or back
APPROVER = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
SIGNED = ("machine", "proposal_id", "action", "reason", "approver", "args_fingerprint", "preview_digest", "nonce",
          "signed_at")


def payload_digest(payload: dict) -> str:
    return "sha256:" + hashlib.sha256(canonical({k: payload.get(k) for k in SIGNED})).hexdigest()


def seen_digest(mirrored: dict) -> str:
    """The digest of a mirrored proposal row as a page showed it; a decision made from that page names it."""
    return rows.digest(mirrored)


def _check_approver(name: str) -> str:
    if not APPROVER.fullmatch(name):
        raise FleetError("BAD_ARGUMENT", "the approver's name: 1-64 of a-z 0-9 . _ -")
    return name


@dataclass(frozen=True)
class Approver:
    """Who signs the decisions a hub dashboard makes (`serve --team --key PEM --as NAME`): the person's name, as
    machines log it, and their Ed25519 private key file, both checked when the dashboard starts."""

    name: str
    key: Path
    key_id: str

    @classmethod
    def load(cls, name: str, key: str | Path) -> "Approver":
        return cls(_check_approver(name), Path(key).expanduser(), load_signer(key).key_id)


def decide(dsn: str, machine: str, proposal_id: str, action: str, approver: str, key: str | Path,
           reason: str | None = None, confirm: Callable[[dict], None] | None = None,
           seen: str | None = None) -> dict[str, Any]:
    """Sign and store a decision on the hub (as a login holding `fleetdeck_hub`); the machine acts on it.
    `confirm` sees the mirrored proposal before anything is signed and raises to stop (the surface's
    confirmation: a terminal's `y`, or `yes` for a high-risk proposal, fleet/ops/confirm.py; the dashboard's
    checkbox and passkey). `seen`: the `seen_digest` of the row a page showed; a row that differs now is
    refused (STALE) — the CLI shows the row it reads here, so it passes none."""
    if action not in ("approve", "reject"):
        raise FleetError("BAD_ARGUMENT", "a decision is approve or reject")
    _check_approver(approver)
    if action == "reject" and not (reason or "").strip():
        raise FleetError("BAD_ARGUMENT", "a rejection needs a reason")
    signer = load_signer(key)
    conn = pg.connect(dsn)
    try:
        found = conn.execute("SELECT status, row, expires_at FROM fleetdeck.proposals WHERE machine_id = %s AND "
                             "id = %s", (machine, proposal_id)).fetchone()
        if found is None:
            raise FleetError("NOT_FOUND", f"machine {machine} has pushed no proposal {proposal_id}")
        if found[0] != "pending":
            raise FleetError("NOT_PENDING", f"proposal {proposal_id} is {found[0]} on the hub, not pending")
        if found[2] <= time.time():    # still pending on the hub only because its machine has not pushed since
            raise FleetError("NOT_PENDING", f"proposal {proposal_id} expired at {iso(found[2])}: {machine} has not "
                                            "pushed since, but it will not run it; nothing was signed")
        mirrored = found[1]
        if seen is not None and not secrets.compare_digest(seen.encode(), seen_digest(mirrored).encode()):
            raise FleetError("STALE", f"proposal {proposal_id} of {machine} changed on the hub since the page showed "
                                      "it: nothing was signed; reload the page to see it as it is now")
        if confirm is not None:
            confirm(mirrored)
        payload = {"machine": machine, "proposal_id": proposal_id, "action": action, "reason": reason,
                   "approver": approver, "args_fingerprint": mirrored.get("args_fingerprint"),
                   "preview_digest": mirrored.get("preview_digest"), "nonce": secrets.token_hex(16),
                   "signed_at": time.time()}
        signature = signer.sign(payload_digest(payload), DOMAIN)
        made = conn.execute("INSERT INTO fleetdeck.decisions (machine_id, proposal_id, action, reason, approver, "
                            "key_id, payload, signature) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                            (machine, proposal_id, action, reason, approver, signer.key_id,
                             pg.psycopg().types.json.Jsonb(payload), signature)).fetchone()[0]
        conn.commit()
    except pg.psycopg().Error as exc:
        raise pg.unreachable(dsn, exc) from None
    finally:
        conn.close()
    return {"decision": made, "machine": machine, "proposal_id": proposal_id, "action": action,
            "approver": approver, "key_id": signer.key_id}


def settle_waiting(index: Index, config: TeamConfig, conn: Any) -> list[dict[str, Any]]:
    """Act on every decision the hub holds for this machine and has not settled, oldest first."""
    waiting = conn.execute("SELECT id, proposal_id, action, reason, approver, key_id, payload, signature "
                           "FROM fleetdeck.decisions WHERE machine_id = %s AND outcome IS NULL ORDER BY id",
                           (config.machine,)).fetchall()
    conn.commit()
    settled = []
    for row in waiting:
        outcome, why = _settle(index, config, dict(zip(
            ("id", "proposal_id", "action", "reason", "approver", "key_id", "payload", "signature"), row)))
        conn.execute("UPDATE fleetdeck.decisions SET outcome = %s, outcome_reason = %s, settled_at = now() "
                     "WHERE id = %s AND outcome IS NULL", (outcome, why, row[0]))
        conn.commit()
        settled.append({"decision": row[0], "proposal_id": row[1], "outcome": outcome, "reason": why})
    return settled


def _settle(index: Index, config: TeamConfig, d: dict) -> tuple[str, str | None]:
    refused = _refusal(index, config, d)
    if refused is not None:
        _audit_refusal(index, d, refused)
        return "refused", refused
    by = f"{proposals.HUB_DECIDER}{d['approver']}"
    try:
        if d["action"] == "approve":
            service.approve(index, d["proposal_id"], by)
        else:
            service.reject(index, d["proposal_id"], by, d["reason"])
    except FleetError as exc:
        _audit_refusal(index, d, exc.message)
        return "refused", exc.message
    return "applied", None


def _refusal(index: Index, config: TeamConfig, d: dict) -> str | None:
    """Why this machine does not act on decision `d`, or None when it does (the nonce is then spent)."""
    if not config.accept_remote_approvals:
        return "this machine does not accept decisions from the hub ([team] accept_remote_approvals = false)"
    pinned = {key_id(k): k for k in (load_public(p) for p in config.approver_keys)}
    key = pinned.get(d["key_id"])
    if key is None:
        return f"signed by key {d['key_id']}, which this machine has not pinned ([team] approver_keys)"
    p = d["payload"] if isinstance(d["payload"], dict) else {}
    columns = {"machine": config.machine, "proposal_id": d["proposal_id"], "action": d["action"],
               "reason": d["reason"], "approver": d["approver"]}
    if any(p.get(k) != v for k, v in columns.items()) or not APPROVER.fullmatch(str(d["approver"])):
        return "forged: the decision's row is not what its approver signed"
    if not check(key, payload_digest(p), d["signature"], DOMAIN):
        return "forged: the signature does not verify with the pinned key"
    if str(p.get("nonce")) in outbox.sent(index, "decision"):
        return "replayed: this machine already acted on a decision with this nonce"
    try:
        local = proposals.get(index, d["proposal_id"])
    except FleetError as exc:
        return exc.message
    if local["status"] != "pending":
        return f"proposal {d['proposal_id']} is {local['status']} here, not pending"
    if passkeys.required(index, decision_risk(d["action"], local.get("risk"))):
        return (f"{d['action']} it on this machine's dashboard: it needs the person's passkey ([passkeys] require "
                f"= {passkeys.mode()!r}), which no hub decision carries")
    stored = index.proposals.get(d["proposal_id"]) or {}   # as stored: the arguments' fingerprint included
    if stored.get("args_fingerprint") != p.get("args_fingerprint") or \
            rows.preview_digest(local.get("preview")) != p.get("preview_digest"):
        return "the proposal here is not the one the approver saw (its arguments or preview differ)"
    outbox.advance(index, {}, {"decision": {str(p["nonce"]): d["key_id"]}})   # spent before acting: never twice
    return None


def _audit_refusal(index: Index, d: dict, why: str) -> None:
    try:
        audit_setup(index.path).record("team.decision_refused", op=None, actor=f"hub:{d.get('approver')}",
                                       proposal_id=d.get("proposal_id"), decision="refused",
                                       summary=f"hub decision {d.get('id')} ({d.get('action')}) refused: {why}"[:400])
    except FleetError as exc:
        log.error("hub decision %s refused (%s); audit entry not written: %s", d.get("id"), why, exc.message)
