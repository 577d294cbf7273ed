"""Fuzz-style tests for the files fleetdeck parses itself: HEAD, loose and packed refs, reflogs, config (through
dulwich), `.gitmodules`, `.git` files and the worktree and operation files. Random and truncated bytes must
never raise past the repository's `error`: a reader returns, or raises BrokenRepo with a message that names
the file and never quotes it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleet.git import files as gitfiles
from fleet.git.config import read_config
from fleet.git.files import BrokenRepo
from fleet.git.layout import Found, common_dir, read_gitfile
from fleet.repo.record import _last_entry_time, read_repo, read_submodules
from fleet.repo.scope import work_tree_escape
from tests.fleets.gitbuild import commit_file, git, init_repo

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW_FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MARK = b"Mq3Zfuzz"  # planted in every fuzzed file: an error message must never carry it

SHA = "a" * 40
noise = st.binary(max_size=600)
liney = st.lists(st.sampled_from([b"ref: refs/heads/main", SHA.encode(), b"#", b"^", b"\t", b" ", b"\n", b"\0",
                                  b"[remote \"o\"]", b"url = ", b"[branch \"main\"]", b"remote = o", b"=",
                                  b"[include]", b"path = x", b"\\", b"\"", b"\xff", b"12345678901234567890123",
                                  b"+0000", b"refs/heads/x", b"[core]", b"worktree = /", MARK]),
                 max_size=40).map(b"".join)
content = st.one_of(noise, liney, st.builds(lambda a, b: a + MARK + b, noise, noise))


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = init_repo(tmp_path_factory.mktemp("fuzz") / "root" / "repo", commits=2)
    git(path, "remote", "add", "origin", "https://example.com/r.git")
    git(path, "branch", "--set-upstream-to=origin/main", "main", check=False)
    commit_file(path, "f.txt", "x\n")
    git(path, "pack-refs", "--all")
    return path


@pytest.fixture
def gitdir(tmp_path: Path) -> Path:
    folder = tmp_path / "g"
    (folder / "refs" / "heads").mkdir(parents=True)
    (folder / "logs").mkdir()
    return folder


def _no_quote(exc: BrokenRepo) -> None:
    assert MARK.decode("latin-1") not in str(exc)


@pytest.mark.slow
@FUZZ
@given(data=content)
def test_head(gitdir: Path, data: bytes):
    (gitdir / "HEAD").write_bytes(data)
    try:
        head = gitfiles.read_head(gitdir, {"refs/heads/main": SHA})
    except BrokenRepo as exc:
        _no_quote(exc)
        return
    assert (head.ref or "refs/").startswith("refs/") and (head.sha is None or gitfiles.is_sha(head.sha))


@FUZZ
@given(packed=content, loose=content)
def test_refs(gitdir: Path, packed: bytes, loose: bytes):
    (gitdir / "packed-refs").write_bytes(packed)
    (gitdir / "refs" / "heads" / "x").write_bytes(loose)
    refs = gitfiles.read_refs(gitdir)
    assert all(gitfiles.is_sha(sha) for sha in refs.values())


@FUZZ
@given(data=content)
def test_reflog_parse(data: bytes):
    for line in gitfiles.parse_reflog(data):
        assert 0 <= line.at <= gitfiles.MAX_REFLOG_TIME


reflog_line = st.builds(lambda old, new, who, at, msg: b"%s %s %s %d +0000%s" % (old, new, who, at, msg),
                        st.sampled_from([SHA.encode(), b"0" * 40, b"xyz"]), st.sampled_from([SHA.encode(), b"b" * 40]),
                        st.sampled_from([b"A <a@x>", b"\xff <\xfe>", b""]),
                        st.sampled_from([0, 1700000000, gitfiles.MAX_REFLOG_TIME, gitfiles.MAX_REFLOG_TIME + 1]),
                        st.sampled_from([b"", b"\tcommit: x", b"\tcheckout: \xff\xfe", b"\t"]))


@FUZZ
@given(lines=st.lists(st.one_of(reflog_line, liney), max_size=8), ending=st.sampled_from([b"", b"\n", b"\n\n"]))
def test_last_entry_time_is_the_last_line_the_whole_parse_reads(tmp_path: Path, lines: list[bytes], ending: bytes):
    """The last activity's reflog time, read from the end of a file's tail line by line, is the time of the
    last line parsing the whole tail gives (junk, undecodable bytes, a time no clock can show)."""
    log = tmp_path / "log"
    log.write_bytes(b"\n".join(lines) + ending)
    whole = gitfiles.parse_reflog(log.read_bytes())
    assert _last_entry_time(str(log), log.stat().st_size) == (float(whole[-1].at) if whole else None)


@FUZZ
@given(data=content, offset=st.integers(0, 700), step=st.integers(1, 200))
def test_reflog_read_in_steps(gitdir: Path, data: bytes, offset: int, step: int):
    """Bounded steps never raise, end on a line boundary, and add up to one whole read when nothing is clipped."""
    log = gitdir / "logs" / "HEAD"
    log.write_bytes(data)
    chunk, end, clipped = gitfiles.read_reflog(log, offset, step)
    assert end <= len(data) and (chunk == b"" or chunk.endswith(b"\n")) and len(chunk) <= step
    whole, whole_end, _ = gitfiles.read_reflog(log)
    pieces, at = [], 0
    for _ in range(len(data) + 1):
        piece, nxt, cut = gitfiles.read_reflog(log, at, max(step, len(data)))
        assert not cut
        pieces.append(piece)
        if nxt == at:
            break
        at = nxt
    assert b"".join(pieces) == whole and at == whole_end


@FUZZ
@given(data=content, force=st.booleans())
def test_config(gitdir: Path, data: bytes, force: bool):
    (gitdir / "config").write_bytes((b"[remote \"o\"]\n" if force else b"") + data)
    try:
        cfg = read_config(gitdir)
    except BrokenRepo as exc:
        _no_quote(exc)
        return
    for row in gitfiles.remotes(cfg):
        assert set(row) == {"name", "url", "urls", "push_urls"}
    gitfiles.upstream_ref(cfg, "main")
    found = Found(str(gitdir.parent), str(gitdir), str(gitdir), False, str(gitdir.parent))
    try:
        work_tree_escape(found, cfg, [str(gitdir.parent)])
    except BrokenRepo as exc:
        _no_quote(exc)


@FUZZ
@given(data=content)
def test_gitfile_and_commondir(gitdir: Path, data: bytes):
    dotgit = gitdir.parent / ".git"
    dotgit.write_bytes(b"gitdir: " + data)
    target = read_gitfile(dotgit)
    assert target is None or target.is_absolute()
    (gitdir / "commondir").write_bytes(data)
    assert common_dir(gitdir).is_absolute()


@FUZZ
@given(pointer=content, locked=content, msgnum=content, merge_msg=content)
def test_worktree_and_operation_files(gitdir: Path, pointer: bytes, locked: bytes, msgnum: bytes,
                                      merge_msg: bytes):
    wt = gitdir / "worktrees" / "w"
    wt.mkdir(parents=True, exist_ok=True)
    (wt / "gitdir").write_bytes(pointer)
    (wt / "locked").write_bytes(locked)
    (gitdir / "worktrees" / "w" / "HEAD").write_bytes(pointer)
    for row in gitfiles.linked_worktrees(gitdir):
        assert row.id == "w"
    (gitdir / "rebase-merge").mkdir(exist_ok=True)
    (gitdir / "rebase-merge" / "msgnum").write_bytes(msgnum)
    (gitdir / "rebase-merge" / "head-name").write_bytes(merge_msg)
    op, detail = gitfiles.operation(gitdir)
    assert op == "rebase" and (detail["step"] is None or isinstance(detail["step"], int))
    shutil.rmtree(gitdir / "rebase-merge")
    (gitdir / "MERGE_HEAD").write_bytes(msgnum)
    (gitdir / "MERGE_MSG").write_bytes(merge_msg)
    assert gitfiles.operation(gitdir)[0] == "merge"


@SLOW_FUZZ
@given(data=content, shaped=st.booleans())
def test_gitmodules(repo: Path, data: bytes, shaped: bool):
    body = (b"[submodule \"s\"]\n\tpath = " + data + b"\n\turl = https://t0k@h/x\n") if shaped else data
    (repo / ".gitmodules").write_bytes(body)
    try:
        rows = read_submodules(str(repo), str(repo / ".git"))
    finally:
        (repo / ".gitmodules").unlink()
    for row in rows:
        assert "t0k" not in str(row.get("url"))
        if row["state"] == "error":
            assert MARK.decode("latin-1") not in row["error"]


@SLOW_FUZZ
@given(which=st.sampled_from(["HEAD", "config", "packed-refs", "logs/HEAD", "refs/heads/main"]),
       cut=st.floats(0, 1), tail=content)
def test_whole_repo_with_a_truncated_or_garbled_file(repo: Path, which: str, cut: float, tail: bytes):
    """read_repo never raises: a truncated or garbled file is the record's `error` (or a skipped line)."""
    path = repo / ".git" / which
    assume(path.exists())
    original = path.read_bytes()
    path.write_bytes(original[:int(len(original) * cut)] + tail)
    try:
        record = read_repo(Found(str(repo), str(repo / ".git"), str(repo / ".git"), False, str(repo.parent)))
    finally:
        path.write_bytes(original)
    assert record["path"] == str(repo) and (record["error"] is None or isinstance(record["error"], str))


