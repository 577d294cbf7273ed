"""`fleetdeck proposals ...`, `fleetdeck dashboard link` and `fleetdeck policy check`: the person's side of the
write path on a terminal.

`approve` executes at once in this process; `undo` makes and runs a `restore` proposal; `reject` refuses one.
Each of these decisions asks on the person's terminal (`/dev/tty`, never stdin, which an agent's shell can
pipe), unless the person set up a non-interactive approver (`[approval] noninteractive = true` in the
settings file) and passed `--yes`; with neither a terminal nor that setting it refuses (NO_TERMINAL).
`dashboard link` writes a fresh landing link to that same terminal (stdout only with the setting), so what
a command's output gives back never holds it. `wait` blocks until a proposal is decided (for scripts);
`reconcile` settles a proposal whose executor died. JSON with `--json`, a short text otherwise.
"""

from __future__ import annotations

from fleet.words import plural
import argparse
import contextlib
import io
import json
import sys
from typing import Iterator, TextIO

from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops import policy as policy_mod
from fleet.ops import proposals
from fleet.ops.catalog import OPS, risk_of
from fleet.ops.repocode import describe as describe_code
from fleet.settings import load_settings, settings_path
from fleet.views.safe import visible

NONINTERACTIVE = "[approval] noninteractive = true"


def _index(args: argparse.Namespace):
    from fleet.cli import index_for

    return index_for(args)


def _shown(text: str) -> str:
    """Repository and agent text for a terminal: every unsafe character made visible (fleet.views.safe),
    line by line."""
    return visible(text, keep="\n")


def _emit(args: argparse.Namespace, value: dict, text) -> None:
    """JSON with --json, else the text (`text` may be a function of the value, built only when shown)."""
    from fleet.cli import emit_json

    if getattr(args, "json", False):
        emit_json(value)
    else:
        print(_shown(text(value) if callable(text) else text))


def _line(row: dict) -> str:
    flag = " (interrupted: run `fleetdeck proposals reconcile`)" if row.get("interrupted") else ""
    summary = (row.get("preview") or {}).get("summary", "")
    return (f"{row['id']}  {row['status']:<9} {row['risk'] or '-':<6} {row['op']:<9} {row['agent']:<14} "
            f"{row['repo']}  {summary}{flag}")


def _indented(label: str, text: str, pad: str = "  ") -> list[str]:
    """A multi-line value (a commit message) under its label, every line indented, none dropped."""
    return [f"{pad}{label}:"] + [f"{pad}  | {ln}" for ln in text.split("\n")]


def _args(args: dict, pad: str) -> list[str]:
    out = []
    for key, value in args.items():
        if isinstance(value, str) and "\n" in value:
            out += _indented(key, value, pad)
        else:
            out.append(f"{pad}{key}: {json.dumps(value, ensure_ascii=False)}")
    return out


def _what_runs(row: dict, preview: dict) -> list[str]:
    """What the person approves, whole: the repository, the message, each plan step with its arguments
    and the files it changes, every repository of a branch clean-up (fleet-relative, never a basename)."""
    lines = [f"  repo: {row.get('repo_label') or row['repo']} ({row['repo']})"]
    if preview.get("message"):
        lines += _indented("message", preview["message"])
    for step in preview.get("steps") or []:
        summary = (step.get("preview") or {}).get("summary") or "previewed only when it runs: " + str(
            step.get("previewed_when_it_runs", ""))
        lines.append(f"  step {step['step']}: {step['op']}: {summary}")
        lines += _args(step.get("args") or {}, "      ")
        files = step.get("files")
        if files is not None:
            count = step.get("files_count", len(files))
            lines.append(f"      files it changes ({count}): " + (", ".join(files) if files else "none")
                         + (f", and {count - len(files)} more" if count > len(files) else ""))
    for target in preview.get("targets") or []:
        for b in target.get("branches", []):
            lines.append(f"  {b['action']}: {target.get('repo_label') or target['repo']} {b['branch']} "
                         f"{b['tip'][:12]} ({b['why']})")
    for b in preview.get("recreate") or []:
        lines.append(f"  recreate: {b.get('repo_label') or b['repo']} {b['branch']} {b['tip'][:12]}")
    return lines


def _agent_note(row: dict) -> str:
    """What the proposal's agent rests on (empty when it is a credential's name as its client declared it)."""
    if not row.get("agent_authenticated"):
        return "  agent: no agent credential (the name is only what the client declared)"
    declared = row.get("agent_declared")
    return f"  agent: authenticated; its client calls itself {declared}" if declared and declared != row["agent"] else ""


