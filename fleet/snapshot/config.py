"""The `[snapshots]` settings (declared with their defaults in fleet/settings.py)."""

from __future__ import annotations

from typing import Any

from fleet.errors import FleetError
from fleet.settings import load_settings

GUARDS = ("off", "ask")


def snapshot_settings() -> dict[str, Any]:
    """The safety net's settings, checked beyond their types (the guard is one of GUARDS)."""
    values = load_settings()["snapshots"]
    if values["guard"] not in GUARDS:
        raise FleetError("BAD_ARGUMENT", f"snapshots.guard must be one of {', '.join(GUARDS)}, "
                                         f"not {values['guard']!r}")
    return values
