"""The demo fleet alive while `fleetdeck demo` runs: coding agents present in some repos, and git activity.

Agents are made the honest way: session files written where and as Claude Code and Codex write them (the
agents' homes are folders of the demo, named to this process by `CLAUDE_CONFIG_DIR` and `CODEX_HOME`), so
the real presence detectors find them; nothing is put in the index by hand. `tick(now)` refreshes them and
runs the git activity that is due; the demo calls it every `TICK` seconds, tests with the time they choose:

- claude-code is `working` in work/web-frontend (a transcript whose newest record is a running edit),
- codex is `recent` in oss/mobile-app (its rollout ended its turn a few minutes ago: it waits on its
  proposals),
- claude-code is `open` in oss/monorepo (a live status file for a stand-in process that sits in the repo).

The git activity (a commit, a teammates' push fetched, a rebase, more commits later) runs with the real
clock, spread over the demo's lifetime (`SCHEDULE`, then a commit every `EVERY`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from fleet.demo import DemoBuilder
from fleet.procinfo import process_start

log = logging.getLogger("fleetdeck.demo")

TICK = 30.0
RECENT_AGO = 6 * 60          # codex finished its turn this long ago (recent: within 15 minutes)
EVERY = 20 * 60              # after the schedule, one more commit in scratch this often
HOMES = {"CLAUDE_CONFIG_DIR": "claude", "CODEX_HOME": "codex"}


def agent_env(base: str | os.PathLike[str]) -> dict[str, str]:
    """The agents' homes inside the demo folder, as the variables the agents (and the detectors) read."""
    return {var: str(Path(base) / "agents" / name) for var, name in HOMES.items()}


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _write(path: Path, lines: list[dict], mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    os.utime(path, (mtime, mtime))


class DemoLife:
    """The demo's agents and activity; `close()` ends the stand-in process."""

    def __init__(self, target: str | os.PathLike[str], start: float | None = None) -> None:
        self.base = Path(target)
        self.fleet = self.base / "fleet"
        self.homes = {var: Path(path) for var, path in agent_env(self.base).items()}
        self.start = time.time() if start is None else start
        self.done: set[str] = set()
        self.session = str(uuid.uuid5(uuid.NAMESPACE_URL, str(self.base)))
        self.stand_in: subprocess.Popen | None = None

    # --- agents --------------------------------------------------------------------------------------------

    def _claude_working(self, now: float) -> None:
        repo = self.fleet / "work" / "web-frontend"
        folder = "".join(c if c.isalnum() else "-" for c in str(repo))
        common = {"cwd": str(repo), "sessionId": self.session, "version": "2.1.0", "gitBranch": "redesign",
                  "userType": "external", "isSidechain": False}
        lines = [
            {**common, "type": "user", "timestamp": stamp(now - 40), "uuid": "u1",
             "message": {"role": "user", "content": "finish the redesign rebase: fix part1.css"}},
            {**common, "type": "assistant", "timestamp": stamp(now), "uuid": "a1", "parentUuid": "u1",
             "message": {"role": "assistant", "stop_reason": "tool_use", "content": [
                 {"type": "tool_use", "id": "t1", "name": "Edit",
                  "input": {"file_path": str(repo / "styles" / "part1.css")}}]}},
        ]
        _write(self.homes["CLAUDE_CONFIG_DIR"] / "projects" / folder / f"{self.session}.jsonl", lines, now)

    def _codex_recent(self, now: float) -> None:
        repo = self.fleet / "oss" / "mobile-app"
        at = now - RECENT_AGO
        day = datetime.fromtimestamp(self.start, timezone.utc)
        name = f"rollout-{day:%Y-%m-%dT%H-%M-%S}-{self.session}.jsonl"
        patch = "*** Begin Patch\n*** Update File: package.json\n@@\n-{}\n+{\"name\": \"mobile\"}\n*** End Patch"
        lines = [
            {"timestamp": stamp(self.start), "type": "session_meta", "payload": {
                "id": self.session, "timestamp": stamp(self.start), "cwd": str(repo), "originator": "codex_cli_rs",
                "cli_version": "0.50.0", "git": {"branch": "main"}}},
            {"timestamp": stamp(at - 60), "type": "turn_context", "payload": {"cwd": str(repo)}},
            {"timestamp": stamp(at - 50), "type": "event_msg", "payload": {"type": "task_started"}},
            {"timestamp": stamp(at - 30), "type": "response_item", "payload": {
                "type": "custom_tool_call", "name": "apply_patch", "input": patch}},
            {"timestamp": stamp(at), "type": "event_msg", "payload": {"type": "task_complete"}},
        ]
        _write(self.homes["CODEX_HOME"] / "sessions" / f"{day:%Y/%m/%d}" / name, lines, at)

    def _claude_open(self, now: float) -> None:
        repo = self.fleet / "oss" / "monorepo"
        if self.stand_in is None or self.stand_in.poll() is not None:
            self.stand_in = subprocess.Popen(["sleep", "2147483647"], cwd=repo, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = self.stand_in.pid
        doc = {"pid": pid, "sessionId": f"{self.session}-open", "cwd": str(repo), "startedAt": int(self.start * 1000),
               "procStart": str(process_start(pid)), "version": "2.1.0", "kind": "interactive",
               "entrypoint": "cli", "status": "idle", "statusUpdatedAt": int(now * 1000),
               "updatedAt": int(now * 1000)}
        sessions = self.homes["CLAUDE_CONFIG_DIR"] / "sessions"
        for old in sessions.glob("*.json") if sessions.is_dir() else ():
            if old.stem != str(pid):
                old.unlink()
        _write(sessions / f"{pid}.json", [doc], now)

    # --- git activity ------------------------------------------------------------------------------------

    def _git(self, now: float) -> DemoBuilder:
        return DemoBuilder(self.base, now, now)

    def _commit(self, now: float) -> None:
        b = self._git(now)
        b.commit(self.fleet / "work" / "cli-tools", "version.go", "package main // --version\n", "cli: --version flag")

    def _fetch(self, now: float) -> None:
        b = self._git(now)
        seed = self.base / "seeds" / "infra"
        b.push_from(seed, [(f"lb-{int(now)}.tf", "resource \"lb\" {}\n", "add a load balancer")])
        b.git(self.fleet / "oss" / "infra", "fetch", "-q")

    def _rebase(self, now: float) -> None:
        b = self._git(now)
        seed, repo = self.base / "seeds" / "dotfiles", self.fleet / "oss" / "dotfiles"
        b.push_from(seed, [(".vimrc", "set number\n", "vim: line numbers")])
        b.commit(repo, ".zshrc", "export EDITOR=vim\n", "zsh: vim as the editor")
        b.git(repo, "fetch", "-q")
        b.git(repo, "rebase", "-q", "origin/main")

    def _scratch(self, now: float) -> None:
        b = self._git(now)
        repo = self.fleet / "oss" / "scratch"
        notes = repo / "notes.md"
        b.commit(repo, "notes.md", notes.read_text(encoding="utf-8") + f"- an idea at {stamp(now)[11:16]} UTC\n",
                 "more ideas")

    def tick(self, now: float | None = None) -> list[str]:
        """Refresh the agents' session files and run the activity that is due at `now`; the names done."""
        now = time.time() if now is None else now
        self._claude_working(now)
        self._codex_recent(now)
        self._claude_open(now)
        done = []
        for offset, name, action in SCHEDULE:
            if name not in self.done and now >= self.start + offset:
                action(self, now)
                self.done.add(name)
                done.append(name)
        more = sum(n.startswith("scratch-") for n in self.done)
        if now >= self.start + SCHEDULE[-1][0] + EVERY * (1 + more):  # one a tick: spread, never a burst
            self._scratch(now)
            self.done.add(f"scratch-{more + 1}")
            done.append(f"scratch-{more + 1}")
        return done

    def run(self, stop: threading.Event) -> None:
        """`tick` every TICK seconds until `stop` is set (a failed tick is logged; the next one tries again)."""
        while not stop.wait(TICK):
            try:
                self.tick()
            except Exception:  # a demo repo the person changed by hand must not end the demo
                log.warning("demo: activity step failed", exc_info=True)

    def close(self) -> None:
        if self.stand_in is not None and self.stand_in.poll() is None:
            self.stand_in.kill()
            self.stand_in.wait()


# (seconds after the demo started, name, what happens)
SCHEDULE: tuple[tuple[float, str, Callable[[DemoLife, float], None]], ...] = (
    (90, "commit", DemoLife._commit),
    (4 * 60, "fetch", DemoLife._fetch),
    (8 * 60, "rebase", DemoLife._rebase),
    (15 * 60, "scratch", DemoLife._scratch),
)