def _describe(row: dict) -> str:
    preview = row.get("preview") or {}
    lines = [_line(row), f"  reason: {row['reason']}", f"  created {row['created_at']}, expires {row['expires_at']}"]
    if _agent_note(row):
        lines.append(_agent_note(row))
    lines += _what_runs(row, preview)
    if row.get("decided_by"):
        lines.append(f"  decided by {row['decided_by']} at {row['decided_at']}"
                     + (f": {row['decision_reason']}" if row.get("decision_reason") else ""))
    for agent in preview.get("other_agents", []):
        overlap = f" on {', '.join(agent['overlapping_paths'])}" if agent["overlapping_paths"] else ""
        lines.append(f"  warning: {agent['agent']} is {agent['state']} in this repository{overlap}")
    if preview.get("warning"):
        lines.append(f"  warning: {preview['warning']}")
    if preview.get("rewrites_history"):
        lines.append("  rewrites history")
    if preview.get("repo_code"):
        lines.append(f"  this repository defines: {describe_code(preview['repo_code'])}")
    for url in preview.get("push_urls") or []:
        lines.append(f"  pushes to: {url} ({preview.get('remote')} {preview.get('branch')}, as git resolves it)")
    for key in ("files", "commits_leaving", "commits_arriving", "commits_sent"):
        for item in (preview.get(key) or [])[:20]:
            shown = item if isinstance(item, str) else (item.get("path") or
                                                        f"{item.get('sha', '')[:12]} {item.get('subject', '')}")
            lines.append(f"  {key}: {shown}".rstrip())
    lines += _changes(preview)
    if preview.get("diff"):
        lines.append(preview["diff"].rstrip("\n"))
    if preview.get("diff_truncated"):
        lines.append(f"  the diff is cut at 64 KiB (high risk); every file with git's counts"
                     + (f" (the whole patch: fleetdeck proposals patch {row['id']}):" if row["op"] in ("patch", "patch_file_write") else ":"))
        for item in preview.get("diff_files") or []:
            cut = {True: "", "partly": " (partly shown)"}.get(item["shown"], " (not shown)")
            counts = "binary" if item["added"] is None else f"+{item['added']} -{item['deleted']}"
            lines.append(f"  diff file: {item['path']} {counts}{cut}")
    if row.get("error"):
        lines.append(f"  error: {row['error']}")
    for item in (row.get("result") or {}).get("unexpected_changes") or []:
        lines.append(f"  unexpected change ({item['where']}): {item['path']}")
    if row.get("result"):
        result = dict(row["result"])
        said = result.pop("stderr", "") if isinstance(result.get("stderr"), str) else ""
        lines.append(f"  result: {result}")
        lines += [f"  git: {line}" for line in said.rstrip("\n").splitlines()]  # git's lines, as it wrote them
    if row.get("undone_by"):
        lines.append(f"  undone by {row['undone_by']} at {row['undone_at']} (the result is what is there now)")
    if row.get("restore_point"):
        undo = f" (undo: fleetdeck proposals undo {row['id']})" if row["status"] != "undone" else ""
        lines.append(f"  restore point: {row['restore_point']}{undo}")
    return "\n".join(lines)


def _changes(preview: dict) -> list[str]:
    """The files a checkout, reset, merge or rebase writes, those overwriting untracked or ignored files first
    and marked (git replaces an ignored file without asking; the restore point keeps its bytes)."""
    if not preview.get("changes_files"):
        return []
    lines = [f"  files it writes: {preview['changes_files_count']}"
             + (f" ({preview['changes_overwrite_count']} overwrite a file git does not track)"
                if preview.get("changes_overwrite_count") else "")]
    for item in preview["changes_files"][:50]:
        mark = f"  OVERWRITES {item['overwrites'].upper()} FILE" if item["overwrites"] else ""
        lines.append(f"    {item['change']:<12} {item['path']}{mark}")
    if preview["changes_files_count"] > min(50, len(preview["changes_files"])):
        lines.append(f"    ... {preview['changes_files_count'] - min(50, len(preview['changes_files']))} more")
    return lines


def _noninteractive() -> bool:
    return bool(load_settings()["approval"]["noninteractive"])


@contextlib.contextmanager
def _terminal(what: str, hint: str) -> Iterator[TextIO]:
    """The controlling terminal, read and written directly: a person at it answers, a pipe cannot."""
    try:  # unbuffered: a terminal cannot seek, which Python's buffered read-write files need
        tty = io.TextIOWrapper(io.FileIO("/dev/tty", "r+"), encoding="utf-8", errors="replace", write_through=True)
    except OSError:
        raise FleetError("NO_TERMINAL", f"{what} needs your terminal and this process has none; {hint}") from None
    with tty:
        yield tty


