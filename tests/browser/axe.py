"""axe-core (WCAG 2.1 A/AA) in the browser tests, from the `axe-playwright-python` wheel (it bundles
axe.min.js). Playwright injects the script through the DevTools protocol, so the dashboard's
Content-Security-Policy (no inline script) stays on while axe runs: `evaluate` into a page as it is, or, in a
context given `preload(context)`, into every document it opens before the page's own script (sending the
half-megabyte script over the protocol for each check cost ~0.3 s of it)."""

from __future__ import annotations

import json

from axe_playwright_python.sync_playwright import Axe

WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
OPTIONS = {"runOnly": {"type": "tag", "values": WCAG_TAGS}, "resultTypes": ["violations"]}

_axe = Axe()


def preload(context) -> None:
    """axe-core in every document `context` opens from now on (checked pages then need no injection)."""
    context.add_init_script(_axe.axe_script)


def violations(page) -> list[dict]:
    """axe's violations of the WCAG 2.1 A/AA rules on the page as it is now (axe injected unless preloaded)."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(_axe.axe_script)
    return page.evaluate(f"axe.run({json.dumps(OPTIONS)})")["violations"]


def report(found: list[dict]) -> str:
    """One block per rule: id, impact, what it means, then each failing element with axe's own reasons."""
    lines = [f"{len(found)} axe-core violation(s):"]
    for v in found:
        lines.append(f"- {v['id']} ({v['impact']}): {v['help']} [{v['helpUrl'].split('?')[0]}]")
        for node in v["nodes"]:
            lines.append(f"    at {' '.join(map(str, node['target']))}: {node['html'][:160]}")
            for check in node.get("any", []) + node.get("all", []) + node.get("none", []):
                lines.append(f"      · {check['message']}")
    return "\n".join(lines)


def assert_none(found: list[dict], where: str) -> None:
    """No violations among `found` (axe's findings on the page at `where`), else axe's report."""
    assert not found, f"{where}\n{report(found)}"


def assert_clean(page, where: str) -> None:
    assert_none(violations(page), where)