@FUZZ
@given(user=st.text(min_size=1, max_size=12), secret=st.text(min_size=6, max_size=20),
       scheme=st.sampled_from(["https", "http", "ftp", "ssh", "git", "s3"]),
       form=st.sampled_from(["{s}://{x}@h/p", "{s}://{u}:{x}@h/p", "{s}://h/p?access_token={x}",
                             "{s}://h/p?a=1&token={x}#f", "helper::{s}://{x}@h/p", "{s}://{u}:{x}@h"]))
def test_redaction_never_shows_a_credential(user: str, secret: str, scheme: str, form: str):
    assume(all(c not in secret for c in "/?#@:&=;") and all(c not in user for c in "/?#@:"))
    assume(secret not in f"{scheme}://h/p helper token access_token {user}")
    url = form.format(s=scheme, u=user, x=secret)
    shown = gitfiles.redact_url(url)
    if scheme in ("ssh", "git") and form in ("{s}://{x}@h/p", "helper::{s}://{x}@h/p"):
        assert shown == url  # a bare user name on ssh is a login, not a credential
    else:
        assert secret not in shown, (url, shown)


@FUZZ
@given(url=st.text(max_size=200))
def test_redaction_never_raises(url: str):
    assert isinstance(gitfiles.redact_url(url), str)


