"""A push's preview says whether approving it can reach the destination (fleet/ops/reach.py), before a person
approves a push that can only fail: a local mirror that was deleted, a host that refuses or does not answer, a
URL whose host has no DNS answer, ssh missing. Real git remotes, real sockets on loopback (a listener that
accepts and reads nothing; a port nobody listens on); the approval then fails exactly where the preview warned.
"""

from __future__ import annotations

import shutil
import socket
import threading

import pytest

from fleet.ops import service
from fleet.ops.reach import MAX_URLS, preflight
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import propose, with_origin


@pytest.fixture
def listener():
    """A loopback port that accepts connections and never sends a byte (what a TCP reachability check needs)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                accepted.append(sock.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield sock.getsockname()[1]
    sock.close()
    for conn in accepted:
        conn.close()


@pytest.fixture
def closed_port():
    """A loopback port nobody listens on (bound to learn a free one, then closed)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def pushable(ops_fleet, tmp_path):
    return ops_fleet, with_origin(ops_fleet, tmp_path)


def test_a_reachable_local_mirror_is_said_and_warns_nothing(pushable):
    ops_fleet, remote = pushable
    preview = propose(ops_fleet, "push", {})["preview"]
    assert preview["reachable"] == [{"url": str(remote), "reached": True,
                                     "detail": f"{remote} is a git repository"}]
    assert "warning" not in preview


def test_a_deleted_mirror_warns_in_the_preview_and_approval_fails_there(pushable):
    ops_fleet, remote = pushable
    shutil.rmtree(remote)
    made = propose(ops_fleet, "push", {})
    [seen] = made["preview"]["reachable"]
    assert seen["reached"] is False and "does not exist" in seen["detail"]
    assert "approving this push would most likely fail" in made["preview"]["warning"]
    done = service.approve(ops_fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and "GIT_FAILED" in done["error"]


def test_a_folder_that_is_not_a_repository_warns(pushable, tmp_path):
    ops_fleet, _ = pushable
    plain = tmp_path / "plain-folder"
    plain.mkdir()
    git(ops_fleet["work"], "remote", "add", "plain", str(plain))
    [seen] = propose(ops_fleet, "push", {"remote": "plain"})["preview"]["reachable"]
    assert seen["reached"] is False and seen["detail"] == f"{plain} is not a git repository"


@pytest.mark.parametrize("scheme", ["git", "http", "ssh"])
def test_a_host_that_answers_is_reached(pushable, listener, scheme):
    ops_fleet, _ = pushable
    git(ops_fleet["work"], "remote", "add", "net", f"{scheme}://127.0.0.1:{listener}/repo.git")
    [seen] = propose(ops_fleet, "push", {"remote": "net"})["preview"]["reachable"]
    if scheme == "ssh" and shutil.which("ssh") is None:
        assert seen["reached"] is False and "ssh is not installed" in seen["detail"]
    else:
        assert seen == {"url": f"{scheme}://127.0.0.1:{listener}/repo.git", "reached": True,
                        "detail": f"127.0.0.1:{listener} answers"}


@pytest.mark.parametrize("scheme", ["git", "https", "ssh"])
def test_a_port_that_refuses_warns(pushable, closed_port, scheme):
    ops_fleet, _ = pushable
    git(ops_fleet["work"], "remote", "add", "net", f"{scheme}://127.0.0.1:{closed_port}/repo.git")
    preview = propose(ops_fleet, "push", {"remote": "net"})["preview"]
    [seen] = preview["reachable"]
    assert seen["reached"] is False
    if not (scheme == "ssh" and shutil.which("ssh") is None):
        assert seen["detail"].startswith(f"127.0.0.1:{closed_port} refused the connection")
    assert preview["warning"].startswith(f"{scheme}://127.0.0.1:{closed_port}/repo.git: ")


def test_an_unknown_host_warns(pushable):
    ops_fleet, _ = pushable
    git(ops_fleet["work"], "remote", "add", "net", "https://no-such-host.invalid/repo.git")
    [seen] = propose(ops_fleet, "push", {"remote": "net"})["preview"]["reachable"]
    assert seen == {"url": "https://no-such-host.invalid/repo.git", "reached": False,
                    "detail": "the host no-such-host.invalid is not known (no DNS answer)"}


def test_an_http_push_is_checked_through_the_proxy_git_would_use(pushable, listener, closed_port):
    ops_fleet, _ = pushable
    work = ops_fleet["work"]
    git(work, "remote", "add", "net", "https://no-such-host.invalid/repo.git")
    git(work, "config", "http.proxy", f"http://127.0.0.1:{listener}")
    [seen] = propose(ops_fleet, "push", {"remote": "net"})["preview"]["reachable"]
    assert seen["reached"] is True and seen["detail"] == f"the proxy 127.0.0.1:{listener} answers"
    git(work, "config", "http.https://no-such-host.invalid/.proxy", f"127.0.0.1:{closed_port}")  # git's urlmatch
    [seen] = propose(ops_fleet, "push", {"remote": "net"})["preview"]["reachable"]
    assert seen["reached"] is False and seen["detail"].startswith(f"the proxy 127.0.0.1:{closed_port} failed")


def test_the_url_checked_is_the_one_git_pushes_to(pushable, closed_port):
    """pushurl and insteadOf applied: the preflight checks git's own destination, not remote.<name>.url."""
    ops_fleet, remote = pushable
    work = ops_fleet["work"]
    git(work, "config", "url.git://127.0.0.1:%d/.pushInsteadOf" % closed_port, str(remote.parent) + "/")
    preview = propose(ops_fleet, "push", {})["preview"]
    assert preview["push_urls"] == [f"git://127.0.0.1:{closed_port}/remote.git"]
    assert preview["reachable"][0]["reached"] is False


def test_remote_helpers_are_not_checked_and_say_so(tmp_path):
    found, warning = preflight(str(tmp_path), ["persistent-https::https://example.invalid/x", "ftp://host/x"])
    assert [f["reached"] for f in found] == [None, None] and warning is None
    assert found[0]["detail"] == "pushed through git-remote-persistent-https: not checked"


def test_credentials_never_reach_the_preview(pushable, closed_port):
    ops_fleet, _ = pushable
    git(ops_fleet["work"], "remote", "add", "net", f"https://token:s3cret@127.0.0.1:{closed_port}/repo.git")
    preview = propose(ops_fleet, "push", {"remote": "net"})["preview"]
    assert "s3cret" not in repr(preview) and "token" not in repr(preview["reachable"])


def test_at_most_a_few_urls_are_checked(tmp_path, closed_port):
    urls = [f"git://127.0.0.1:{closed_port}/r{i}.git" for i in range(MAX_URLS + 2)]
    found, warning = preflight(str(tmp_path), urls)
    assert len(found) == MAX_URLS and warning.count("refused the connection") == MAX_URLS
