"""Presence the agents declare themselves: fleetdeck's MCP bridge records each client's name and the repos
its tool calls touched. No inference involved, so it is the most trustworthy source; the name is still
self-declared, so it is mapped to a known agent id by its whole leading token (`codex-mcp-client` → codex,
`codexample` stays itself) and otherwise sanitised.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Iterable

from fleet.errors import FleetError
from fleet.timespec import iso
from fleet.presence.model import DEFAULT_THRESHOLDS, MAX_FILES, RepoMap, Sighting, Thresholds, relative_files
from fleet.presence.store import read_agent_rows, upsert_row

ALIASES = {
    "claude": "claude-code", "claude-code": "claude-code", "codex": "codex", "gemini": "gemini",
    "qwen": "qwen", "copilot": "copilot", "github-copilot": "copilot", "opencode": "opencode", "kilo": "kilo",
    "goose": "goose", "cline": "cline", "continue": "continue", "amp": "amp", "cursor": "cursor",
    "cursor-agent": "cursor-agent", "windsurf": "windsurf", "vscode": "vscode", "visual-studio-code": "vscode",
    "aider": "aider", "crush": "crush", "zed": "zed",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def agent_id(client_name: str | None) -> str:
    """A stable agent id from an MCP client's self-declared name."""
    name = _CONTROL.sub("", (client_name or "").strip().lower())
    if name in ALIASES:
        return ALIASES[name]
    lead = re.split(r"[^a-z0-9]+", name, maxsplit=1)[0]
    if lead in ALIASES:
        return ALIASES[lead]
    clean = re.sub(r"[^a-z0-9._-]+", "-", name).strip("-")[:32]
    return clean or "unknown"


def _clean_tool(tool: str | None) -> str | None:
    return _CONTROL.sub("", tool or "")[:64] or None


def _clean_version(version: str | None) -> str | None:
    return _CONTROL.sub("", version or "").strip()[:64] or None


def mcp_sessions(index, now: float | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[dict]:
    """The MCP client sessions seen within the recent window: `{agent, repo, session, client_version,
    client_pid, tool, at}`, newest first (read only; `sightings` ages old ones out)."""
    now = time.time() if now is None else now
    rows = index.presence.mcp_since(now - thresholds.recent)
    return [{"agent": a, "repo": r, "session": s, "client_version": v, "client_pid": p, "tool": t, "at": at}
            for a, r, s, v, p, t, at in rows]


FLEET_WIDE = ""  # the `repo` of a call that named no repository (fleet.radar, fleet.search, operation.status)


def _record_fleet_wide(index, agent_name: str | None, tool: str | None, now: float, session: str,
                       client_version: str | None, client_pid: int | None, authenticated: bool) -> dict:
    """An MCP client that used only fleet-wide tools is still an agent at work: one record (repo "") that
    no repo's presence row reads, and that the agents page lists (`fleet_wide_agents`)."""
    agent = agent_name if authenticated and agent_name else agent_id(agent_name)
    row = {"agent": agent, "repo": FLEET_WIDE, "session": session, "tool": _clean_tool(tool), "at": now}
    with index.write():
        index.presence.put_mcp(agent, FLEET_WIDE, session, row["tool"], "[]", now, _clean_version(client_version),
                               client_pid)
    return row


def fleet_wide_agents(index, now: float | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[dict]:
    """The MCP clients seen within the recent window that called fleet-wide tools, newest first, one per
    agent: `{agent, tool, last_activity, in_repos}` (`in_repos`: it also worked in some repo)."""
    now = time.time() if now is None else now
    rows = index.presence.mcp_agents_since(now - thresholds.recent)
    in_repos = {agent for agent, _at, repo in rows if repo != FLEET_WIDE}
    out = []
    for agent, at, repo in sorted(rows, key=lambda r: -r[1]):
        if repo == FLEET_WIDE:
            tool = index.presence.mcp_last_fleet_tool(agent)
            out.append({"agent": agent, "tool": tool, "last_activity": iso(at), "in_repos": agent in in_repos})
    return out


def record_bridge_activity(index, agent_name: str | None, repo_path: str, tool: str | None,
                           files: Iterable[str] = (), *, now: float | None = None, session: str = "",
                           client_version: str | None = None, client_pid: int | None = None,
                           authenticated: bool = False) -> dict:
    """Record that an MCP client called `tool` on `repo_path` (touching `files`) and return its presence row.

    The evidence goes to `presence_mcp`, one record per client `session` (kept across refreshes) with the
    client's self-declared version and, on stdio, its pid; the (agent, repo) presence row is updated at
    once to `working`, so the dashboard shows the caller without waiting for the next refresh. An
    `authenticated` caller's `agent_name` is its credential's name, recorded as it is (no alias mapping). Raises
    FleetError(REPO_NOT_IN_FLEET) when the path is in no indexed repo.
    """
    now = time.time() if now is None else now
    if repo_path == FLEET_WIDE:
        return _record_fleet_wide(index, agent_name, tool, now, session, client_version, client_pid, authenticated)
    records = index.summaries()
    repo = RepoMap([r["path"] for r in records]).find(os.path.abspath(repo_path) if repo_path else None)
    if repo is None:
        raise FleetError("REPO_NOT_IN_FLEET", f"not inside an indexed repo: {repo_path!r}")
    record = next(r for r in records if r["path"] == repo)
    agent, tool = (agent_name if authenticated and agent_name else agent_id(agent_name)), _clean_tool(tool)
    touched = list(relative_files(repo, repo, files))
    with index.write():
        kept = [f for f in _json_list(index.presence.mcp_files(agent, repo, session)) if f not in touched]
        index.presence.put_mcp(agent, repo, session, tool, json.dumps((touched + kept)[:MAX_FILES]), now,
                               _clean_version(client_version), client_pid)
        row = _row_for(read_agent_rows(index, agent, repo), f"mcp:{session}") or {
            "agent": agent, "repo": repo, "session": f"mcp:{session}", "sources": [], "files": [], "pids": [],
            "pid": None, "branch": None}
        row.update({
            "repo_id": record.get("id"), "repo_name": record.get("name"), "state": "working",
            "sources": sorted(set(row["sources"]) | {"mcp"}), "tool": tool or row.get("tool"),
            "files": (touched + [f for f in row["files"] if f not in touched])[:MAX_FILES],
            "branch": row.get("branch") or record.get("branch"), "last_activity": iso(now),
            "refreshed_at": iso(now),
        })
        upsert_row(index, row)
    return row


def _row_for(rows: list[dict], session: str) -> dict | None:
    """The presence row an MCP call updates: the newest of the agent's own sessions there (its hooks or
    session files name them), else this MCP session's row (fleet.presence.merge folds them the same way)."""
    own = [r for r in rows if r["session"] and not r["session"].startswith("mcp:")]
    return own[0] if own else next((r for r in rows if r["session"] == session), None)


def sightings(index, repos: list[str], now: float, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Sighting]:
    """What the bridge recorded within the recent window, as sightings; older evidence is deleted."""
    cutoff = now - thresholds.recent
    rows = index.presence.mcp_sweep(cutoff)
    known = RepoMap.of(repos)
    return [Sighting(agent=agent, repo=repo, source="mcp", last_activity=min(at, now), tool=tool,
                     files=tuple(_json_list(files)), session=f"mcp:{session}")
            for agent, repo, session, tool, files, at in rows if known.find(repo) == repo]


def _json_list(text: str | None) -> list[str]:
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
