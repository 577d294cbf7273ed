"""patch, patch_file_write and stage_hunks: applying exact changes to the working tree or the index.

`patch` takes unified-diff text (e.g. from patch.generate), at most MAX_PATCH_BYTES, refused unless it is
canonical and git reads it as shown (fleet.patch.canonical: no text git would ignore), checks every path
it names with the read side's rules and `git apply --check` (read-only), and applies it with `git apply`
(which itself refuses paths outside the work tree). `patch_file_write` is the one way an agent's patch
file gets into a repository (fleet.patch.folder): a `patch` that creates or rewrites that file.
`stage_hunks` stages chosen hunks of one file by the ids `repo.changes` gives them (fleet.repo.hunkids),
rebuilding a zero-context patch from exactly those blocks and applying it to the index.
"""

from __future__ import annotations

import os

from fleet.words import plural
from fleet.errors import FleetError
from fleet.git import diffparse
from fleet.git.run import run, text
from fleet.ops import catalog, proposals
from fleet.ops.gitexec import exec_git
from fleet.ops.model import MAX_PATCH_BYTES, Ctx, Plan, shown_diff, string
from fleet.patch.canonical import canonical_entries, file_rows
from fleet.patch.file import PATCH_SUFFIXES, parse_patch
from fleet.patch.folder import agent_patch_file
from fleet.patch.generate import generate_patch
from fleet.repo import hunkids
from fleet.repo.changes import DIFF_FLAGS
from fleet.repo.scope import resolve_file_in_repo
from fleet.safetext import visible


def _apply_flags(target: str) -> list[str]:
    return ["--cached"] if target == "index" else []


def checked_patch(ctx: Ctx, patch: object, target: str) -> dict:
    """The preview of applying `patch` to `target`: refused unless it is canonical (fleet.patch.canonical),
    at most MAX_PATCH_BYTES bytes, names only paths the read side's rules accept, and `git apply --check` takes it.
    Every file is listed with git's +/- counts, marked when the display cut hides part of it."""
    if not isinstance(patch, str) or not patch:
        raise FleetError("BAD_ARGUMENT", "patch must be a non-empty string (unified diff text)")
    data = patch.encode("utf-8", "surrogatepass")
    if len(data) > MAX_PATCH_BYTES:
        raise FleetError("LIMIT", f"the patch is {len(data):,} bytes; a proposal's patch is at most 1 MiB "
                                  f"({MAX_PATCH_BYTES:,} bytes): split it")
    entries = canonical_entries(ctx.repo, patch)
    paths = list(dict.fromkeys(resolve_file_in_repo(ctx.repo, p) for e in entries for p in
                               (e.old_path, e.path) if p))
    check = run(ctx.repo, ["apply", "--check", *_apply_flags(target), "-"], input_bytes=data, check=False)
    if check.returncode != 0:
        raise FleetError("CONFLICT", "git apply --check refuses the patch: " +
                         "; ".join(check.stderr.strip().splitlines()[:3]))
    stat = text(run(ctx.repo, ["apply", "--stat", "-"], input_bytes=data).stdout)
    return {"files": paths, "stat": stat, **shown_diff(data, *file_rows(entries)), "apply_check": "ok"}


def preview_patch(ctx: Ctx, args: dict) -> Plan:
    catalog.Patch.known(args)
    target = catalog.Patch.choice(args, "target")
    shown = checked_patch(ctx, args.get("patch"), target)
    preview = {"summary": f"apply a patch to the {'index' if target == 'index' else 'working tree'} "
                          f"({plural(len(shown['files']), 'file')})", "target": target, **shown}
    return Plan({"patch": args["patch"], "target": target}, preview, paths=shown["files"],
                pin_index=target == "index", policy_paths=shown["files"],
                writes=shown["files"] if target == "worktree" else [])


