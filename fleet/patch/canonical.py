"""A patch as git reads it, or refused: what a person is shown is byte for byte what `git apply` applies.

`git apply` skips text it does not understand: a preamble (a mail, a commit message, 64 KiB of padding),
lines between file entries or after the last hunk. A preview built from the raw text can then show the
padding and hide the change. So a patch payload is re-rendered from its file entries (fleet.patch.file's
strict parser: git's own headers, hunks whose bodies match their counts) and refused unless the rendering
equals the payload exactly; git then parses it (`git apply --numstat --summary`, read-only, through the read
side's hardened runner) and must see the same files, in the same order, with the same +/- counts and the
same creations, deletions, renames and copies. Nothing here writes to a repository.
"""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.git.run import run, text
from fleet.patch.file import PatchEntry, as_bytes, parse_patch

_ONLY = "send only the diff itself (every byte of it is shown to the person)"


def _first_difference(patch: str, rendered: str) -> str:
    """Where the payload first differs from its rendering: 'line N: <what is there>'."""
    at = next((i for i, (a, b) in enumerate(zip(patch, rendered)) if a != b), min(len(patch), len(rendered)))
    line = patch.count("\n", 0, at) + 1
    start = patch.rfind("\n", 0, at) + 1
    shown = patch[start:start + 60].split("\n", 1)[0]
    return f"line {line}: {shown!r}" if shown else f"line {line} (a blank line)"


def canonical_entries(repo: str, patch: str) -> list[PatchEntry]:
    """The patch's file entries when it is canonical and git reads it as they say; BAD_ARGUMENT/BAD_PATH
    naming the first problem otherwise."""
    try:
        entries = parse_patch(patch)
    except FleetError as exc:
        if "unexpected" not in exc.message:
            raise
        raise FleetError(exc.code, f"the patch holds text git would ignore ({exc.message}): {_ONLY}") from None
    if not entries:
        raise FleetError("BAD_ARGUMENT", "the patch holds no file entry")
    rendered = "".join(e.text for e in entries)
    if rendered != patch:
        if rendered.startswith(patch) and not patch.endswith("\n"):
            raise FleetError("BAD_ARGUMENT", "the patch's last line has no newline")
        raise FleetError("BAD_ARGUMENT", "the patch holds text git would ignore (outside any file entry, at "
                                         f"{_first_difference(patch, rendered)}): {_ONLY}")
    data = as_bytes(patch)
    numstat = run(repo, ["apply", "--numstat", "-z", "-"], input_bytes=data, check=False)
    summary = run(repo, ["apply", "--summary", "-"], input_bytes=data, check=False)
    if numstat.returncode != 0 or summary.returncode != 0:
        first = (numstat.stderr or summary.stderr).strip().splitlines() or ["?"]
        raise FleetError("BAD_ARGUMENT", "git does not parse the patch: " + first[0])
    seen = [tuple(r.split(b"\t", 2)) for r in numstat.stdout.split(b"\0") if r]
    wanted = [(str(e.insertions).encode(), str(e.deletions).encode(), as_bytes(e.path)) for e in entries]
    if seen != wanted:
        raise FleetError("BAD_ARGUMENT", "git reads this patch differently from how it would be shown (files "
                                         f"and +/- counts: git {[(text(p), a, d) for a, d, p in seen][:5]}, "
                                         f"shown {[(e.path, e.insertions, e.deletions) for e in entries][:5]})")
    _check_summary(text(summary.stdout), entries)
    return entries


def _check_summary(summary: str, entries: list[PatchEntry]) -> None:
    """git's --summary names as many creations, deletions, renames and copies as the entries say."""
    said = {kind: sum(1 for ln in summary.splitlines() if ln.startswith(f" {kind} "))
            for kind in ("create", "delete", "rename", "copy")}
    shown = {kind: sum(1 for e in entries if e.kind == kind) for kind in said}
    if said != shown:
        raise FleetError("BAD_ARGUMENT", f"git's summary of the patch ({said}) differs from how it would be "
                                         f"shown ({shown})")


def file_rows(entries: list[PatchEntry]) -> tuple[list[dict], list[int]]:
    """Per file, in patch order: ({path, old_path, kind, added, deleted, hunks} rows, bytes of each entry)."""
    rows = [{"path": e.path, "old_path": e.old_path, "kind": e.kind, "added": e.insertions,
             "deleted": e.deletions, "hunks": e.hunks} for e in entries]
    return rows, [len(as_bytes(e.text)) for e in entries]
