"""The push preflight: can approving this push reach where git will send it?

A push proposal previews from the last fetch, with no network; what makes its approval fail is most often the
destination itself (a deleted local mirror, a host that does not answer, ssh missing). So the preview checks each
push URL the cheapest way that says something true, sends nothing and logs in nowhere:

- a local path (or `file://`): the folder exists and is a git repository;
- ssh (`ssh://…` or scp-like `host:path`): ssh's own view of the host (`ssh -G`: aliases, HostName and Port from
  the person's ssh config), then a TCP connect to it; a ProxyCommand or ProxyJump is not followed (not checked);
- `git://`, `http://`, `https://`: a TCP connect to the host, or to the proxy git would use for that URL;
- a remote helper (`helper::…`) or another scheme: not checked, and said so.

Each check is bounded (the URLs checked at once, on threads of their own, all within `DEADLINE` seconds, a host
name lookup included; at most `MAX_URLS` URLs) so a proposal never waits on a dead host for long. The answer is advice shown in the preview (`reachable`, and a `warning` when a URL was not reached), never a
refusal: a host may be down for a minute, and the person decides.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from typing import TypedDict
from urllib.parse import urlsplit

from fleet.errors import FleetError
from fleet.git.files import redact_url
from fleet.git.run import run, text

TIMEOUT = 2.0                  # one connect, or ssh reading its config
DEADLINE = 3.0                 # every URL's check, a DNS lookup that hangs included
MAX_URLS = 3
_PORTS = {"ssh": 22, "git+ssh": 22, "ssh+git": 22, "git": 9418, "http": 80, "https": 443}


class Reach(TypedDict):
    """One push URL's preflight: `reached` True, False (the warning says why) or None (not checked)."""
    url: str
    reached: bool | None
    detail: str


def _endpoint(url: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port or None, path) of a network URL, scp-like ssh included; None for a local path."""
    if "://" in url:
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
        return parts.scheme.lower(), parts.hostname or "", port, parts.path
    head, colon, path = url.partition(":")
    if colon and "/" not in head and len(head) > 1:    # git's scp-like rule (a one-letter head is a drive)
        host = head.rpartition("@")[2].strip("[]")
        return "ssh", host, None, path
    return None


def _local(repo: str, url: str) -> Reach:
    path = urlsplit(url).path if url.lower().startswith("file://") else url
    folder = os.path.join(repo, os.path.expanduser(path))
    shown = redact_url(url)
    if not os.path.isdir(folder):
        return Reach(url=shown, reached=False, detail=f"the folder {path} does not exist")
    if not (os.path.exists(os.path.join(folder, ".git"))
            or (os.path.isfile(os.path.join(folder, "HEAD")) and os.path.isdir(os.path.join(folder, "objects")))):
        return Reach(url=shown, reached=False, detail=f"{path} is not a git repository")
    return Reach(url=shown, reached=True, detail=f"{path} is a git repository")


def _ssh_view(host: str, port: int | None) -> tuple[str, int] | tuple[bool | None, str]:
    """(host, port) as ssh itself resolves `host` from the person's ssh config, or (reached, why) when that
    already decides it: ssh missing (False), or not checked (None)."""
    cmd = ["ssh", "-G", *(["-p", str(port)] if port else []), "--", host]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        return False, "ssh is not installed here: git cannot push to an ssh URL"
    except subprocess.TimeoutExpired:
        return None, "ssh took too long to read its config: not checked"
    if done.returncode != 0:
        return None, "ssh could not read its config for this host: not checked"
    seen = dict(line.split(" ", 1) for line in text(done.stdout).splitlines() if " " in line)
    for through in ("proxycommand", "proxyjump"):
        if seen.get(through, "none").lower() != "none":
            return None, f"ssh reaches this host through its {through}: not checked"
    try:
        return seen.get("hostname", host), int(seen.get("port", port or 22))
    except ValueError:
        return None, "ssh gave no port for this host: not checked"


def _proxy(repo: str, url: str, scheme: str) -> tuple[str, int] | None:
    """The HTTP proxy git would use for `url` (its `http.proxy` for that URL, then the environment's)."""
    asked = run(repo, ["config", "--get-urlmatch", "http.proxy", url], check=False)
    value = text(asked.stdout).strip() if asked.returncode == 0 else ""
    if not value:
        value = next((os.environ[k] for k in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY")
                      if os.environ.get(k)), "")
    if not value:
        return None
    parts = urlsplit(value if "://" in value else "http://" + value)
    try:
        return (parts.hostname, parts.port or 1080) if parts.hostname else None
    except ValueError:
        return None


def _connect(host: str, port: int) -> str | None:
    """None when a TCP connection to host:port opens (closed at once, nothing sent), else why not."""
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT):
            return None
    except socket.gaierror:
        return f"the host {host} is not known (no DNS answer)"
    except TimeoutError:
        return f"{host}:{port} did not answer within {TIMEOUT:g} s"
    except OSError as exc:
        return f"{host}:{port} refused the connection ({exc.strerror or exc})"


