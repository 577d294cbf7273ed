"""`fleetdeck hooks install|uninstall|status`: fleetdeck's entries in each agent's own hook settings.

Installing merges one entry per event into the agent's settings file and touches nothing else there;
uninstalling removes exactly those entries, and when the file is otherwise as it was, puts back its very
bytes. What was there before is kept in `installed-hooks.json` beside the index. Agents whose hook system is
documented are in AGENTS (a settings file) and FOLDERS (an executable per event: Cline, fleet/agenthooks/folder.py);
the rest are listed in UNSUPPORTED with the reason.

Two layouts: Claude Code, Codex, Gemini CLI, Qwen Code and Goose group entries under a matcher (`{event: [{matcher,
hooks: [entry]}]}`); GitHub Copilot CLI lists entries per event with the matcher inside each (`{version: 1,
hooks: {event: [entry]}}`), reads every `*.json` of its user hooks folder (fleetdeck's own file there is
`fleetdeck.json`), and does not name the event in its camelCase payloads, so its command carries the event.
Goose loads hooks only from plugins: fleetdeck's is `~/.agents/plugins/fleetdeck/` (a manifest beside).
Cursor's `~/.cursor/hooks.json` is flat too (`{version: 1, hooks: {event: [entry]}}`); fleetdeck registers only
events whose answer cannot approve or deny anything (the prompt, after a command or an edit, the turn's end).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from fleet.agenthooks import folder
from fleet.errors import FleetError
from fleet.fsio import replace_file
from fleet.xdg import env_dir

MAX_SETTINGS_BYTES = 4 * 1024 * 1024
MARK = "fleet.agenthooks"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


@dataclass(frozen=True)
class AgentHooks:
    """Where an agent keeps its hooks and how fleetdeck's entry looks there."""

    name: str
    settings: Callable[[Mapping[str, str]], Path]
    events: dict[str, str | None]       # event -> matcher (the tools, or notification types), None: every one
    timeout: int | None                 # in the agent's own unit (None: the agent's default)
    named: bool = False                 # the agent's entries carry a `name`
    note: str = ""
    flat: bool = False                  # entries straight under the event, the matcher inside each (Copilot CLI)
    command_key: str = "command"        # the entry's field holding the shell command
    timeout_key: str = "timeout"
    base: tuple[tuple[str, object], ...] = ()   # top-level keys a file fleetdeck creates starts with
    event_arg: bool = False             # the payload does not name its event: the command line does
    companion: tuple[str, dict] | None = None   # a file beside the settings that makes them load (Goose's plugin
                                                # manifest), made with the settings and gone with them

    def entry(self, command: str) -> dict:
        entry = {"type": "command", self.command_key: command}
        if self.timeout is not None:
            entry[self.timeout_key] = self.timeout
        if self.named:
            entry["name"] = "fleetdeck"
        return entry

    def groups(self, event: str, command: str) -> list[dict]:
        """What install adds under `event`: one entry (flat) or one matcher group holding it."""
        matcher = self.events[event]
        if self.flat:
            return [{**self.entry(command), **({"matcher": matcher} if matcher else {})}]
        return [{**({"matcher": matcher} if matcher else {}), "hooks": [self.entry(command)]}]


