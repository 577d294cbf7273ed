"""Which working-tree paths an operation may write, and what of the person's lies in their way.

Git overwrites ignored files without asking (checkout, merge, every reset that updates files), and a hard
reset overwrites untracked ones too; a patch applies to any file, tracked or not. So a restore point cannot
save only what `git status` lists: each op names the paths it may create, change or delete (`Plan.writes`,
computed from the op itself: the paths that differ between two trees, a patch's paths), and the restore
point saves whatever is at each of them, a file in the way of a folder and a folder in the way of a file
included. The same comparison gives the preview's `changes_files`, with the files git would overwrite
marked `ignored` or `untracked`.
"""

from __future__ import annotations

import os
import stat

from fleet.errors import FleetError
from fleet.git.run import GitError, run, run_git

MAX_WRITES = 20000
SHOWN = 200
_CHANGE = {"A": "added", "D": "deleted", "M": "modified", "T": "type_changed"}


def _paths(raw: bytes) -> list[str]:
    return [os.fsdecode(p) for p in raw.split(b"\0") if p]


def tree_changes(repo: str, old: str | None, new: str) -> list[tuple[str, str]]:
    """[(change, path)] between two commits (or from nothing, when `old` is None), renames as delete + add."""
    if old is None:
        return [("added", p) for p in _paths(run(repo, ["ls-tree", "-r", "-z", "--name-only", new, "--"]).stdout)]
    fields = run(repo, ["diff-tree", "-r", "--no-renames", "--name-status", "-z", old, new, "--"]).stdout.split(b"\0")
    return [(_CHANGE.get(os.fsdecode(kind)[:1], "modified"), os.fsdecode(path))
            for kind, path in zip(fields[::2], fields[1::2]) if path]


def commits_paths(repo: str, exclude: str, include: str) -> list[str]:
    """Every path any commit in exclude..include touches (a rebase writes each of them on its way)."""
    raw = run(repo, ["log", "--format=", "--name-only", "--no-renames", "-z", include, f"^{exclude}", "--"]).stdout
    return list(dict.fromkeys(p.strip("\n") for p in _paths(raw) if p.strip("\n")))


def _kind(full: str) -> str | None:
    try:
        mode = os.lstat(full).st_mode
    except FileNotFoundError:
        return None
    return "dir" if stat.S_ISDIR(mode) else "other"


def expand(repo: str, paths: list[str]) -> list[str]:
    """`paths` plus whatever git would remove to write them: a file (or symlink) where one of their folders
    goes, and everything inside a real folder standing where a file goes (nested repositories left out)."""
    out: dict[str, None] = {}
    for rel in paths:
        out[rel] = None
        parts = rel.split("/")
        for n in range(1, len(parts)):
            prefix = "/".join(parts[:n])
            kind = _kind(os.path.join(repo, prefix))
            if kind is None:
                break
            if kind == "other":
                out[prefix] = None
                break
        full = os.path.join(repo, rel)
        if _kind(full) == "dir":
            for dirpath, dirnames, filenames in os.walk(full):
                dirnames[:] = [d for d in dirnames if not os.path.lexists(os.path.join(dirpath, d, ".git"))]
                base = os.path.relpath(dirpath, repo).replace(os.sep, "/")
                out[base] = None
                for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                    out[f"{base}/{name}"] = None
        if len(out) > MAX_WRITES:
            raise FleetError("LIMIT", f"the operation may write more than {MAX_WRITES} paths: a restore point "
                                      "cannot hold them")
    return list(out)


def _in_the_way(repo: str, path: str) -> str | None:
    """The existing entry git would remove or overwrite to write `path`: itself, or a non-folder on its way."""
    parts = path.split("/")
    for n in range(1, len(parts) + 1):
        prefix = "/".join(parts[:n])
        kind = _kind(os.path.join(repo, prefix))
        if kind is None:
            return None
        if kind == "other" or n == len(parts):
            return prefix
    return None


def _ignored(repo: str, paths: list[str]) -> set[str]:
    """The paths .gitignore, .git/info/exclude or core.excludesFile ignore (check-ignore takes no literal
    pathspec flag: the paths go on its stdin, which it reads as plain paths)."""
    try:
        found = run_git(repo, ["check-ignore", "-z", "--stdin", "--no-index"], ok_codes=(0, 1),
                        input_bytes=b"".join(os.fsencode(p) + b"\0" for p in paths)).stdout
    except GitError as exc:
        raise FleetError.from_git(exc) from exc
    return set(_paths(found))


def changes_files(repo: str, changes: list[tuple[str, str]]) -> dict:
    """The preview's list of files a tree change writes, each marked with what it overwrites that git does not
    track: {"path", "change", "overwrites": "ignored" | "untracked" | None}, capped, with counts."""
    way = {p: w for c, p in changes if c != "deleted" for w in [_in_the_way(repo, p)] if w}
    tracked: set[str] = set()
    ignored: set[str] = set()
    if way:
        names = sorted(set(way.values()))
        listed = run(repo, ["ls-files", "-z", "--cached", "--", *names]).stdout
        tracked = set(_paths(listed))
        loose = [p for p in names if p not in tracked]
        if loose:
            ignored = _ignored(repo, loose)
    items = []
    for change, path in changes:
        hit = way.get(path)
        mark = None if hit is None or hit in tracked else ("ignored" if hit in ignored else "untracked")
        items.append({"path": path, "change": change, "overwrites": mark})
    marked = [i for i in items if i["overwrites"]]
    shown = (marked + [i for i in items if not i["overwrites"]])[:SHOWN]
    return {"changes_files": shown, "changes_files_count": len(items), "changes_overwrite_count": len(marked),
            "changes_files_truncated": len(items) > SHOWN}
