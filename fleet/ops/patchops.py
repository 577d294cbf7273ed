"""patch and stage_hunks: applying exact changes to the working tree or the index.

`patch` takes unified-diff text (e.g. from patch.generate), checks every path it names with the read
side's rules and `git apply --check` (read-only), and applies it with `git apply` (which itself refuses
paths outside the work tree). `stage_hunks` stages chosen hunks of one file by the ids `repo.changes`
gives them (fleet.repo.hunkids), rebuilding a zero-context patch from exactly those blocks and applying
it to the index.
"""

from __future__ import annotations

from fleet.words import plural
from fleet.errors import FleetError
from fleet.git import diffparse
from fleet.git.run import run, text
from fleet.ops.gitexec import exec_git
from fleet.ops.model import MAX_PATCH_BYTES, Ctx, Op, Plan, known_args, shown_diff, string
from fleet.patch.canonical import canonical_entries, file_rows
from fleet.repo import hunkids
from fleet.repo.changes import DIFF_FLAGS
from fleet.repo.scope import resolve_file_in_repo

MAX_HUNKS = 500


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
    known_args("patch", args, {"patch", "target"})
    target = args.get("target", "worktree")
    if target not in ("worktree", "index"):
        raise FleetError("BAD_ARGUMENT", "target must be worktree or index")
    shown = checked_patch(ctx, args.get("patch"), target)
    preview = {"summary": f"apply a patch to the {'index' if target == 'index' else 'working tree'} "
                          f"({plural(len(shown['files']), 'file')})", "target": target, **shown}
    return Plan({"patch": args["patch"], "target": target}, preview, paths=shown["files"],
                pin_index=target == "index", policy_paths=shown["files"],
                writes=shown["files"] if target == "worktree" else [])


def full_patch(index: object, proposal_id: str) -> str:
    """The whole patch a `patch` proposal applies (the preview shows its first DIFF_CAP bytes), every line
    through the display rule (fleet.views.safe: a CR, bidi or zero-width character shown as an escape)."""
    from fleet.ops import proposals
    from fleet.views.safe import visible

    row = proposals.get(index, proposal_id)
    patch = ((row.get("preview") or {}).get("_plan") or {}).get("args", {}).get("patch")
    if row["op"] != "patch" or not isinstance(patch, str):
        raise FleetError("NOT_FOUND", f"proposal {proposal_id} applies no patch")
    return "".join(visible(line, keep="\t") + "\n" for line in patch.split("\n")[:-1])


def run_patch(ctx: Ctx, args: dict) -> dict:
    exec_git(ctx.repo, ["apply", *_apply_flags(args["target"]), "-"], input_bytes=args["patch"].encode("utf-8", "surrogatepass"))
    return {"applied": True, "target": args["target"]}


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
    known_args("stage_hunks", args, {"path", "hunks"})
    path = resolve_file_in_repo(ctx.repo, string(args, "path"))
    wanted = args.get("hunks")
    if not isinstance(wanted, list) or not wanted or not all(isinstance(h, str) and h for h in wanted):
        raise FleetError("BAD_ARGUMENT", "hunks must be a non-empty list of hunk ids from repo.changes")
    if len(wanted) > MAX_HUNKS:
        raise FleetError("LIMIT", f"more than {MAX_HUNKS} hunks")
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


OPS = {"patch": Op(preview_patch, run_patch), "stage_hunks": Op(preview_stage_hunks, run_stage_hunks)}
