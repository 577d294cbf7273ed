"""The process-table detector: classification by program or package, and a live process in a fleet repo."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet import procinfo
from fleet.presence import procs
from tests.fleets.gitbuild import init_repo


@pytest.mark.parametrize("argv, agent", [
    (["claude"], "claude-code"),
    (["/home/me/.local/share/claude/versions/2.1.50", "--resume"], "claude-code"),
    (["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"], "claude-code"),
    (["/usr/bin/node", "--no-warnings", "/opt/npm/lib/node_modules/@openai/codex/bin/codex.js"], "codex"),
    (["npx", "-y", "@openai/codex@0.50.0"], "codex"),
    (["python3", "-m", "aider", "--model", "x"], "aider"),
    (["/usr/bin/python3.11", "/home/me/.local/bin/aider"], "aider"),
    (["uvx", "aider-chat"], "aider"),
    (["/home/me/.local/share/cursor-agent/versions/2025.09/cursor-agent"], "cursor-agent"),
    (["/home/me/.local/share/cursor-agent/versions/2025.09/agent"], "cursor-agent"),
    (["C:\\Tools\\codex.exe"], "codex"),
    (["bun", "run", "/x/node_modules/@google/gemini-cli/dist/index.js"], "gemini"),
    (["goose", "session"], "goose"),
    (["vim", "claude-notes.md"], None),
    (["python3", "claude-notes.py"], None),
    (["python3", "-c", "import claude"], None),
    (["-zsh"], None),
    (["agent"], None),
    (["cn"], None),
    (["/Applications/CursorUIViewService"], None),
    (["grep", "-r", "codex", "."], None),
    ([], None),
])
def test_classify_by_program_or_package_not_substrings(argv, agent):
    assert procs.classify(argv) == agent


@pytest.mark.parametrize("argv, is_mcp", [
    (["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"], True),
    (["uvx", "mcp-server-git"], True),
    (["node", "/x/github-mcp/index.js"], True),
    (["cargo", "test", "-p", "fluxgit-mcp-sidecar"], False),
    (["pytest", "-q", "tests/test_mcp.py"], False),
])
def test_mcp_servers_recognised_by_program(argv, is_mcp):
    assert procs.looks_like_mcp_server(argv) is is_mcp


def test_parse_stat_survives_odd_command_names():
    text = "4242 (my (weird) name) S 17 4242 4242 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0"
    assert procinfo.parse_stat(text) == (17, 98765)


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def test_live_agent_process_and_its_fresh_child_are_found_decoy_is_not(tmp_path: Path):
    repo = init_repo(tmp_path / "fleet" / "repo")
    other = init_repo(tmp_path / "fleet" / "other")
    (repo / "sub").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # An "agent" named claude (python with argv[0] set) working in repo/sub, running a child command there.
    child_code = "import subprocess, sys; subprocess.run(['sleep', '30']); sys.exit(0)"
    agent = subprocess.Popen(["claude", "-c", child_code], executable=sys.executable, cwd=repo / "sub")
    # Decoys: an editor on a file named after an agent, and a quiet agent in another repo with no children.
    decoy = subprocess.Popen(["vim", "-c", "import time; time.sleep(30)", "claude-notes.md"],
                             executable=sys.executable, cwd=repo)
    codex_bin = bin_dir / "codex"
    codex_bin.symlink_to("/bin/sleep")
    quiet = subprocess.Popen([str(codex_bin), "30"], cwd=other)
    try:
        def found():
            hits = procs.detect([str(repo), str(other)], time.time(), tmp_path, {})
            return hits if any(s.busy for s in hits) and len(hits) >= 3 else None

        hits = _wait_for(found)
        assert hits, procs.detect([str(repo), str(other)], time.time(), tmp_path, {})
        mine = [s for s in hits if s.pid in (agent.pid, decoy.pid, quiet.pid)]
        assert {(s.agent, s.repo, s.pid, s.busy) for s in mine} == {
            ("claude-code", str(repo), agent.pid, False),     # the agent itself: alive
            ("claude-code", str(repo), agent.pid, True),      # its freshly started `sleep`: working
            ("codex", str(other), quiet.pid, False),
        }
        assert all(s.alive and s.source == "process" for s in mine)
        assert procs.detect([str(tmp_path / "unrelated")], time.time(), tmp_path, {}) == []
    finally:
        for proc in (agent, decoy, quiet):
            proc.kill()
            proc.wait()