AGENTS: dict[str, AgentHooks] = {
    "claude-code": AgentHooks(
        "claude-code",
        lambda env: Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json" if env.get("CLAUDE_CONFIG_DIR")
        else _home(env) / ".claude" / "settings.json",
        {"PreToolUse": "Bash|Edit|Write|MultiEdit|NotebookEdit|AskUserQuestion", "UserPromptSubmit": None,
         "Notification": "permission_prompt|idle_prompt|elicitation_dialog", "PermissionRequest": None,
         "Stop": None, "SessionStart": None, "SessionEnd": None}, 10),
    "gemini-cli": AgentHooks(
        "gemini-cli", lambda env: _home(env) / ".gemini" / "settings.json",
        {"BeforeTool": "run_shell_command|write_file|replace", "BeforeAgent": None, "Notification": None,
         "AfterAgent": None, "SessionStart": None, "SessionEnd": None}, 10_000, named=True,
        note="Gemini CLI has no `ask` answer: with guard = \"ask\" a destructive command is denied with the reason"),
    "codex": AgentHooks(
        "codex",
        lambda env: Path(env["CODEX_HOME"]) / "hooks.json" if env.get("CODEX_HOME")
        else _home(env) / ".codex" / "hooks.json",
        {"PreToolUse": "Bash|apply_patch", "UserPromptSubmit": None, "PermissionRequest": None, "Stop": None,
         "SessionStart": None}, 10,
        note="Codex before 0.124 reads hooks.json only with `[features] codex_hooks = true` in config.toml; "
             "with guard = \"ask\" a destructive command is denied with the reason"),
    "copilot-cli": AgentHooks(
        "copilot-cli",
        lambda env: env_dir("COPILOT_HOME", ".copilot", env, _home(env)) / "hooks" / "fleetdeck.json",
        {"preToolUse": "bash|create|edit|ask_user", "postToolUse": "bash|create|edit|web_fetch|ask_user",
         "userPromptSubmitted": None, "notification": "permission_prompt|elicitation_dialog", "agentStop": None,
         "sessionStart": None, "sessionEnd": None}, 10, flat=True, command_key="bash", timeout_key="timeoutSec",
        base=(("version", 1),), event_arg=True),
    "goose": AgentHooks(
        "goose", lambda env: _home(env) / ".agents" / "plugins" / "fleetdeck" / "hooks" / "hooks.json",
        {"PreToolUse": "^(developer__shell|developer__write|developer__edit)$", "UserPromptSubmit": None,
         "Stop": None, "SessionStart": None, "SessionEnd": None}, 10,
        companion=("../plugin.json", {"name": "fleetdeck", "version": "1.0.0",
                                      "description": "fleetdeck: a snapshot before goose changes files, and goose's "
                                                     "presence (fleetdeck hooks uninstall goose removes it)"}),
        note="Goose has no `ask` answer: with guard = \"ask\" a destructive command is blocked with the reason; "
             "its permission prompts have no hook, so it shows waiting only when its turn ended"),
    "qwen-code": AgentHooks(
        "qwen-code",
        lambda env: env_dir("QWEN_HOME", ".qwen", env, _home(env)) / "settings.json",
        {"PreToolUse": "run_shell_command|write_file|edit", "UserPromptSubmit": None,
         "Notification": "permission_prompt|idle_prompt", "PermissionRequest": None, "Stop": None,
         "SessionStart": None, "SessionEnd": None}, 10_000, named=True),
    "cursor": AgentHooks(
        "cursor", lambda env: _home(env) / ".cursor" / "hooks.json",
        {"beforeSubmitPrompt": None, "afterShellExecution": None, "afterMCPExecution": None, "afterFileEdit": None,
         "stop": None}, None, flat=True, base=(("version", 1),),
        note="fleetdeck answers none of Cursor's permission events (what an answer without `permission` does to "
             "Cursor's own approval is not documented): no snapshot before Cursor's commands, and Cursor's approval "
             "prompts have no hook, so it shows waiting only when its turn ended"),
}

FOLDERS: dict[str, folder.FolderHooks] = {
    "cline": folder.FolderHooks(
        "cline", lambda env: _home(env) / "Documents" / "Cline" / "Hooks",
        ("TaskStart", "TaskResume", "UserPromptSubmit", "PreToolUse", "PostToolUse", "TaskComplete", "TaskCancel"),
        note="Cline has no `ask` answer: with guard = \"ask\" a destructive command is cancelled with the reason; "
             "its approval prompts have no hook, so it shows waiting on a question or when its task finished",
        unconfirmed="Cline runs these only while its Enable Hooks setting is on (Cline's settings, Features; the "
                    "CLI: `cline config set hooks-enabled=true`), which fleetdeck cannot read"),
}
NAMES = (*AGENTS, *FOLDERS)

UNSUPPORTED = {
    "aider": "no hook system (its --lint-cmd/--test-cmd run after edits, not before a command)",
    "opencode": "extended by JavaScript plugins, not command hooks",
    "amp": "no documented command hooks",
}