def full_patch(index: object, proposal_id: str) -> str:
    """The whole patch a `patch` proposal applies (the preview shows its first DIFF_CAP bytes), every line
    through the display rule (fleet.safetext: a CR, bidi or zero-width character shown as an escape)."""
    row = proposals.get(index, proposal_id)
    patch = ((row.get("preview") or {}).get("_plan") or {}).get("args", {}).get("patch")
    if row["op"] not in ("patch", "patch_file_write") or not isinstance(patch, str):
        raise FleetError("NOT_FOUND", f"proposal {proposal_id} applies no patch")
    return "".join(visible(line, keep="\t") + "\n" for line in patch.split("\n")[:-1])


def run_patch(ctx: Ctx, args: dict) -> dict:
    exec_git(ctx.repo, ["apply", *_apply_flags(args["target"]), "-"], input_bytes=args["patch"].encode("utf-8", "surrogatepass"))
    return {"applied": True, "target": args["target"]}


# --- patch_file_write -----------------------------------------------------------------------------------

def preview_patch_file_write(ctx: Ctx, args: dict) -> Plan:
    """Put a patch file into the repository (where tools such as patch-package apply it): the change is the
    `patch` op's, a diff that creates or rewrites that one file, shown and pinned like any patch. The
    content is a patch from fleetdeck's patch folder (`patch_file`) or given as text (`patch`)."""
    catalog.PatchFileWrite.known(args)
    target = resolve_file_in_repo(ctx.repo, catalog.PatchFileWrite.text(args, "path"))
    if not target.endswith(PATCH_SUFFIXES):
        raise FleetError("BAD_PATH", f"path {target!r} must end in .patch or .diff")
    if ("patch_file" in args) == ("patch" in args):
        raise FleetError("BAD_ARGUMENT", "give exactly one of patch_file (a file in fleetdeck's patch folder) "
                                         "or patch (its text)")
    content = string(args, "patch", max_len=MAX_PATCH_BYTES) if "patch" in args else \
        _read_folder_file(agent_patch_file(ctx.index.path, string(args, "patch_file")))
    entries = parse_patch(content)
    if not entries:
        raise FleetError("BAD_ARGUMENT", "the patch file's content holds no file entry")
    exists = os.path.lexists(os.path.join(ctx.repo, target))
    made = generate_patch(ctx.repo, [{"mode": "file_content" if exists else "create_file", "path": target,
                                      "new_content": content}], check=False)
    if not made["patch"]:
        raise FleetError("BAD_ARGUMENT", f"{target} already holds exactly this patch")
    shown = checked_patch(ctx, made["patch"], "worktree")
    preview = {"summary": f"{'rewrite' if exists else 'create'} the patch file {target} "
                          f"({len(entries)} entr{'y' if len(entries) == 1 else 'ies'})", "target": "worktree",
               "writes": target, "patch_file_entries": [e.summary() for e in entries], **shown}
    return Plan({"patch": made["patch"], "target": "worktree"}, preview, paths=shown["files"],
                policy_paths=shown["files"], writes=shown["files"])


