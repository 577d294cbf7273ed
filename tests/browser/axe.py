"""axe-core (WCAG 2.1 A/AA) in the browser tests, from the `axe-playwright-python` wheel (it bundles
axe.min.js). Playwright's `evaluate` injects the script through the DevTools protocol, so the dashboard's
Content-Security-Policy (no inline script) stays on while axe runs."""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe

WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
OPTIONS = {"runOnly": {"type": "tag", "values": WCAG_TAGS}, "resultTypes": ["violations"]}

_axe = Axe()


def violations(page) -> list[dict]:
    """axe's violations of the WCAG 2.1 A/AA rules on the page as it is now."""
    return _axe.run(page, options=OPTIONS).response["violations"]


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


def assert_clean(page, where: str) -> None:
    found = violations(page)
    assert not found, f"{where}\n{report(found)}"
