"""A proposal as the person reads it on a terminal (`proposals show`, and before each decision): what runs,
whole, with every warning the preview holds."""

from __future__ import annotations

import json

from fleet.ops.repocode import describe as describe_code


def line(row: dict) -> str:
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


def describe(row: dict) -> str:
    preview = row.get("preview") or {}
    lines = [line(row), f"  reason: {row['reason']}", f"  created {row['created_at']}, expires {row['expires_at']}"]
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

