"""The one Jinja environment and its one filter set: the dashboard (web/) and the HTML digest
(`fleetdeck digest --format html`) render through it, so a sha, a time or a reason looks the same on both.

Presentation only: nothing here reads the index or git. Templates load from the installed `templates`
package, so a wheel install renders too.

Every value a template prints passes the one display rule (fleet/safetext.py) on its way out (`finalize`):
control, bidi and zero-width characters become visible escapes, newlines and tabs stay (a message keeps its
lines); `| visible` escapes those too (a path, a branch name), `| diff_lines` cuts a diff as git reads it,
and `tojson` escapes the same characters as `\\u` sequences.
"""

from __future__ import annotations

import functools
import json
import time
from datetime import datetime
from urllib.parse import urlencode

import jinja2
import markupsafe

from fleet.timespec import iso
from fleet.attention import REASONS
from fleet.safetext import diff_lines, json_safe, visible

SHORT = 10


def short(sha: str | None) -> str:
    """A sha as people read it (ten hex digits); '—' when there is none (a branch born or deleted)."""
    return sha[:SHORT] if sha else "—"


def one_line(text: str | None, width: int = 100) -> str:
    """Whitespace folded to single spaces, cut at `width` with an ellipsis."""
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[:width - 1] + "…"


def ago(stamp: str | float | None, now: float | None = None) -> str:
    """'3 min ago' for an ISO time or unix seconds; '—' when unknown (the page's script keeps it current)."""
    if stamp is None or stamp == "":
        return "—"
    if isinstance(stamp, str):
        try:
            seconds = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return stamp
    else:
        seconds = float(stamp)
    delta = max(0, int((now or time.time()) - seconds))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if delta >= size:
            return f"{delta // size} {unit} ago"
    return "just now" if delta < 5 else f"{delta} s ago"


def num(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def query(params: dict[str, str], **changes: object) -> str:
    """`?a=1&page=2`: the current filters with some values changed (None drops a key)."""
    merged = {**params, **{k: str(v) for k, v in changes.items() if v is not None}}
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
    return "?" + urlencode(merged) if merged else "?"


FILTERS = {"ago": ago, "short": short, "num": num, "iso": iso, "one_line": one_line, "visible": visible,
           "diff_lines": diff_lines}


def _finalize(value: object) -> object:
    """What `{{ value }}` prints: repository and agent text with the display rule applied (markup that a
    filter or macro built, already escaped, is left alone)."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return visible(value, keep="\n\t")
    return value


def _dumps(value: object, **kwargs: object) -> str:
    return json_safe(json.dumps(value, **kwargs))


@functools.cache
def environment() -> jinja2.Environment:
    """The environment, built once per process. The dashboard adds Starlette's `url_for` to it, and the
    decisions' confirmation rule (`needs_explicit`, fleet/ops/confirm.py)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("templates", "."),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True,
                             lstrip_blocks=True, finalize=_finalize)
    env.policies["json.dumps_function"] = _dumps
    env.filters.update(FILTERS)
    env.globals.update(query=query, reason_kinds=REASONS)
    return env