def _read_folder_file(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_PATCH_BYTES + 1)
    except FileNotFoundError:
        raise FleetError("NOT_FOUND", f"no patch file {path!r} in fleetdeck's patch folder") from None
    if len(data) > MAX_PATCH_BYTES:
        raise FleetError("LIMIT", f"the patch file is over 1 MiB ({MAX_PATCH_BYTES:,} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FleetError("BAD_ARGUMENT", "the patch file is not UTF-8 text") from None


# --- stage_hunks ----------------------------------------------------------------------------------------

def _zero_context(repo: str, path: str) -> tuple[bytes, list[bytes], list[dict]]:
    """The file's unstaged diff with no context: (header, raw hunks, parsed hunks), in the same order."""
    raw = run(repo, ["diff-files", "-p", "--no-color", "--no-ext-diff", "--no-textconv", "--unified=0",
                     "--", path]).stdout
    parsed = diffparse.parse_diff(run(repo, ["diff-files", *DIFF_FLAGS, "--unified=0", "--", path]).stdout)
    if not raw or not parsed:
        raise FleetError("BAD_ARGUMENT", f"{path!r} has no unstaged changes")
    change = parsed[0]
    if change.get("binary"):
        raise FleetError("BAD_ARGUMENT", f"{path!r} is binary: stage the whole file instead")
    lines = raw.split(b"\n")
    starts = [i for i, ln in enumerate(lines) if ln.startswith(b"@@ ")]
    if len(starts) != len(change["hunks"]):
        raise FleetError("GIT_FAILED", f"could not split the diff of {path!r} into hunks")
    header = b"\n".join(lines[:starts[0]]) + b"\n"
    bounds = starts[1:] + [len(lines)]
    hunks = [b"\n".join(lines[a:b]).rstrip(b"\n") + b"\n" for a, b in zip(starts, bounds)]
    return header, hunks, change["hunks"]


def _resolve(path: str, wanted: list[str], parsed: list[dict]) -> list[int]:
    """Indexes of the zero-context blocks the requested ids name (a single block, or a run of blocks
    that a wider context merged into one hunk)."""
    ids = [hunkids.block_id(path, "unstaged", b) for h in parsed for b in hunkids.blocks(h)]
    chosen: set[int] = set()
    for want in wanted:
        found = None
        for start in range(len(ids)):
            for end in range(start + 1, len(ids) + 1):
                if hunkids.run_id(ids[start:end]) == want:
                    found = range(start, end)
                    break
            if found:
                break
        if found is None:
            raise FleetError("NOT_FOUND", f"no unstaged hunk {want!r} in {path!r} (did the file change since "
                                          "repo.changes listed it?)")
        chosen.update(found)
    return sorted(chosen)


def preview_stage_hunks(ctx: Ctx, args: dict) -> Plan:
    catalog.StageHunks.known(args)
    path = resolve_file_in_repo(ctx.repo, catalog.StageHunks.text(args, "path"))
    wanted = catalog.StageHunks.items(args, "hunks")
    header, raw_hunks, parsed = _zero_context(ctx.repo, path)
    chosen = _resolve(path, list(dict.fromkeys(wanted)), parsed)
    patch = header + b"".join(raw_hunks[i] for i in chosen)
    check = run(ctx.repo, ["apply", "--cached", "--unidiff-zero", "--check", "-"], input_bytes=patch, check=False)
    if check.returncode != 0:
        raise FleetError("CONFLICT", "these hunks do not apply to the index: " + check.stderr.strip()[:300])
    body = [ln for i in chosen for ln in raw_hunks[i].split(b"\n")[1:]]
    counts = {"path": path, "old_path": None, "added": sum(ln.startswith(b"+") for ln in body),
              "deleted": sum(ln.startswith(b"-") for ln in body)}
    preview = {"summary": f"stage {len(chosen)} of {plural(len(raw_hunks), 'change block')} of {path}", "path": path,
               "hunks": list(dict.fromkeys(wanted)), **shown_diff(patch, [counts], [len(patch)]),
               "blocks_left_unstaged": len(raw_hunks) - len(chosen)}
    return Plan({"path": path, "blocks": chosen}, preview, paths=[path], pin_index=True, policy_paths=[path])


def run_stage_hunks(ctx: Ctx, args: dict) -> dict:
    """Rebuild the same zero-context patch (the executor has re-checked that the file and the index are as
    the preview saw them, so the bytes are identical) and apply the chosen blocks to the index."""
    header, raw_hunks, _ = _zero_context(ctx.repo, args["path"])
    patch = header + b"".join(raw_hunks[i] for i in args["blocks"])
    exec_git(ctx.repo, ["apply", "--cached", "--unidiff-zero", "-"], input_bytes=patch)
    return {"path": args["path"], "staged_blocks": len(args["blocks"])}


catalog.Patch.bind(preview_patch, run_patch)
catalog.PatchFileWrite.bind(preview_patch_file_write, run_patch)
catalog.StageHunks.bind(preview_stage_hunks, run_stage_hunks)