def _hint(flag: str) -> str:
    """What a script can do instead of a terminal: pass the flag once the person set the switch."""
    if _noninteractive():
        return f"a non-interactive approver is set up: pass {flag}"
    return f"for your own scripts set {NONINTERACTIVE} in {settings_path()}" + (f", then pass {flag}" if flag else "")


def _confirm(args: argparse.Namespace, index: Index, row: dict, verb: str) -> None:
    """Show the proposal on the terminal and ask; `--yes` skips that only for a non-interactive approver. A
    decision that needs the person's passkey (fleet/ops/passkeys.py) is refused here: a terminal has none."""
    from fleet.ops import passkeys

    if passkeys.required(index, row.get("risk") if verb == "approve" else None):
        raise FleetError("PASSKEY_REQUIRED", f"{verb} this on the dashboard: it needs your passkey ([passkeys] "
                                             f"require = {passkeys.mode()!r} in {settings_path()})")
    if args.yes and _noninteractive():
        return
    with _terminal(f"{verb} (it asks on /dev/tty)", _hint("--yes")) as tty:
        if args.yes:
            tty.write(f"(--yes is ignored unless {NONINTERACTIVE} is set)\n")
        word = "yes" if row.get("risk") == "high" else "y"
        tty.write(_shown(_describe(row)) + "\n"
                  + _shown(f"{verb} this {row.get('risk')}-risk {row['op']}? type '{word}' to confirm: "))
        tty.flush()
        answer = tty.readline().strip().lower()
    if answer != word:
        raise FleetError("BAD_ARGUMENT", f"not confirmed: nothing to {verb}")


def cmd_dashboard(args: argparse.Namespace) -> int:
    """A fresh single-use landing link on the running dashboard, written to the terminal (stdout only for a
    non-interactive approver); no terminal, no link, and no code is made."""
    from fleet.ops.landing import LANDING_TTL_S, fresh_link

    with contextlib.ExitStack() as stack:
        tty = None if _noninteractive() else stack.enter_context(
            _terminal("`fleetdeck dashboard link`", _hint("")))
        with _index(args) as index:
            line = f"{fresh_link(index)}\n(works once, within {LANDING_TTL_S // 60} minutes)\n"
        (tty or sys.stdout).write(line)
    return 0


def cmd_proposals(args: argparse.Namespace) -> int:
    from fleet.ops import service  # the write side loads only for the commands that use it (not `mcp`'s parser)

    action = args.proposals_action
    if action == "approver-token":
        from fleet.ops.approver import approver_token

        with _index(args) as index:
            print(approver_token(index.path))
        return 0
    with _index(args) as index:
        if action == "list":
            found = proposals.list_proposals(index, args.status, limit=args.limit)
            for row in found["proposals"]:
                row["preview"] = service.public_preview(row)
            _emit(args, found, "\n".join(_line(r) for r in found["proposals"]) or "no proposals")
            return 0
        if action == "show":
            _emit(args, service.show(index, args.id), _describe)
            return 0
        if action == "patch":
            from fleet.ops.patchops import full_patch

            sys.stdout.write(full_patch(index, args.id))
            return 0
        if action in ("approve", "undo"):  # this process is an executor now: claim what a dead one left
            service.resume_orphans(index)
        if action == "approve":
            _confirm(args, index, service.show(index, args.id), "approve")
            row = service.approve(index, args.id, "cli")
        elif action == "reject":
            _confirm(args, index, service.show(index, args.id), "reject")
            row = service.reject(index, args.id, "cli", args.reason)
        elif action == "undo":
            original = service.show(index, args.id)
            _confirm(args, index, original, "undo")
            row = service.undo(index, args.id, "cli")
        elif action == "wait":
            row = service.wait(index, args.id, args.timeout)
        else:
            row = service.reconcile(index, args.id, args.as_status, "cli")
    _emit(args, row, _describe)
    # a proposal that ran and failed is a failed command; one the person just reconciled as failed is not
    return 1 if row["status"] == "failed" and action != "reconcile" else 0


def cmd_policy(args: argparse.Namespace) -> int:
    """Which rule applies to (agent, op, repo, ref, path), and why; or POLICY_INVALID for a broken file."""
    if args.op not in OPS:
        raise FleetError("BAD_ARGUMENT", f"unknown operation {args.op!r}; known: {', '.join(sorted(OPS))}")
    loaded = policy_mod.load_policy()
    risk = risk_of(args.op, {"mode": args.mode, "amend": args.amend})
    subject = policy_mod.Subject(args.op, args.repo, args.repo, tuple(args.ref or ()), tuple(args.path or ()),
                                 True, risk)
    decision = policy_mod.evaluate(loaded, args.agent, [subject])
    result = {"policy_file": loaded.source, "agent": args.agent, "op": args.op, "repo": args.repo,
              "refs": args.ref or [], "paths": args.path or [], "risk": risk, **decision.as_dict(),
              "settings": loaded.settings}
    _emit(args, result, f"{decision.action}: {decision.why}")
    return 0


