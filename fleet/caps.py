"""Capping lists honestly: every cut list says `truncated` and how many items it left out."""

from __future__ import annotations

from typing import Any, TypeVar, TypedDict

from fleet.errors import FleetError

T = TypeVar("T")

DEFAULT_CAP = 200


class Capped(TypedDict):
    truncated: bool
    omitted_count: int


def cap(items: list[T], limit: int) -> tuple[list[T], dict[str, Any]]:
    """The first `limit` items plus `{truncated, omitted_count}` describing what was left out."""
    omitted = max(0, len(items) - limit)
    return items[:limit], {"truncated": omitted > 0, "omitted_count": omitted}


def check_int(value: Any, field: str, low: int, high: int) -> int:
    """An integer argument within [low, high]; anything else is a BAD_ARGUMENT (bools are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FleetError("BAD_ARGUMENT", f"{field} must be an integer")
    if not low <= value <= high:
        raise FleetError("BAD_ARGUMENT", f"{field} must be between {low} and {high}, got {value}")
    return value


def parse_int(text: str | None, field: str, default: int, low: int, high: int) -> int:
    """An integer argument given as text (a query string, a CLI word): `default` when absent, then as
    check_int; anything that is not a plain decimal integer is a BAD_ARGUMENT."""
    if text is None or text == "":
        return default
    stripped = text.strip()
    if not stripped.lstrip("+-").isdigit() or len(stripped) > 20:
        raise FleetError("BAD_ARGUMENT", f"{field} must be an integer, not {text[:40]!r}")
    return check_int(int(stripped), field, low, high)