def hook_command(agent: str, db: str | None, event: str | None = None) -> str:
    """The command an agent runs: this Python and fleetdeck's light hook entry point (and the event, for an
    agent whose payload does not name it)."""
    words = [sys.executable, "-m", MARK, agent]
    if event:
        words += ["--event", event]
    if db:
        words += ["--db", os.path.abspath(db)]
    return " ".join(shlex.quote(w) for w in words)


def _agent(name: str) -> AgentHooks:
    if name in AGENTS:
        return AGENTS[name]
    if name in UNSUPPORTED:
        raise FleetError("BAD_ARGUMENT", f"{name} is not supported: {UNSUPPORTED[name]}")
    raise FleetError("BAD_ARGUMENT", f"unknown agent {name!r} (supported: {', '.join(NAMES)})")


def _read(path: Path) -> tuple[bytes | None, dict]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise FleetError("BAD_ARGUMENT", f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_SETTINGS_BYTES:
        raise FleetError("LIMIT", f"{path} is larger than {MAX_SETTINGS_BYTES} bytes")
    try:
        value = json.loads(data.decode("utf-8")) if data.strip() else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise FleetError("BAD_ARGUMENT", f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(value, dict) or not isinstance(value.get("hooks", {}), dict):
        raise FleetError("BAD_ARGUMENT", f"{path}: expected a JSON object with an object `hooks`; nothing changed")
    return data, value


def _write(path: Path, data: bytes) -> None:
    """`data` in place of the file at `path`, atomically; a settings file that is a link (a dotfiles
    repository's) stays one: the file it names is the one replaced."""
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, data, os.stat(path).st_mode & 0o777 if path.exists() else 0o600)


def _ours(entry: object, spec: AgentHooks) -> bool:
    return isinstance(entry, dict) and MARK in str(entry.get(spec.command_key, ""))


def _entries(groups: object, spec: AgentHooks) -> list:
    """The hook entries of one event's list (inside its matcher groups, or the list itself when flat)."""
    if not isinstance(groups, list):
        return []
    if spec.flat:
        return groups
    return [h for group in groups if isinstance(group, dict) and isinstance(group.get("hooks"), list)
            for h in group["hooks"]]


def _present(value: dict, spec: AgentHooks) -> list[str]:
    """The events where fleetdeck's entry is present."""
    hooks = value.get("hooks") or {}
    return [event for event in spec.events if any(_ours(h, spec) for h in _entries(hooks.get(event), spec))]


def _without_ours(groups: list, spec: AgentHooks) -> list:
    """One event's list with fleetdeck's entries taken out (a matcher group left empty goes too)."""
    if not isinstance(groups, list):
        return groups
    if spec.flat:
        return [h for h in groups if not _ours(h, spec)]
    kept = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            group = {**group, "hooks": [h for h in group["hooks"] if not _ours(h, spec)]}
            if not group["hooks"]:
                continue
        kept.append(group)
    return kept


def _state_path(db_path: str | os.PathLike[str]) -> Path:
    return Path(db_path).parent / "installed-hooks.json"


def _state(db_path: str | os.PathLike[str]) -> dict:
    try:
        return json.loads(_state_path(db_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _save_state(db_path: str | os.PathLike[str], state: dict) -> None:
    _write(_state_path(db_path), json.dumps(state, indent=2, sort_keys=True).encode())


def install(agent: str, db_path: str | os.PathLike[str], db_option: str | None,
            env: Mapping[str, str] | None = None) -> dict:
    env = os.environ if env is None else env
    if agent in FOLDERS:
        state = _state(db_path)
        done = folder.install(FOLDERS[agent], lambda event: hook_command(agent, db_option, event), state, env)
        if done["changed"]:
            _save_state(db_path, state)
        return done
    spec = _agent(agent)
    path = spec.settings(env)
    original, value = _read(path)
    present = _present(value, spec)
    missing = [event for event in spec.events if event not in present]
    if not missing:
        return {"agent": agent, "settings": str(path), "installed": True, "changed": False, "note": spec.note}
    if original is None:
        value = dict(spec.base)
    hooks = value.setdefault("hooks", {})
    for event in missing:               # an older install (PreToolUse only) gains the events it lacks
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise FleetError("BAD_ARGUMENT", f"{path}: hooks.{event} is not a list; nothing was changed")
        groups += spec.groups(event, hook_command(agent, db_option, event if spec.event_arg else None))
    state = _state(db_path)
    if not present:                     # what was there before fleetdeck's first entry
        state[str(path)] = {"agent": agent, "original": None if original is None else original.decode("utf-8")}
        companion = _companion(spec, path)
        if companion is not None and not companion.exists():
            _write(companion, _companion_bytes(spec))
            state[str(path)]["companion"] = str(companion)
    _save_state(db_path, state)
    _write(path, (json.dumps(value, indent=2) + "\n").encode("utf-8"))
    return {"agent": agent, "settings": str(path), "installed": True, "changed": True, "note": spec.note}


def _companion(spec: AgentHooks, path: Path) -> Path | None:
    return Path(os.path.normpath(path.parent / spec.companion[0])) if spec.companion else None


def _companion_bytes(spec: AgentHooks) -> bytes:
    return (json.dumps(spec.companion[1], indent=2) + "\n").encode("utf-8") if spec.companion else b""


def _remove_companion(spec: AgentHooks, path: Path, saved: dict) -> None:
    """The companion file install made, unless the person changed it; then the folders it left empty."""
    made = saved.get("companion")
    if not made:
        return
    companion = Path(made)
    try:
        if companion.read_bytes() == _companion_bytes(spec):
            companion.unlink()
    except OSError:
        pass
    for folder in (path.parent, companion.parent):
        try:
            folder.rmdir()
        except OSError:
            pass                        # not empty: something else lives there


def uninstall(agent: str, db_path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> dict:
    env = os.environ if env is None else env
    if agent in FOLDERS:
        state = _state(db_path)
        recorded = str(FOLDERS[agent].folder(env)) in state
        done = folder.uninstall(FOLDERS[agent], state, env)
        if recorded:
            _save_state(db_path, state)
        return done
    spec = _agent(agent)
    path = spec.settings(env)
    _, value = _read(path)
    if not _present(value, spec):
        return {"agent": agent, "settings": str(path), "installed": False, "changed": False}
    hooks = value.get("hooks", {})
    for event in spec.events:
        hooks[event] = _without_ours(hooks.get(event) or [], spec)
    state = _state(db_path)
    saved = state.pop(str(path), None)
    original = saved.get("original") if saved else None
    before = json.loads(original) if original and original.strip() else {}
    for event in spec.events:               # drop what fleetdeck made empty, keep what was there before
        if not hooks.get(event) and event not in (before.get("hooks") or {}):
            hooks.pop(event, None)
    if not hooks and "hooks" not in before:
        value.pop("hooks", None)
    if saved is not None and original is None and value == dict(spec.base):
        value = {}                          # the file fleetdeck created, with only what it started with
    if saved is not None and value == before:
        if original is None:
            path.unlink()
        else:
            _write(path, original.encode("utf-8"))
    else:
        _write(path, (json.dumps(value, indent=2) + "\n").encode("utf-8"))
    if saved is not None and not path.exists():
        _remove_companion(spec, path, saved)
    _save_state(db_path, state)
    return {"agent": agent, "settings": str(path), "installed": False, "changed": True}


def status(db_path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> dict:
    env = os.environ if env is None else env
    agents = []
    for name, spec in AGENTS.items():
        path = spec.settings(env)
        try:
            events = _present(_read(path)[1], spec)
            problem = None
        except FleetError as exc:
            events, problem = [], exc.message
        agents.append({"agent": name, "settings": str(path), "installed": bool(events), "events": events,
                       "note": spec.note or None, "problem": problem})
    agents += [folder.status(spec, env) for spec in FOLDERS.values()]
    return {"agents": agents, "unsupported": [{"agent": k, "why": v} for k, v in UNSUPPORTED.items()]}
