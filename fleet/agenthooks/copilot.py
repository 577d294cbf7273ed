"""GitHub Copilot CLI's camelCase hook payloads in the shape the rest of the hook reads (Claude Code's).

Copilot's native events (`sessionStart`, `preToolUse`, …; GitHub's hooks reference) carry `sessionId`,
`toolName` and `toolArgs` (a JSON string, or an object), and name their event only for `notification`: the
installed command passes it (`--event`). Only what presence and the guard read is kept — the prompt, a
notification's message, a tool's result and an error's text never get past this function.
"""

from __future__ import annotations

import json

EVENTS = {"sessionStart": "SessionStart", "sessionEnd": "SessionEnd", "userPromptSubmitted": "UserPromptSubmit",
          "preToolUse": "PreToolUse", "postToolUse": "PostToolUse", "agentStop": "Stop",
          "notification": "Notification"}
MAX_ARGS = 256 * 1024


def _tool_input(args: object) -> dict | None:
    if isinstance(args, str) and len(args) <= MAX_ARGS:
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return args if isinstance(args, dict) else None


def normalize(event: str | None, payload: dict) -> dict:
    """The Claude-shaped payload of one Copilot CLI hook call (`hook_event_name` from `event`)."""
    out: dict = {"hook_event_name": EVENTS.get(event or "", event), "session_id": payload.get("sessionId"),
                 "cwd": payload.get("cwd")}
    if isinstance(payload.get("toolName"), str):
        out["tool_name"] = payload["toolName"]
        tool_input = _tool_input(payload.get("toolArgs"))
        if tool_input is not None:
            out["tool_input"] = tool_input
    if isinstance(payload.get("notification_type"), str):
        out["notification_type"] = payload["notification_type"]
    return out