def test_a_file_that_is_not_regular_is_refused_without_blocking(gitdir: Path):
    os.mkfifo(gitdir / "HEAD")
    with pytest.raises(BrokenRepo, match="HEAD is not a regular file"):
        gitfiles.read_head(gitdir, {})
    os.symlink("/dev/zero", gitdir / "packed-refs")
    with pytest.raises(BrokenRepo, match="packed-refs is a symbolic link"):
        gitfiles.read_refs(gitdir)


@pytest.mark.parametrize("told", [0, 10, 4096, 4868, 9000])
def test_a_file_is_read_whole_whatever_fstat_said_of_its_size(tmp_path: Path, monkeypatch, told: int):
    """What fstat says of a 4,868-byte file: nothing (a /proc file), less (it grew since), all of it, more (it
    shrank): every byte is read either way, and the limit holds; told its size, one read gets it all (the
    read that would only see the end is not made)."""
    data = bytes(range(256)) * 19 + b"tail"
    path = tmp_path / "f"
    path.write_bytes(data)
    real_fstat, real_read, reads = os.fstat, os.read, []

    def fstat(fd: int) -> os.stat_result:
        fields = list(real_fstat(fd))
        fields[6] = told   # st_size
        return os.stat_result(fields)

    with monkeypatch.context() as patch:
        patch.setattr(gitfiles.os, "fstat", fstat)
        patch.setattr(gitfiles.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
        assert gitfiles.read_file(path, 1 << 20, "f") == data
        whole_reads = len(reads)
        assert gitfiles.read_file(path, 100, "f", whole=False) == data[:100]
        with pytest.raises(BrokenRepo, match="larger than 100 bytes"):
            gitfiles.read_file(path, 100, "f")
    assert whole_reads == 1 if told == len(data) else whole_reads > 1
