"""The confirmations a person's decision on a proposal takes, one rule for every surface that decides (the
dashboard and its HTTP API, the CLI; MCP never decides).

A high-risk proposal is approved only with a second, explicit confirmation: the dashboard's checkbox
(`confirm_high_risk`), `yes` typed in full on the terminal where the others take `y`. A passkey
(fleet/ops/passkeys.py) is asked for by the risk the decision carries: approving carries the proposal's,
rejecting or undoing carries none (so only `[passkeys] require = "all"` asks for one then).
"""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.ops.catalog import HIGH


def needs_explicit(risk: str | None) -> bool:
    """Whether deciding a proposal of this risk takes the second, explicit confirmation."""
    return risk == HIGH


def require_explicit(row: dict, confirmed: bool) -> None:
    """Refuse (CONFIRM_REQUIRED) approving a high-risk proposal that was not explicitly confirmed."""
    if needs_explicit(row["risk"]) and not confirmed:
        raise FleetError("CONFIRM_REQUIRED", f"{row['op']} is high-risk: confirm it explicitly (confirm_high_risk)")


def typed_word(risk: str | None) -> str:
    """What the person types on a terminal to confirm a decision on a proposal of this risk."""
    return "yes" if needs_explicit(risk) else "y"


GOING_BACK = ("reject", "undo")  # the decisions that run nothing new


def decision_risk(decision: str, risk: str | None) -> str | None:
    """The risk a decision carries for its passkey check: rejecting or undoing none, approving the proposal's."""
    return None if decision in GOING_BACK else risk
