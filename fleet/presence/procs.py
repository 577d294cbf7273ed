"""The process table: agent processes whose cwd is in a fleet repo, and the commands they are running.

Agents are recognised by program basename or package path, looking through launchers (`node cli.js`,
`npx @openai/codex`, `python -m aider`), never by substring: `vim claude-notes.md` is not Claude. A
non-agent process is attributed to its nearest agent ancestor (≤ 16 levels); if it started recently and is
not a long-lived stdio MCP server, the agent is busy running it (a build, a test, a shell command).
Linux `/proc` only; elsewhere this detector finds nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from fleet.presence.model import DEFAULT_THRESHOLDS, RepoMap, Sighting
from fleet.procinfo import Proc, boot_time, process_table

MAX_ANCESTRY = 16

AGENT_BINARIES = {
    "claude": "claude-code", "codex": "codex", "opencode": "opencode", "gemini": "gemini",
    "aider": "aider", "kilo": "kilo", "kilocode": "kilo", "cline": "cline", "amp": "amp", "goose": "goose",
    "copilot": "copilot", "qwen": "qwen", "crush": "crush", "cursor-agent": "cursor-agent",
}
PACKAGES = {
    "@anthropic-ai/claude-code": "claude-code", "@openai/codex": "codex", "opencode-ai": "opencode",
    "@google/gemini-cli": "gemini", "aider-chat": "aider", "@kilocode/cli": "kilo",
    "@continuedev/cli": "continue", "@sourcegraph/amp": "amp", "@github/copilot": "copilot",
    "@qwen-code/qwen-code": "qwen",
}
# Install paths that name the agent when the binary itself does not (native Claude is `versions/<v>`,
# Cursor's CLI is a bare `agent`).
PATH_MARKERS = tuple(
    [(f"/node_modules/{pkg}/", agent) for pkg, agent in PACKAGES.items()]
    + [("/site-packages/aider/", "aider"), ("/claude/versions/", "claude-code"),
       ("/cursor-agent/versions/", "cursor-agent")]
)
LAUNCHERS = {"node", "nodejs", "bun", "bunx", "deno", "npx", "pnpx", "pnpm", "yarn", "uv", "uvx", "pipx",
             "env", "python", "python3", "pypy3"}
_SUBCOMMANDS = {"run", "exec", "x", "dlx", "tool"}
_PYTHON = re.compile(r"^python3(\.\d+)?$")


def _base(arg: str) -> str:
    name = arg.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name[:-4] if name.endswith(".exe") else name


def _agent_of(arg: str) -> str | None:
    path = arg.replace("\\", "/")
    for marker, agent in PATH_MARKERS:
        if marker in path:
            return agent
    bare = arg.split("@", 2)
    package = "@" + bare[1] if arg.startswith("@") and len(bare) > 1 else bare[0]
    if package in PACKAGES:
        return PACKAGES[package]
    return AGENT_BINARIES.get(_base(arg))


def _is_launcher(arg: str) -> bool:
    base = _base(arg)
    return base in LAUNCHERS or bool(_PYTHON.match(base))


def _target(argv: list[str]) -> str | None:
    """What a launcher runs: its script, module or package (`python -m aider` → `aider`), else None."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1]
        if arg in ("-c", "-e", "--eval", "-p", "--print"):
            return None                                  # inline code: nothing to name
        if arg.startswith("-"):
            i += 1
            continue
        if arg in _SUBCOMMANDS or _is_launcher(arg):
            i += 1
            continue
        return arg
    return None


def classify(argv: list[str]) -> str | None:
    """The agent id a command line belongs to, or None."""
    if not argv or not argv[0]:
        return None
    agent = _agent_of(argv[0])
    if agent:
        return agent
    if _is_launcher(argv[0]):
        target = _target(argv)
        if target:
            return _agent_of(target)
    return None


def looks_like_mcp_server(argv: list[str]) -> bool:
    """A stdio MCP server, judged by its program (or a launcher's target), never by other arguments."""
    if not argv:
        return False
    names = [argv[0]]
    if _is_launcher(argv[0]):
        target = _target(argv)
        if target:
            names.append(target)
    for name in names:
        if "modelcontextprotocol" in name.lower():
            return True
        if "mcp" in re.split(r"[^a-z0-9]+", name.lower()):
            return True
    return False


def _cwd(pid: int, proc_root: Path) -> str | None:
    try:
        return os.readlink(proc_root / str(pid) / "cwd")
    except OSError:
        return None


def detect(repos: list[str], now: float, home: Path, environ: Mapping[str, str], *,
           thresholds=DEFAULT_THRESHOLDS, proc_root: Path = Path("/proc")) -> list[Sighting]:
    """Agent processes (and their children) whose working directory is inside a fleet repo."""
    del home, environ  # the process table does not depend on them
    repo_map = RepoMap.of(repos)
    table = process_table(proc_root)
    agents = {pid: agent for pid, proc in table.items() if (agent := classify(proc.argv))}
    if not agents:
        return []
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    booted = boot_time(proc_root)

    def owner(pid: int) -> int | None:
        """The agent process `pid` belongs to: the top of a chain of same-agent processes above it."""
        found = None
        cur = table.get(pid)
        for _ in range(MAX_ANCESTRY + 1):
            if cur is None:
                break
            if cur.pid in agents:
                if found is None or agents[cur.pid] == agents[found]:
                    found = cur.pid
                else:
                    break
            elif found is not None:
                break
            cur = table.get(cur.ppid)
        return found

    sightings = []
    for pid, proc in table.items():
        top = owner(pid)
        if top is None:
            continue
        repo = repo_map.find(_cwd(pid, proc_root))
        if repo is None:
            continue
        busy = False
        if pid not in agents:
            started = booted + proc.start_ticks / tick
            busy = now - started <= thresholds.fresh_child and not looks_like_mcp_server(proc.argv)
        elif top != pid:
            continue                                   # a helper of the same agent, not another instance
        sightings.append(Sighting(agent=agents[top], repo=repo, source="process", pid=top, alive=True,
                                  busy=busy))
    return sightings
