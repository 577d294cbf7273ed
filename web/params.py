"""Query-string forms as the dashboard's pages and the JSON API read them (strings in, typed values out)."""

from __future__ import annotations

from starlette.datastructures import QueryParams

from fleet.caps import parse_int
from fleet.errors import FleetError

DEFAULT_SINCE = "24h"
SINCE_PRESETS = (("90m", "last 90 minutes"), ("24h", "last 24 hours"), ("7d", "last 7 days"))


def split_list(values: list[str]) -> list[str]:
    """`kinds=commit,amend&kinds=reset` -> ['commit', 'amend', 'reset']."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def int_param(value: str | None, name: str, default: int) -> int:
    """A query-string integer (range checked by the fleet/ function it feeds)."""
    return parse_int(value, name, default, -2**63, 2**63)


def digest_form(params: QueryParams) -> dict:
    """The digest page's form as given: a preset (`90m`, `24h`, `7d`) or `custom` with an ISO time in
    `custom`; any other `since` (a link with an ISO time or unix ms) shows up as a custom value."""
    since = params.get("since") or DEFAULT_SINCE
    custom = params.get("custom", "").strip()
    if since != "custom" and since not in dict(SINCE_PRESETS):
        since, custom = "custom", since
    try:
        max_events = int_param(params.get("max_events"), "max_events", 200)
    except FleetError:
        max_events = 0  # refused with the library's own message by fleet.views.digest
    return {"since": since, "custom": custom, "effective_since": custom if since == "custom" else since,
            "presets": SINCE_PRESETS, "repos": [r for r in params.getlist("repos") if r],
            "kinds": split_list(params.getlist("kinds")), "max_events": max_events}