def cmd_restore_points(args: argparse.Namespace) -> int:
    from fleet.ops import restore
    from fleet.repo.target import resolve_target

    with _index(args) as index:
        path = resolve_target(index, args.repo).path
        if args.prune:
            ids = {p["restore_point"] for p in restore.list_points(index, path, limit=100_000)["restore_points"]}
            if args.prune not in ids:
                raise FleetError("NOT_FOUND", f"no restore point {args.prune} in {path}")
            result = restore.prune(index, args.prune)
            _emit(args, result, f"pruned {args.prune}: {plural(result['refs_deleted'], 'ref')} deleted")
            return 0
        found = restore.list_points(index, path)
    _emit(args, found, "\n".join(f"{p['restore_point']}  {p['created_at']}  {p['op']}  "
                                 f"{'undoable' if p['undoable'] else 'not undoable'}"
                                 for p in found["restore_points"]) or "no restore points")
    return 0


POLICY_HELP = (policy_mod.__doc__ or "").split("Example (also in", 1)[-1].split("\n", 1)[-1]


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proposals", help="agents' proposals: list, show, approve, reject, undo, wait, reconcile")
    actions = p.add_subparsers(dest="proposals_action", metavar="ACTION")
    p.set_defaults(func=cmd_proposals, proposals_action="list", json=False, status=None, limit=200)
    actions.add_parser("approver-token", help="the token your own scripts send as X-Fleetdeck-Approver to approve "
                                              "or reject over HTTP (the MCP bearer token cannot)")
    a = actions.add_parser("list", help="pending first, then the rest newest first")
    a.add_argument("--status", choices=proposals.STATES)
    a.add_argument("--limit", type=int, default=200)
    a.add_argument("--json", action="store_true")
    for name, text in (("show", "one proposal with its preview"),
                       ("patch", "the whole patch a patch proposal applies (every character visible)"),
                       ("approve", "approve and execute now"),
                       ("reject", "reject with a reason"), ("undo", "go back to the state before it ran"),
                       ("wait", "block until it is decided and run (for scripts)"),
                       ("reconcile", "settle a proposal whose executor died (never re-run)")):
        a = actions.add_parser(name, help=text)
        a.add_argument("id", metavar="ID")
        a.add_argument("--json", action="store_true")
        if name in ("approve", "reject", "undo"):
            a.add_argument("--yes", action="store_true", help=f"do not ask on the terminal (only with "
                                                              f"{NONINTERACTIVE} in the settings file)")
        if name == "reject":
            a.add_argument("--reason", required=True)
        if name == "wait":
            a.add_argument("--timeout", type=float, default=3600.0, help="seconds (default 3600)")
        if name == "reconcile":
            a.add_argument("--as", dest="as_status", required=True, choices=["failed", "completed"])

    p = sub.add_parser("dashboard", help="a fresh link to the running dashboard (`dashboard link`)")
    links = p.add_subparsers(dest="dashboard_action", metavar="link")
    links.required = True
    links.add_parser("link", help="write a new single-use sign-in link for the dashboard to your terminal")
    p.set_defaults(func=cmd_dashboard)

    p = sub.add_parser("policy", help="which policy rule applies to a proposal, and why",
                       description="Check the policy file ($FLEETDECK_POLICY / --policy, or "
                                   "$XDG_CONFIG_HOME/fleetdeck/policy.toml). A complete example file:\n" + POLICY_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    checks = p.add_subparsers(dest="policy_action", metavar="check")
    checks.required = True
    c = checks.add_parser("check", help="explain the decision for AGENT OP REPO")
    c.add_argument("agent")
    c.add_argument("op")
    c.add_argument("repo", help="the repository's path or fleet name")
    c.add_argument("--ref", action="append", help="a ref the proposal names or moves (repeatable)")
    c.add_argument("--path", action="append", help="a repo-relative path it touches (repeatable)")
    c.add_argument("--mode", help="reset mode (hard is high-risk)")
    c.add_argument("--amend", action="store_true", help="a commit that amends (high-risk)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_policy)

    p = sub.add_parser("restore-points", help="restore points of one repository (what can be undone)")
    p.add_argument("repo")
    p.add_argument("--prune", metavar="ID", help="delete this restore point (its refs) for good: the only way "
                                                 "one goes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_restore_points)
