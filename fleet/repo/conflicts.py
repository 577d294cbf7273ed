"""Conflicts: predicted (`conflict_preflight`) and in progress (`conflict_read`).

The preflight runs `git merge-tree --write-tree` through `fleet.git.mergetree`, whose objects go to a throwaway
directory: the repository (objects, refs, HEAD, index, work tree) is left byte for byte as it was.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fleet.caps import Capped, cap, check_int
from fleet.errors import FleetError
from fleet.git import files as gitfiles
from fleet.git.layout import Found
from fleet.git.revs import check_rev, merge_base_of, resolve_commit
from fleet.git.run import GitError, out, run, text
from fleet.git.mergetree import merge_tree
from fleet.repo.scope import resolve_file_in_repo

BINARY_SNIFF = 8000
BLOB_READ_LIMIT = 8 * 1024 * 1024
MARKER_SCAN_LIMIT = 8 * 1024 * 1024
SIDE_EFFECTS = ("none: git merge-tree wrote its objects to a throwaway directory; the repository's objects, refs, "
                "HEAD, index and working tree are untouched")


class Preflight(Capped):
    source: str
    target: str
    source_sha: str
    target_sha: str
    merge_base: str | None
    result: str
    unrelated_histories: bool
    conflicted_paths: list[str]
    conflict_count: int


class ConflictRead(Capped):
    in_conflict: bool
    operation: str | None
    files: list[dict]
    conflicted_file_count: int


def _is_ancestor(path: str, a: str, b: str) -> bool:
    return run(path, ["merge-base", "--is-ancestor", a, b], ok_codes=(0, 1)).returncode == 0


def _upstream_of(path: str, source: str) -> str:
    spec = "@{upstream}" if source == "HEAD" else f"{source}@{{upstream}}"
    result = run(path, ["rev-parse", "--symbolic-full-name", spec], check=False)
    name = text(result.stdout).strip()
    if result.returncode != 0 or not name:
        raise FleetError("BAD_ARGUMENT", f"{source} has no upstream; pass target explicitly")
    return name


def _merge_tree_messages(data: bytes) -> list[dict[str, Any]]:
    """The informational section of `merge-tree -z`: `<n>\\0<path>\\0...<type>\\0<message>\\0` repeated."""
    fields = data.split(b"\0")
    messages = []
    i = 0
    while i < len(fields) and fields[i].isdigit():
        n = int(fields[i])
        paths = [text(p) for p in fields[i + 1:i + 1 + n]]
        kind, message = text(fields[i + 1 + n]), text(fields[i + 2 + n]).rstrip("\n")
        messages.append({"paths": paths, "type": kind, "message": message})
        i += 3 + n
    return messages


def conflict_preflight(found: Found, target: str | None = None, source: str = "HEAD") -> Preflight:
    """Predict merging `target` (default: the upstream of `source`) into `source` without touching them."""
    path = found.path
    check_rev(source, "source")
    target_name = target if target is not None else _upstream_of(path, source)
    source_sha = resolve_commit(path, source, "source")
    target_sha = resolve_commit(path, target_name, "target")
    base = merge_base_of(path, source_sha, target_sha)
    result: dict[str, Any] = {
        "source": source, "target": target_name, "source_sha": source_sha, "target_sha": target_sha,
        "merge_base": base, "unrelated_histories": base is None, "conflicted_paths": [],
        "conflict_count": 0, "messages": [], "merge_tree": None, "truncated": False, "omitted_count": 0,
        "side_effects": SIDE_EFFECTS, "network_fetch_performed": False,
    }
    if base is not None and _is_ancestor(path, target_sha, source_sha):
        result["result"] = "up_to_date"
        return result
    if base is not None and _is_ancestor(path, source_sha, target_sha):
        result["result"] = "fast_forward"
        return result
    args = ["--name-only", "-z", "--messages"]
    if base is None:
        args.append("--allow-unrelated-histories")
    try:
        res = merge_tree(path, found.commondir, [*args, source_sha, target_sha])
    except GitError as exc:
        raise FleetError.from_git(exc) from exc
    head, _, info = res.stdout.partition(b"\0\0")
    names = head.split(b"\0")
    paths = list(dict.fromkeys(text(p) for p in names[1:] if p))
    result["merge_tree"] = text(names[0])
    result["result"] = "conflicts" if res.returncode == 1 else "clean"
    result["conflict_count"] = len(paths)
    result["conflicted_paths"], info_paths = cap(paths, 200)
    result["messages"], info_msgs = cap(_merge_tree_messages(info), 200)
    result["truncated"] = info_paths["truncated"] or info_msgs["truncated"]
    result["omitted_count"] = info_paths["omitted_count"] + info_msgs["omitted_count"]
    return result


# --- an active conflict -----------------------------------------------------------------------------

_KIND = {
    frozenset({1, 2, 3}): "both_modified", frozenset({2, 3}): "both_added",
    frozenset({1, 3}): "deleted_by_us", frozenset({1, 2}): "deleted_by_them",
    frozenset({2}): "added_by_us", frozenset({3}): "added_by_them", frozenset({1}): "both_deleted",
}
_THEIRS_HEAD = {"merge": "MERGE_HEAD", "rebase": "REBASE_HEAD", "cherry-pick": "CHERRY_PICK_HEAD",
                "revert": "REVERT_HEAD"}
_NOTES = {
    "rebase": ("rebase inverts ours/theirs: 'ours' is the branch being rebased ONTO (HEAD, with the commits "
               "replayed so far); 'theirs' is your own commit being replayed (REBASE_HEAD)"),
    "merge": "'ours' is the checked-out branch (HEAD); 'theirs' is the branch being merged in (MERGE_HEAD)",
    "cherry-pick": "'ours' is HEAD; 'theirs' is the commit being cherry-picked (CHERRY_PICK_HEAD)",
    "revert": ("'ours' is HEAD; 'theirs' is the parent of the commit being reverted, so taking 'theirs' "
               "undoes that commit's change"),
}


def _unmerged(path: str) -> dict[str, dict[int, dict[str, str]]]:
    """path -> stage -> {mode, sha} from `git ls-files -u -z`."""
    files: dict[str, dict[int, dict[str, str]]] = {}
    for record in out(path, ["ls-files", "-u", "-z", "--full-name"]).split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, sha, stage = text(meta).split(" ")
        files.setdefault(text(name), {})[int(stage)] = {"mode": mode, "sha": sha}
    return files


def _blobs(path: str, shas: list[str], max_bytes: int) -> dict[str, dict[str, Any]]:
    """Side contents for `shas`: whole when a side fits in `max_bytes`, else its size only
    (`content_omitted: "too_large"`: the conflict regions carry the part that matters); blobs over
    BLOB_READ_LIMIT are not read at all."""
    if not shas:
        return {}
    request = "".join(f"{s}\n" for s in shas).encode()
    sizes: dict[str, int] = {}
    for line in text(out(path, ["cat-file", "--batch-check"], input_bytes=request)).splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[1] == "blob":
            sizes[parts[0]] = int(parts[2])
    readable = [s for s in shas if s in sizes and sizes[s] <= BLOB_READ_LIMIT]
    found: dict[str, dict[str, Any]] = {s: {"sha": s, "error": "blob unreadable"} for s in shas if s not in sizes}
    for s in shas:
        if s in sizes and s not in readable:
            found[s] = {"sha": s, "size": sizes[s], "content": None, "truncated": True,
                        "content_omitted": "too_large"}
    if readable:
        data = out(path, ["cat-file", "--batch"], input_bytes="".join(f"{s}\n" for s in readable).encode(),
                   max_bytes=sum(sizes[s] for s in readable) + 200 * len(readable) + 1024)
        pos = 0
        for s in readable:
            header_end = data.index(b"\n", pos)
            size = int(data[pos:header_end].split(b" ")[2])
            blob = data[header_end + 1:header_end + 1 + size]
            pos = header_end + 1 + size + 1
            if b"\0" in blob[:BINARY_SNIFF]:
                found[s] = {"sha": s, "size": size, "binary": True}
            elif size > max_bytes:
                found[s] = {"sha": s, "size": size, "binary": False, "content": None, "truncated": True,
                            "content_omitted": "too_large"}
            else:
                found[s] = {"sha": s, "size": size, "binary": False, "truncated": False, "content": text(blob)}
    return found


def marker_regions(data: bytes) -> list[dict[str, Any]]:
    """Conflict marker regions (1-based line numbers); `base_line` is set for diff3/zdiff3 style."""
    regions: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for number, line in enumerate(data.split(b"\n"), 1):
        line = line.rstrip(b"\r")
        if line.startswith(b"<<<<<<<") and (len(line) == 7 or line[7:8] == b" "):
            current = {"start_line": number, "base_line": None, "sep_line": None, "end_line": None}
        elif current is None:
            continue
        elif line.startswith(b"|||||||") and current["sep_line"] is None:
            current["base_line"] = number
        elif line == b"=======" and current["sep_line"] is None:
            current["sep_line"] = number
        elif line.startswith(b">>>>>>>") and current["sep_line"] is not None:
            current["end_line"] = number
            regions.append(current)
            current = None
    return regions


def _working_regions(path: str, rel: str, context: int, max_bytes: int) -> dict[str, Any]:
    """The working file's conflict regions, each with its text (ours, base for diff3, theirs) and `context`
    lines around it, at most `max_bytes` of text per file (later regions keep their line numbers only)."""
    try:
        safe = resolve_file_in_repo(path, rel)
    except FleetError:
        return {"regions": [], "working_file": "outside_repo"}
    full = os.path.join(path, safe)
    if os.path.islink(full) or not os.path.isfile(full):
        return {"regions": [], "working_file": "missing" if not os.path.lexists(full) else "not_a_file"}
    with open(full, "rb") as fh:
        data = fh.read(MARKER_SCAN_LIMIT + 1)
    regions, info = cap(marker_regions(data[:MARKER_SCAN_LIMIT]), 200)
    lines = data[:MARKER_SCAN_LIMIT].split(b"\n")
    room = max_bytes
    for region in regions:
        room = _region_text(region, lines, context, room)
    return {"regions": regions, "regions_truncated": info["truncated"] or len(data) > MARKER_SCAN_LIMIT,
            "regions_omitted_count": info["omitted_count"], "working_file": "present"}


def _region_text(region: dict[str, Any], lines: list[bytes], context: int, room: int) -> int:
    """Fill one region's text within `room` bytes; returns the room left. A region that does not fit whole
    keeps its line numbers and says `text_omitted`."""
    start, sep, end = region["start_line"], region["sep_line"], region["end_line"]
    base = region["base_line"]

    def span(first: int, last: int) -> list[str]:     # 1-based, inclusive
        return [text(line.rstrip(b"\r")) for line in lines[max(first, 1) - 1:max(last, 0)]]

    parts = {
        "context_before": span(start - context, start - 1),
        "ours": span(start + 1, (base or sep) - 1),
        "base": span(base + 1, sep - 1) if base else None,
        "theirs": span(sep + 1, end - 1),
        "context_after": span(end + 1, min(end + context, len(lines) - (0 if lines[-1] else 1))),
    }
    size = sum(len(line.encode()) + 4 for part in parts.values() for line in part or [])
    if size > room:
        region["text_omitted"] = True
        return room
    region.update(parts, text_omitted=False)
    return room - size


def _side(path: str, ref: str | None) -> dict[str, Any] | None:
    if ref is None:
        return None
    res = run(path, ["log", "-1", "--format=%H%x00%s", ref, "--"], check=False)
    if res.returncode != 0 or not res.stdout:
        return None
    sha, _, subject = text(res.stdout).strip("\n").partition("\0")
    return {"ref": ref, "sha": sha, "subject": subject}


def conflict_read(found: Found, max_bytes: int = 16384, max_files: int = 20,
                  context_lines: int = 3) -> ConflictRead:
    """The conflict in progress: operation, ours/theirs, and per file its kind, its conflict regions first
    (the text of each side with `context_lines` around it, `max_bytes` of it per file), then the whole
    base/ours/theirs contents of the sides that fit in `max_bytes` each."""
    check_int(max_bytes, "max_bytes", 1, 1024 * 1024)
    check_int(max_files, "max_files", 1, 200)
    check_int(context_lines, "context_lines", 0, 50)
    path, git_dir = found.path, found.gitdir
    operation, details = gitfiles.operation(Path(git_dir))
    files = _unmerged(path)
    if not files and operation not in _THEIRS_HEAD:
        return {"in_conflict": False, "operation": operation, "files": [], "conflicted_file_count": 0,
                "truncated": False, "omitted_count": 0}
    op = operation if operation in _THEIRS_HEAD else "unknown"
    theirs_head = _THEIRS_HEAD.get(op)
    result: dict[str, Any] = {
        "in_conflict": bool(files), "operation": op, "ours": _side(path, "HEAD"),
        "theirs": _side(path, theirs_head) if theirs_head and os.path.exists(
            os.path.join(git_dir, theirs_head)) else None,
        "ours_theirs_inverted": op == "rebase", "note": _NOTES.get(op, "no merge-like operation recorded"),
        "operation_details": details,
    }
    names, info = cap(sorted(files), max_files)
    shas = list(dict.fromkeys(st["sha"] for n in names for st in files[n].values()))
    blobs = _blobs(path, shas, max_bytes)
    entries = []
    for name in names:
        stages = files[name]
        sides = {label: ({**blobs[stages[n]["sha"]], "mode": stages[n]["mode"]} if n in stages else None)
                 for n, label in ((1, "base"), (2, "ours"), (3, "theirs"))}
        entries.append({"path": name, "kind": _KIND.get(frozenset(stages), "unknown"),
                        **_working_regions(path, name, context_lines, max_bytes), "sides": sides})
    result.update({"files": entries, "conflicted_file_count": len(files), "max_bytes_per_side": max_bytes,
                   **info})
    return result