def _network(repo: str, url: str, scheme: str, host: str, port: int | None) -> Reach:
    shown = redact_url(url)
    if not host:
        return Reach(url=shown, reached=False, detail="the URL names no host")
    if scheme in ("ssh", "git+ssh", "ssh+git"):
        first, second = _ssh_view(host, port)
        if not isinstance(first, str):
            return Reach(url=shown, reached=first, detail=second)
        host, port = first, second
    elif scheme in ("http", "https"):
        proxy = _proxy(repo, url, scheme)
        if proxy:
            failed = _connect(*proxy)
            return Reach(url=shown, reached=failed is None,
                         detail=f"the proxy {proxy[0]}:{proxy[1]} " + ("answers" if failed is None else f"failed: {failed}"))
    port = port or _PORTS[scheme]
    failed = _connect(host, port)
    return Reach(url=shown, reached=failed is None, detail=failed or f"{host}:{port} answers")


def reach(repo: str, url: str) -> Reach:
    """The preflight of one push URL (git's own resolution of it: pushurl and insteadOf already applied)."""
    helper, sep, _inner = url.partition("::")
    if sep and "/" not in helper and ":" not in helper:
        return Reach(url=redact_url(url), reached=None, detail=f"pushed through git-remote-{helper}: not checked")
    endpoint = _endpoint(url)
    if endpoint is None or endpoint[0] == "file":
        return _local(repo, url)
    scheme, host, port, _path = endpoint
    if scheme not in _PORTS:
        return Reach(url=redact_url(url), reached=None, detail=f"a {scheme}:// URL: not checked")
    return _network(repo, url, scheme, host, port)


def preflight(repo: str, urls: list[str]) -> tuple[list[Reach], str | None]:
    """Each push URL's preflight (the first `MAX_URLS`), and a warning for the preview when one was not reached."""
    checked = urls[:MAX_URLS]
    answers: list[Reach | None] = [None] * len(checked)

    def check(i: int) -> None:
        try:
            answers[i] = reach(repo, checked[i])
        except FleetError as exc:          # git could not read the repository's config: said, not raised
            answers[i] = Reach(url=redact_url(checked[i]), reached=None, detail=f"not checked: {exc.message}")

    threads = [threading.Thread(target=check, args=(i,), daemon=True, name="fleetdeck-push-preflight")
               for i in range(len(checked))]
    for thread in threads:
        thread.start()
    end = time.monotonic() + DEADLINE
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    found = [r or Reach(url=redact_url(url), reached=None, detail=f"no answer within {DEADLINE:g} s: not checked")
             for r, url in zip(answers, checked)]
    missed = [r for r in found if r.get("reached") is False]
    if not missed:
        return found, None
    return found, ("; ".join(f"{r['url']}: {r['detail']}" for r in missed)
                   + ": approving this push would most likely fail. Check the remote, then preview again")
