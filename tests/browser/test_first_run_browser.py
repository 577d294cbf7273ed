"""The README's first command, as a newcomer runs it: a fresh venv, `pip install .` from a copy of the checkout,
then `fleetdeck demo` from that venv — and every page of the dashboard it serves answers, reached in Chromium by
following links from the landing link the demo prints, as a person clicking through would; each kind of page
is opened in the tab too, with no script error.

The install line is read from the README itself (so the test follows the README, and fails when the README's
command stops working). Only what the README says changes: `~` is a temp folder, `serve ~/code` becomes the
README's `demo` (with its documented `--dir` and `--port`)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections import deque
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from starlette.routing import Match, Route

from tests.fleets.cli import PROJECT_ROOT, copy_checkout
from web.app import routes

pytestmark = pytest.mark.slow


def readme_install_line() -> str:
    """The shell command in the README's first code block (the one under "Install and run it on your repos")."""
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    head, _, rest = text.partition("**Install and run it on your repos**")
    assert rest, "the README no longer opens with 'Install and run it on your repos'"
    block = re.search(r"```sh\n(.+?)\n```", rest, re.S)
    assert block, "no ```sh block under the README's install heading"
    return block.group(1).strip()


def split_install(line: str) -> tuple[str, str]:
    """(the install part, the run part) of `venv && pip install . && fleetdeck serve ~/code`."""
    parts = [p.strip() for p in line.split("&&")]
    assert len(parts) == 3 and parts[0].startswith("python3 -m venv ") and " install ." in parts[1], parts
    assert re.fullmatch(r"\S+/bin/fleetdeck serve \S+", parts[2]), parts[2]
    return " && ".join(parts[:2]), parts[2]


def page_routes() -> list[Route]:
    """Every GET route that renders a page or answers JSON: what 'every page' means here."""
    return [r for r in routes() if isinstance(r, Route) and "GET" in (r.methods or set())]


def route_of(path: str) -> Route | None:
    scope = {"type": "http", "path": path, "method": "GET"}
    for route in page_routes():
        if route.matches(scope)[0] is Match.FULL:
            return route
    return None


def links(base: str, url: str, html: str) -> list[str]:
    """Same-origin hrefs and srcs of a page, absolute, without fragments (the crawl's next steps)."""
    found = []
    for ref in re.findall(r"""(?:href|src)="([^"]+)\"""", html):
        ref = ref.replace("&amp;", "&")
        absolute = urljoin(url, ref).split("#")[0]
        if absolute.startswith(base + "/") and "code=" not in absolute:
            found.append(absolute)
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The README's install part run in a copy of the checkout; the run part with `~` pointed at the same place."""
    base = tmp_path_factory.mktemp("first-run")
    checkout = copy_checkout(base / "fleetdeck")
    install, run = split_install(readme_install_line())
    home = base / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(["bash", "-c", install.replace("~/", f"{home}/")], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return home, run.replace("~/", f"{home}/")


def test_the_readme_install_line_gives_a_working_fleetdeck(installed):
    home, run = installed
    command = run.split()[0]
    assert Path(command).is_file() and str(home) in command
    version = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=120,
                             cwd=home, env={"PATH": os.environ["PATH"], "HOME": str(home)})
    assert version.returncode == 0 and version.stdout.startswith("fleetdeck "), version.stderr


def test_the_demo_from_a_fresh_venv_serves_every_page(installed, browser, tmp_path):
    home, run = installed
    command = run.split()[0]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8",
           **{f"XDG_{k}_HOME": str(home / k.lower()) for k in ("CONFIG", "DATA", "STATE", "CACHE")}}
    proc = subprocess.Popen([command, "demo", "--dir", str(tmp_path / "demo"), "--port", "0"], cwd=home, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stdout:
            if line.startswith("fleetdeck dashboard: "):
                url = line.split(": ", 1)[1].strip()
                break
        assert url, proc.stderr.read() if proc.poll() is not None else "the demo printed no dashboard link"
        split = urlsplit(url)
        origin = f"{split.scheme}://{split.netloc}"
        visited, errors = crawl(browser, origin, url)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]

    failures = {u: status for u, (status, _) in visited.items() if status != 200}
    assert not failures, failures
    assert not errors, errors
    reached = {route.path for u in visited if (route := route_of(urlsplit(u).path))}
    html_routes = {r.path for r in page_routes() if not r.path.startswith(("/api/", "/fragments/", "/static"))
                   and not r.path.endswith(("/diff", "/patch"))}
    unreached = sorted(html_routes - reached)
    assert not unreached, f"pages no link leads to: {unreached}"
    # the queue names the demo's repos, a repo page its proposals; none is an error page
    assert all("Traceback" not in body for _, body in visited.values())
    pages = [u for u in visited if (route := route_of(urlsplit(u).path)) and route.name == "repo"]
    assert len(pages) >= 10, pages            # the demo's fleet, each repo reached from the queue
    assert not (tmp_path / "demo").exists()   # Ctrl-C deleted the demo's fleet, as the README says


def crawl(browser, origin: str, landing: str, limit: int = 600) -> tuple[dict[str, tuple[int, str]], list[str]]:
    """Sign a tab in with the landing link (its script trades the code for the session), follow same-origin
    links breadth-first with the tab's cookies, then fetch the parameterless JSON APIs; open the first page of
    each route in the tab. ({url: (status, body)}, script errors seen in the tab)."""
    visited: dict[str, tuple[int, str]] = {}
    errors: list[str] = []
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.on("pageerror", lambda exc: errors.append(f"{tab.url}: {exc}"))
        tab.goto(landing)
        tab.wait_for_url(lambda u: "code=" not in u)
        queue = deque([tab.url.split("#")[0]])
        opened: set[str] = set()
        while queue and len(visited) < limit:
            url = queue.popleft()
            if url in visited:
                continue
            answer = context.request.get(url, max_redirects=5, timeout=60_000)
            kind = answer.headers.get("content-type", "")
            body = answer.text() if "text" in kind or "json" in kind else ""
            visited[url] = (answer.status, body)
            if kind.startswith("text/html"):
                queue.extend(links(origin, url, body))
                route = route_of(urlsplit(url).path)
                if route is not None and route.name not in opened:
                    opened.add(route.name)
                    tab.goto(url)
                    tab.wait_for_load_state("load")
        for route in page_routes():  # the parameterless JSON APIs, which no page links to (the event stream
            # never ends: the tab's pages hold it open themselves)
            if route.path.startswith("/api/") and "{" not in route.path and route.name != "api_events":
                answer = context.request.get(origin + route.path, timeout=60_000)
                visited[origin + route.path] = (answer.status, answer.text())
    finally:
        context.close()
    return visited, errors
