"""Hook payloads not in Claude Code's shape, put into it for the rest of the hook (presence, the guard).

GitHub Copilot CLI's native events (`sessionStart`, `preToolUse`, …; GitHub's hooks reference) carry
`sessionId`, `toolName` and `toolArgs` (a JSON string, or an object) and name their event only for
`notification`: the installed command passes it (`--event`). Goose's (its hooks guide, the Open Plugins
hooks spec) carry `event`, `session_id`, and a `working_dir` on tool events only. Only what presence and the
guard read is kept — a prompt, a notification's message, a tool's result, an answer never get past here.
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


NORMALIZE: dict[str, Callable[[str | None, dict], dict]] = {"copilot-cli": copilot, "goose": goose}
