"""Needs you: what waits on the person (`items`), `fleetdeck inbox` (`commands`) and the notifications
that carry it where the person is (fleet.notify)."""

from fleet.inbox.items import KINDS, inbox

__all__ = ["KINDS", "inbox"]
