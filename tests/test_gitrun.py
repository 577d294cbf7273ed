"""The hardened git runner: caps, deadlines, process groups, stdin feeding, environment, ref checks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fleet.git.run import GitError, check_ref, run_git
from tests.gitbuild import init_repo


def test_output_over_the_cap_is_an_error_not_a_silent_prefix(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=3)
    assert len(run_git(repo, ["log", "-p"]).stdout) > 100
    with pytest.raises(GitError) as err:
        run_git(repo, ["log", "-p"], max_bytes=100)
    assert err.value.code == "LIMIT"


def test_timeout_kills_the_whole_process_group(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=1)
    marker = tmp_path / "still-running"
    script = f"sleep 30; touch {marker}"
    started = time.monotonic()
    with pytest.raises(GitError) as err:
        run_git(repo, ["-c", f"alias.hang=!sh -c '{script}'", "hang"], timeout=0.5)
    assert err.value.code == "TIMEOUT" and time.monotonic() - started < 5
    time.sleep(0.2)
    hung = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid).startswith("sleep 30")]
    assert hung == [], "the shell's child survived the timeout"
    assert not marker.exists()


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_large_stdin_is_fed_while_output_is_read(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=1)
    data = b"line\n" * 2_000_000  # 10 MB: more than any pipe buffer in both directions
    out = run_git(repo, ["hash-object", "--stdin"], input_bytes=data).stdout.strip()
    assert len(out) == 40
    assert run_git(repo, ["hash-object", "--stdin"], input_bytes=b"").stdout.strip() == \
        b"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_inherited_git_variables_and_pagers_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = init_repo(tmp_path / "r", commits=1)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    monkeypatch.setenv("PAGER", "false")
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent/evil.so")
    out = run_git(repo, ["rev-parse", "--show-toplevel"]).stdout.decode().strip()
    assert out == str(repo.resolve())


def test_failures_name_the_command_and_git_s_reason(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=1)
    with pytest.raises(GitError) as err:
        run_git(repo, ["rev-parse", "--verify", "no-such-branch"])
    assert err.value.code == "GIT_FAILED" and "rev-parse" in err.value.message
    result = run_git(repo, ["merge-base", "--is-ancestor", "HEAD", "HEAD~0"], ok_codes=(0, 1))
    assert result.returncode == 0
    with pytest.raises(GitError) as err:
        run_git(tmp_path / "missing", ["status"])
    assert "cannot change to" in err.value.message


@pytest.mark.parametrize("bad", ["--output=x", "-p", "main..--output=x", "a...-b", "ma\nin", "ma\0in", ""])
def test_check_ref_refuses_options_and_control_characters(bad: str):
    with pytest.raises(ValueError):
        check_ref(bad)


@pytest.mark.parametrize("good", ["main", "HEAD~1", "a..b", "a...b", "refs/heads/x", "v1.0^{commit}"])
def test_check_ref_accepts_refs_and_ranges(good: str):
    assert check_ref(good) == good
