"""The hardened git runner: caps, deadlines, process groups, stdin feeding, environment, ref checks."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fleet.git.run import GitError, check_ref, run_git
from tests.fleets.gitbuild import init_repo


def test_output_over_the_cap_is_an_error_not_a_silent_prefix(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=3)
    assert len(run_git(repo, ["log", "-p"]).stdout) > 100
    with pytest.raises(GitError) as err:
        run_git(repo, ["log", "-p"], max_bytes=100)
    assert err.value.code == "LIMIT"


@pytest.mark.slow
def test_timeout_kills_the_whole_process_group(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=1)
    marker = tmp_path / "still-running"
    nap = f"sleep 30.{os.getpid()}"  # a duration no other process on the machine sleeps
    script = f"{nap}; touch {marker}"
    started = time.monotonic()
    with pytest.raises(GitError) as err:
        run_git(repo, ["-c", f"alias.hang=!sh -c '{script}'", "hang"], timeout=0.5)
    assert err.value.code == "TIMEOUT" and time.monotonic() - started < 5
    deadline = time.monotonic() + 3  # SIGKILL is delivered when the process next runs: on a busy machine, later
    while (hung := [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid).startswith(nap)]):
        assert time.monotonic() < deadline, f"the shell's child survived the timeout: {hung}"
        time.sleep(0.05)
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


# --- reading a repository's config the way git does -------------------------------------------------------

TRICKY_CONFIGS = [
    b'[core]\n\tbare = false\n[filter "lfs"]\n\tclean = git-lfs clean -- %f\n',
    b'\xef\xbb\xbf[Filter "MiXed"]\r\n\tClean = "a \\"quoted\\" cmd" ; comment\r\n',
    b'[filter.Dotted]\n  clean = x\n[diff "a.b"] textconv = y # trailing\n',
    b'[filter "sp ace\\"q"]\nclean=one \\\n  two\n[filter "\\\\back"]\n\tprocess = "  kept  "\n',
    b'# comment\n; another\n[include]\n\tpath\n[x "y"]\n\tflag\n\tempty =\n\tv = a"b;c"d\n',
    b'[section.sub "ext"]\n\tkey = v\n[ "nosection"]\n\tk = v\n',
    b'[a]\n\tk = \\t\\n\\b tail   \n\tq = "  inner  "  outer  \n',
    b"k = before any section\n[s]\n",
]


@pytest.mark.parametrize("data", TRICKY_CONFIGS)
def test_config_parser_reads_what_git_reads(tmp_path: Path, data: bytes):
    from fleet.git.config import parse

    path = tmp_path / "cfg"
    path.write_bytes(data)
    proc = subprocess.run(["git", "config", "-f", str(path), "--list", "-z"], capture_output=True, check=True)
    expected = []
    for record in proc.stdout.split(b"\0"):
        if record:
            name, newline, value = record.partition(b"\n")
            expected.append((name, value if newline else None))
    ours = []
    for section, sub, key, value in parse(data):
        prefix = section + (b"." + sub if sub is not None else b"")
        ours.append((prefix + b"." + key if prefix else key, value))
    assert ours == expected


@pytest.mark.parametrize("data", [b"[unterminated\n", b'[s "x]\n', b"[s]\nk = \\q\n", b'[s]\nk = "open\n',
                                  b"[s]\n1k = v\n", b"[s]\nk v\n", b"\xef\xbb[s]\n"])
def test_config_git_refuses_is_refused(tmp_path: Path, data: bytes):
    from fleet.git.config import ConfigError, parse

    path = tmp_path / "cfg"
    path.write_bytes(data)
    assert subprocess.run(["git", "config", "-f", str(path), "--list"], capture_output=True).returncode != 0
    with pytest.raises(ConfigError):
        parse(data)


def test_driver_names_come_from_every_included_file_and_nothing_else(tmp_path: Path):
    from fleet.git.config import read_repo_config

    (tmp_path / "sub").mkdir()
    (tmp_path / "config").write_text('[include]\n\tpath = sub/one.cfg\n[includeIf "onbranch:nope"]\n'
                                     '\tpath = ~/never-there.cfg\n[filter "a"]\n\tclean = x\n')
    (tmp_path / "sub" / "one.cfg").write_text('[includeIf "gitdir:/elsewhere/"]\n\tpath = two.cfg\n'
                                              '[diff "b"]\n\ttextconv = y\n')
    (tmp_path / "sub" / "two.cfg").write_text('[filter "c"]\n\tprocess = z\n[merge "m"]\n\tdriver = w\n'
                                              "[extensions]\n\tobjectFormat = sha256\n")
    found = read_repo_config([str(tmp_path / "config"), str(tmp_path / "config.worktree")])
    assert found.drivers == {b"filter": {b"a": frozenset({b"clean"}), b"c": frozenset({b"process"})},
                             b"diff": {b"b": frozenset({b"textconv"})}}
    assert found.object_format == "sha256"
    (tmp_path / "sub" / "two.cfg").write_text('[include]\n\tpath = two.cfg\n')
    from fleet.git.config import ConfigError
    with pytest.raises(ConfigError):
        read_repo_config([str(tmp_path / "config")])


def test_overrides_follow_config_edits_and_leave_ordinary_repos_alone(tmp_path: Path):
    from fleet.git.neutralize import guard_for

    repo = init_repo(tmp_path / "r", commits=1)
    assert guard_for(str(repo)).env == {}
    assert guard_for(str(repo / "sub" / "dir")).env == {}          # not there yet: git walks up, so do we
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write('[filter "x=y"]\n\tclean = evil\n')
    env = guard_for(str(repo)).env
    assert env["GIT_CONFIG_KEY_0"] == "filter.x=y.clean" and env["GIT_CONFIG_VALUE_0"] == ""
    assert env["GIT_CONFIG_KEY_1"] == "filter.x=y.required" and env["GIT_CONFIG_VALUE_1"] == "false"
    assert guard_for(str(repo / "sub" / "dir")).env == env


def test_a_gitfile_or_include_naming_a_nul_path_is_refused_not_a_crash(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=1)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").write_bytes(b"gitdir: " + str(repo / ".git").encode() + b"\0junk\n")
    with pytest.raises(GitError):
        run_git(linked, ["status"])


def test_only_a_known_object_format_is_taken_from_a_repo_config(tmp_path: Path):
    from fleet.git.config import read_repo_config

    (tmp_path / "config").write_bytes(b'[extensions]\n\tobjectFormat = "sha256\\n[merge \\"x\\"]"\n')
    assert read_repo_config([str(tmp_path / "config")]).object_format == "sha1"
    (tmp_path / "config").write_bytes(b"[extensions]\n\tobjectFormat = SHA256\n")
    assert read_repo_config([str(tmp_path / "config")]).object_format == "sha256"
