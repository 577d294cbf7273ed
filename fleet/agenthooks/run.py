"""The hook command agents run (`python -m fleet.agenthooks AGENT`): before a tool call it snapshots the
repository at the hook's `cwd` and answers in the agent's own protocol; on every event it records the
session's presence (working, waiting on the person, ended: fleet/presence/hooks.py).

It never breaks the agent: whatever fails (no index, a folder outside the fleet, a broken repository, a
slow disk) prints one line to stderr and lets the tool call through, within DEADLINE seconds — the snapshot
runs on a thread that is abandoned at the deadline (a snapshot is only visible once whole). With
`[snapshots] guard = "ask"`, a command that would destroy uncommitted work gets the agent's "ask" answer
(or, where the agent has none, "deny" with the reason) naming what it would discard.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING

from fleet.index.store import default_db_path, open_index
from fleet.index.wake import ring
from fleet.presence.hooks import QUESTION_TOOLS, event_state, record_hook_event

if TYPE_CHECKING:
    from fleet.agenthooks.guard import Danger
    from fleet.snapshot.shadow import WorkTree

DEADLINE = 8.0
MAX_INPUT = 1024 * 1024
MAX_COMMAND = 500
ASKING = {"claude-code": "ask", "codex": "deny", "gemini-cli": "deny", "copilot-cli": "ask", "qwen-code": "ask",
          "goose": "block", "cline": "cancel"}
AGENTS = (*ASKING, "cursor")        # Cursor's hook is never asked before a tool call (fleet/agenthooks/install.py)
TOOL_EVENTS = ("PreToolUse", "BeforeTool")
# Agents whose hook fires before every tool (no matcher in their settings): the tools that change files
SNAPSHOT_TOOLS = {"cline": frozenset({"execute_command", "write_to_file", "replace_in_file", "run_commands", "editor",
                                      "apply_patch"})}


def _command_of(payload: dict) -> str | None:
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    command = tool_input.get("command")
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        import shlex

        command = shlex.join(command)
    return command if isinstance(command, str) else None


def _uncommitted(tree: WorkTree, db_path: Path, snapshot: dict, danger: Danger) -> int:
    """How many files differ from HEAD (under the folder an `rm -r` names), from the snapshot just taken."""
    from fleet.snapshot.compare import EMPTY_TREE, raw_diff
    from fleet.snapshot.shadow import store_for

    base = snapshot["head"] or EMPTY_TREE
    rel = os.path.relpath(danger.target, tree.path) if danger.target else "."
    paths = [] if rel == "." or rel.startswith("..") else [rel]
    return len(raw_diff(store_for(tree, db_path), base, snapshot["tree"], paths))


ALWAYS_ASKS = {"branch-delete": "deletes a branch's commits", "push-force": "rewrites the remote's history",
               "worktree-remove": "deletes a worktree with its uncommitted files",
               "stash-drop": "deletes stash entries (the snapshot keeps them)"}


def _always_asks(danger: Danger, snapshot: dict) -> str | None:
    """What a command destroys beyond this working tree's files (a stash drop only when there is a stash)."""
    if danger.kind == "stash-drop" and not snapshot["stash"]:
        return None
    return ALWAYS_ASKS.get(danger.kind)


def decide(agent: str, payload: dict, db_path: Path) -> tuple[str, str | None, dict | None]:
    """("allow" | "ask", the reason, the snapshot) for one hook call; FleetError and OSError propagate.
    The snapshot's modules load here: an event that only records presence starts none of them."""
    from fleet.agenthooks.guard import dangers
    from fleet.index.target import resolve_target
    from fleet.snapshot.config import snapshot_settings
    from fleet.snapshot.take import take
    from fleet.snapshot.timeline import work_tree_of

    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return "allow", None, None
    settings = snapshot_settings()
    if not settings["enabled"]:
        return "allow", None, None
    if not db_path.exists():
        raise FileNotFoundError(f"no fleetdeck index at {db_path}")
    with open_index(db_path) as index:
        found = resolve_target(index, cwd)
    tree = work_tree_of(found)
    command = _command_of(payload)
    snapshot = take(tree, db_path, f"hook:{agent}", agents=[agent],      # abandoned at DEADLINE: never thins
                    command=command[:MAX_COMMAND] if command else None, thin=False)
    if settings["guard"] != "ask" or not command:
        return "allow", None, snapshot
    found_dangers = dangers(command, cwd, tree.path)
    for danger in found_dangers:
        what = _always_asks(danger, snapshot)
        if what:
            return "ask", f"`{danger.text}` {what}; snapshot {snapshot['id'][:12]} taken", snapshot
        if danger.kind in ALWAYS_ASKS:
            continue            # a stash drop with no stash
        count = _uncommitted(tree, db_path, snapshot, danger)
        if count:
            return "ask", (f"`{danger.text}` would discard {count} uncommitted file{'s' if count != 1 else ''}; "
                           f"snapshot {snapshot['id'][:12]} taken (fleetdeck restore brings it back)"), snapshot
    return "allow", None, snapshot


