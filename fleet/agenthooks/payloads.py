"""Hook payloads not in Claude Code's shape, put into it for the rest of the hook (presence, the guard).

GitHub Copilot CLI's native events (`sessionStart`, `preToolUse`, …; GitHub's hooks reference) carry
`sessionId`, `toolName` and `toolArgs` (a JSON string, or an object) and name their event only for
`notification`: the installed command passes it (`--event`). Goose's (its hooks guide, the Open Plugins
hooks spec) carry `event`, `session_id`, and a `working_dir` on tool events only. Cursor's (its hooks docs) carry
`hook_event_name`, `conversation_id` and `workspace_roots`, and a `cwd` or `file_path` on some events; its `stop`
says how the turn ended (`status`: completed, aborted, error). Cline's (its hook reference) carry `taskId`,
`workspaceRoots` and the event's own object (`preToolUse: {toolName, parameters}` …); the Cline SDK names its
events `tool_call`, `agent_end` … in `hookName`, so the installed file passes the event it is named after. Only
what presence and the guard read is kept — a prompt, a notification's message, a tool's result, an answer, a
file's edits never get past here.
"""

from __future__ import annotations

import json
from typing import Callable

COPILOT_EVENTS = {"sessionStart": "SessionStart", "sessionEnd": "SessionEnd",
                  "userPromptSubmitted": "UserPromptSubmit", "preToolUse": "PreToolUse",
                  "postToolUse": "PostToolUse", "agentStop": "Stop", "notification": "Notification"}
MAX_ARGS = 256 * 1024


def _tool_input(args: object) -> dict | None:
    if isinstance(args, str) and len(args) <= MAX_ARGS:
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return args if isinstance(args, dict) else None


def _tool(out: dict, name: object, args: object) -> dict:
    if isinstance(name, str):
        out["tool_name"] = name
        tool_input = _tool_input(args)
        if tool_input is not None:
            out["tool_input"] = tool_input
    return out


def copilot(event: str | None, payload: dict) -> dict:
    """One Copilot CLI hook call (`hook_event_name` from `event`, the command line's)."""
    out: dict = {"hook_event_name": COPILOT_EVENTS.get(event or "", event), "session_id": payload.get("sessionId"),
                 "cwd": payload.get("cwd")}
    if isinstance(payload.get("notification_type"), str):
        out["notification_type"] = payload["notification_type"]
    return _tool(out, payload.get("toolName"), payload.get("toolArgs"))


def goose(event: str | None, payload: dict) -> dict:
    """One Goose hook call (its own `event`; no folder outside tool events: presence looks the session up)."""
    del event
    out: dict = {"hook_event_name": payload.get("event"), "session_id": payload.get("session_id"),
                 "cwd": payload.get("working_dir")}
    return _tool(out, payload.get("tool_name"), payload.get("tool_input"))


CURSOR_EVENTS = {"beforeSubmitPrompt": "UserPromptSubmit", "afterShellExecution": "PostToolUse",
                 "afterMCPExecution": "PostToolUse", "afterFileEdit": "PostToolUse", "stop": "Stop"}
CURSOR_TOOLS = {"afterShellExecution": "Shell", "afterFileEdit": "Edit"}


def _roots(value: object) -> list[str]:
    return [r for r in value if isinstance(r, str)][:32] if isinstance(value, list) else []


def _abs(value: object) -> str | None:
    return value if isinstance(value, str) and value.startswith("/") else None


def cursor(event: str | None, payload: dict) -> dict:
    """One Cursor hook call. A `stop` the person aborted is not a wait (`Aborted`); a command's or an edit's
    folder names the repository, else the workspace roots do (presence: fleet/presence/hooks.py)."""
    name = payload.get("hook_event_name") or event
    out: dict = {"hook_event_name": CURSOR_EVENTS.get(name, name), "session_id": payload.get("conversation_id"),
                 "cwd": _abs(payload.get("cwd")) or _abs(payload.get("file_path")),
                 "workspace_roots": _roots(payload.get("workspace_roots"))}
    if name == "stop" and payload.get("status") == "aborted":
        out["hook_event_name"] = "Aborted"
    tool = CURSOR_TOOLS.get(name) or (payload.get("tool_name") if name == "afterMCPExecution" else None)
    if isinstance(tool, str):
        out["tool_name"] = tool
    return out


CLINE_SDK_EVENTS = {"agent_start": "TaskStart", "agent_resume": "TaskResume", "agent_abort": "TaskCancel",
                    "agent_end": "TaskComplete", "tool_call": "PreToolUse", "tool_result": "PostToolUse",
                    "prompt_submit": "UserPromptSubmit"}


def _cline_command(parameters: object) -> dict | None:
    """The shell command of Cline's `execute_command` (`command`) or the SDK's `run_commands` (`commands`,
    a JSON list as a string): all the guard reads of a tool's parameters."""
    if not isinstance(parameters, dict):
        return None
    command = parameters.get("command")
    if isinstance(command, str):
        return {"command": command}
    commands = parameters.get("commands")
    if isinstance(commands, str) and len(commands) <= MAX_ARGS:
        try:
            commands = json.loads(commands)
        except ValueError:
            return None
    if isinstance(commands, list) and commands and all(isinstance(c, str) for c in commands):
        return {"command": "\n".join(commands)}
    return None


def cline(event: str | None, payload: dict) -> dict:
    """One Cline hook call (the event from the command line: the file's name; else the payload's)."""
    name = event or payload.get("hookName")
    name = CLINE_SDK_EVENTS.get(name, name)
    out: dict = {"hook_event_name": name, "session_id": payload.get("taskId"), "cwd": None,
                 "workspace_roots": _roots(payload.get("workspaceRoots"))}
    data = payload.get({"PreToolUse": "preToolUse", "PostToolUse": "postToolUse"}.get(name, ""))
    if isinstance(data, dict) and isinstance(data.get("toolName"), str):
        out["tool_name"] = data["toolName"]
        command = _cline_command(data.get("parameters")) if name == "PreToolUse" else None
        if command is not None:
            out["tool_input"] = command
    return out


NORMALIZE: dict[str, Callable[[str | None, dict], dict]] = {"copilot-cli": copilot, "goose": goose, "cursor": cursor,
                                                            "cline": cline}