def handle(agent: str, payload: dict, db_path: Path) -> tuple[str, str | None, dict | None]:
    """Record the session's presence, then (before a tool call that may change files) `decide`."""
    event = payload.get("hook_event_name", "PreToolUse")
    recorded = None
    if event_state(agent, payload) is not None and db_path.exists():    # (its cwd is judged there)
        with open_index(db_path) as index:
            recorded = record_hook_event(index, agent, payload)
        if recorded is not None:
            ring(db_path)           # a `serve` on this index shows it now, not at its next look
    tool = payload.get("tool_name")
    if event not in TOOL_EVENTS or tool in QUESTION_TOOLS or tool not in SNAPSHOT_TOOLS.get(agent, (tool,)):
        return "allow", None, None
    if payload.get("cwd") is None and recorded is not None:
        payload = {**payload, "cwd": recorded["repo"]}      # named by its workspace roots (Cline)
    return decide(agent, payload, db_path)


def answer(agent: str, verdict: str, reason: str | None, out: IO[str], event: str | None = None) -> None:
    """The agent's protocol: nothing (`{}` for Gemini CLI, `{"cancel": false}` for Cline) lets the call through.
    Cursor's answer changes nothing: `{"continue": true}` lets the person's own prompt go on, `{}` (no
    `followup_message`) ends the turn as Cursor would."""
    if agent == "cursor":
        out.write('{"continue": true}\n' if event == "beforeSubmitPrompt" else "{}\n")
        return
    if verdict == "allow":
        if agent == "gemini-cli":
            out.write("{}\n")
        elif agent == "cline":
            out.write('{"cancel": false}\n')
        return
    word = ASKING[agent]
    if agent == "gemini-cli":
        out.write(json.dumps({"decision": word, "reason": reason}) + "\n")
    elif agent == "copilot-cli":
        out.write(json.dumps({"permissionDecision": word, "permissionDecisionReason": reason}) + "\n")
    elif agent == "goose":
        out.write(json.dumps({"decision": word, "reason": reason}) + "\n")
    elif agent == "cline":
        out.write(json.dumps({"cancel": True, "errorMessage": reason}) + "\n")
    else:
        out.write(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": word,
                                                     "permissionDecisionReason": reason}}) + "\n")


def main(argv: list[str], stdin: IO[bytes], stdout: IO[str], stderr: IO[str]) -> int:
    """Exit 0 always (the agent's call goes on); one stderr line when something failed."""
    agent = argv[0] if argv else ""
    if agent not in AGENTS:
        stderr.write(f"fleetdeck hook: unknown agent {agent!r}; allowed\n")
        return 0
    db = argv[argv.index("--db") + 1] if "--db" in argv[1:-1] else None
    event = argv[argv.index("--event") + 1] if "--event" in argv[1:-1] else None
    result: dict = {}

    def work() -> None:
        try:
            payload = json.loads(stdin.read(MAX_INPUT + 1)[:MAX_INPUT] or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("the hook's input is not a JSON object")
            result["event"] = payload.get("hook_event_name")
            if agent in ("copilot-cli", "goose", "cursor", "cline"):
                from fleet.agenthooks import payloads

                payload = payloads.NORMALIZE[agent](event, payload)
            result["verdict"] = handle(agent, payload, Path(db) if db else default_db_path())
        except Exception as exc:        # never break the agent: say it, allow
            result["error"] = f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive():
        stderr.write(f"fleetdeck hook: no snapshot within {DEADLINE:g}s; allowed\n")
        answer(agent, "allow", None, stdout, result.get("event"))
        return 0
    if "error" in result:
        stderr.write(f"fleetdeck hook: {result['error'].splitlines()[0][:300]}; allowed\n")
        answer(agent, "allow", None, stdout, result.get("event"))
        return 0
    verdict, reason, _ = result["verdict"]
    answer(agent, verdict, reason, stdout, result.get("event"))
    return 0
