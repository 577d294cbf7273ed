"""Patch files as ordered stores of per-path entries: parse, inspect, write, remove, validate.

An agent builds a patch over several calls; each call adds or replaces the entries for the paths it touched.
The file is re-parsed into entries (one per `diff --git` section, or per plain `---`/`+++` section) on every
write, so entries from elsewhere survive byte for byte, and it is replaced atomically (temp file in the same
directory, fsync, `os.replace`) under an exclusive lock on the directory so two writers never interleave.

Entries are bytes at heart: an entry for a Latin-1 or Shift-JIS file holds its lines in that encoding (that
is what `git apply` compares), so entry text is kept as the file's bytes decoded UTF-8 with
`surrogateescape` (`as_bytes` gives them back exactly); `shown` is the readable text for answers.

Public functions take and return JSON-shaped values (snake_case dicts) so CLI and MCP share them.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from fleet.errors import FleetError
from fleet.git.patchtext import hunk_header, quoted_end, unquote_path
from fleet.git.run import GitError, run_git
from fleet.repo.paths import work_tree_root
from fleet.repo.scope import check_rel_path
from fleet.patch.textdiff import split_lines

MAX_PATCH_BYTES = 16 * 1024 * 1024
WRITE_MODES = ("append", "upsert", "overwrite", "create_only")
PATCH_SUFFIXES = (".patch", ".diff")



class PatchInspected(TypedDict):
    patch_file: str
    entries: list[dict]
    entry_count: int
    duplicate_paths: list[str]
    insertions: int
    deletions: int
    bytes: int
    tool_policy_ok: bool


class PatchRemoved(TypedDict):
    patch_file: str
    removed: list[dict]
    removed_count: int
    entries_before: int
    entries_after: int


class PatchValidated(TypedDict):
    valid: bool
    entries: list[dict]
    entry_count: int
    total_hunks: int
    duplicate_paths: list[str]
    error: dict | None
    git_check: dict | None
    tool_policy_ok: bool


def as_bytes(text: str) -> bytes:
    """Patch text back to its exact bytes (non-UTF-8 bytes ride in it as surrogate escapes)."""
    return text.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class PatchEntry:
    """One file's section of a patch. `text` is exactly the bytes it occupies in the patch ("" = no change),
    as `as_bytes` reads them; `shown` is its readable form when the file's `encoding` is not UTF-8."""

    path: str
    old_path: str | None
    kind: str
    text: str
    hunks: int
    insertions: int
    deletions: int
    encoding: str = "utf-8"
    shown: str | None = None

    @property
    def paths(self) -> frozenset[str]:
        """Every path this entry occupies: a rename holds both its source and its target."""
        return frozenset({self.path} | ({self.old_path} if self.old_path else set()))

    def summary(self) -> dict:
        return {"path": self.path, "old_path": self.old_path, "kind": self.kind, "hunks": self.hunks,
                "insertions": self.insertions, "deletions": self.deletions,
                "bytes": len(as_bytes(self.text)), "encoding": self.encoding}


# --- parsing -------------------------------------------------------------------------------------------

def parse_patch(text: str) -> list[PatchEntry]:
    """Split a (multi-file) unified diff into entries; raise BAD_ARGUMENT/BAD_PATH naming the bad line.

    Accepts what `git diff` writes (git headers, renames, copies, mode changes, quoted names) and plain
    `---`/`+++` diffs. Refuses binary patches, combined (merge) diffs, stray text between entries, hunks
    whose bodies do not match their line counts, and paths that are absolute, escape with `..`, reach
    into `.git` or hold control characters.
    """
    lines = split_lines(text)
    entries: list[PatchEntry] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            entry, i = _parse_entry(lines, i, git=True)
            entries.append(entry)
        elif line.startswith(("diff --cc ", "diff --combined ")):
            raise _bad(i, "combined (merge) diffs are not supported")
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            entry, i = _parse_entry(lines, i, git=False)
            entries.append(entry)
        elif line.strip() == "":
            i += 1
        else:
            raise _bad(i, f"unexpected text outside a file entry: {line.rstrip()[:80]!r}")
    return entries


def _bad(index: int, message: str) -> FleetError:
    return FleetError("BAD_ARGUMENT", f"patch line {index + 1}: {message}")


def _parse_entry(lines: list[str], start: int, *, git: bool) -> tuple[PatchEntry, int]:
    i = start + 1 if git else start
    header: dict[str, str] = {}
    while git and i < len(lines) and not lines[i].startswith(("--- ", "@@ ", "diff ")):
        line = lines[i]
        if line.startswith(("Binary files ", "GIT binary patch")):
            raise _bad(i, "binary patches are not supported")
        key = _header_key(line)
        if key is None:
            break
        header[key] = line[len(key) + 1:].rstrip("\n")
        i += 1
    old_name = new_name = None
    if i < len(lines) and lines[i].startswith("--- "):
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise _bad(i, "'---' line without a following '+++' line")
        old_name, new_name = _file_name(lines[i][4:], i), _file_name(lines[i + 1][4:], i + 1)
        i += 2
    hunk_count = plus = minus = 0
    while i < len(lines) and lines[i].startswith("@@ "):
        i, added, removed = _parse_hunk(lines, i)
        hunk_count += 1
        plus += added
        minus += removed
    if (old_name or new_name) and not hunk_count:
        raise _bad(i, "file header without any hunk")
    if i < len(lines) and not (lines[i].startswith("diff ") or lines[i].strip() == ""
                               or (lines[i].startswith("--- ") and i + 1 < len(lines)
                                   and lines[i + 1].startswith("+++ "))):
        raise _bad(i, f"unexpected line in a file entry: {lines[i].rstrip()[:80]!r}")
    path, old_path, kind = _entry_paths(lines[start], header, old_name, new_name, git, start)
    text = "".join(lines[start:i])
    if not text.endswith("\n"):
        text += "\n"
    return PatchEntry(path, old_path, kind, text, hunk_count, plus, minus), i


_HEADER_KEYS = ("old mode", "new mode", "deleted file mode", "new file mode", "rename from", "rename to",
                "copy from", "copy to", "similarity index", "dissimilarity index", "index")


def _header_key(line: str) -> str | None:
    for key in _HEADER_KEYS:
        if line.startswith(key + " "):
            return key
    return None


def _entry_paths(first: str, header: dict[str, str], old_name: str | None, new_name: str | None,
                 git: bool, index: int) -> tuple[str, str | None, str]:
    """(path, old_path, kind) of an entry from its git header lines and `---`/`+++` names."""
    for key in ("old mode", "new mode", "deleted file mode", "new file mode"):
        if key in header and not re.fullmatch(r"1[0-7]{5}", header[key]):
            raise _bad(index, f"malformed '{key}' line")
    if "rename from" in header or "copy from" in header:
        verb = "rename" if "rename from" in header else "copy"
        if f"{verb} to" not in header:
            raise _bad(index, f"'{verb} from' without '{verb} to'")
        source = _checked(_unquote(header[f"{verb} from"], index), index)
        target = _checked(_unquote(header[f"{verb} to"], index), index)
        return target, source, verb
    if "new file mode" in header or (old_name is None and new_name is not None):
        kind = "create"
    elif "deleted file mode" in header or (new_name is None and old_name is not None):
        kind = "delete"
    elif "old mode" in header and "new mode" in header:
        kind = "chmod"
    else:
        kind = "modify"
    if old_name is None and new_name is None:
        if not git:
            raise _bad(index, "entry names no file")
        path = _git_names(first[len("diff --git "):].rstrip("\n"), index)
    else:
        path = new_name if new_name is not None else old_name
        if old_name is not None and new_name is not None and old_name != new_name:
            raise _bad(index, f"'---' names {old_name!r} but '+++' names {new_name!r} without a rename header")
    return _checked(path, index), None, kind


def _checked(path: str, index: int) -> str:
    if any("\udc80" <= ch <= "\udcff" for ch in path):
        raise FleetError("BAD_PATH", f"patch line {index + 1}: a path is not UTF-8")
    try:
        return check_rel_path(path, f"patch line {index + 1}: path")
    except FleetError as exc:
        raise FleetError("BAD_PATH", exc.message) from None


def _file_name(rest: str, index: int) -> str | None:
    """The repo path in a `---`/`+++` line (after the marker), without its first component; None for /dev/null."""
    rest = rest.rstrip("\n")
    if rest.startswith('"'):
        name = _unquote(rest, index)
    else:
        name = rest.split("\t", 1)[0]
    if name == "/dev/null":
        return None
    if name.startswith("/"):
        raise FleetError("BAD_PATH", f"patch line {index + 1}: {name!r} is an absolute path")
    if "/" not in name:
        raise _bad(index, f"file name {name!r} lacks the a/ or b/ prefix")
    return name.split("/", 1)[1]


def _git_names(rest: str, index: int) -> str:
    """The path of a `diff --git a/X b/X` line whose two names agree (entries without `---`/`+++`)."""
    if rest.startswith('"'):
        end = _quoted_end(rest, index)
        first = _unquote(rest[:end], index)
        second_raw = rest[end:].lstrip(" ")
        second = _unquote(second_raw, index) if second_raw.startswith('"') else second_raw
    else:
        half = (len(rest) - 1) // 2
        first, second = rest[:half], rest[half + 1:]
        if rest[half:half + 1] != " ":
            raise _bad(index, "cannot read the file names of this 'diff --git' line")
    if "/" not in first or "/" not in second or first.split("/", 1)[1] != second.split("/", 1)[1]:
        raise _bad(index, "the two names of this 'diff --git' line differ and no header says why")
    return first.split("/", 1)[1]


def _quoted_end(text: str, index: int) -> int:
    try:
        return quoted_end(text)
    except ValueError as exc:
        raise _bad(index, str(exc)) from None


def _unquote(text: str, index: int) -> str:
    """Undo git's C-style quoting of a path (`"a/sp\\"ace"`); unquoted text is returned as is."""
    try:
        return unquote_path(text)
    except ValueError as exc:
        raise _bad(index, str(exc)) from None


def _parse_hunk(lines: list[str], i: int) -> tuple[int, int, int]:
    header = hunk_header(lines[i])
    if not header:
        raise _bad(i, f"malformed hunk header {lines[i].rstrip()[:80]!r}")
    _, old_left, _, new_left = header
    header_at = i
    i += 1
    plus = minus = 0
    previous_was_line = False
    while old_left > 0 or new_left > 0 or (i < len(lines) and lines[i].startswith("\\") and previous_was_line):
        if i >= len(lines):
            raise _bad(header_at, f"hunk body ends early ({old_left} old and {new_left} new lines missing)")
        marker = lines[i][:1]
        if marker == "\\":
            if not previous_was_line:
                raise _bad(i, "'\\' marker not after a diff line")
            previous_was_line = False
            i += 1
            continue
        if marker in (" ", "\n"):
            old_left -= 1
            new_left -= 1
        elif marker == "-":
            old_left -= 1
            minus += 1
        elif marker == "+":
            new_left -= 1
            plus += 1
        else:
            raise _bad(i, f"unexpected line in hunk body: {lines[i].rstrip()[:80]!r}")
        if old_left < 0 or new_left < 0:
            raise _bad(header_at, "hunk body has more lines than its header counts")
        previous_was_line = True
        i += 1
    return i, plus, minus


# --- the store -----------------------------------------------------------------------------------------

def check_patch_file(patch_file: object) -> Path:
    """The patch file path if it is an absolute `.patch`/`.diff` path in an existing directory.

    The suffix rule keeps a write mode such as `overwrite` from replacing an arbitrary file (`~/.bashrc`).
    """
    if not isinstance(patch_file, (str, os.PathLike)) or not os.fspath(patch_file):
        raise FleetError("BAD_ARGUMENT", "patch_file must be a path")
    raw = os.fspath(patch_file)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise FleetError("BAD_PATH", f"patch_file {raw!r} contains control characters")
    path = Path(raw)
    if not path.is_absolute():
        raise FleetError("BAD_PATH", f"patch_file {raw!r} must be an absolute path")
    if not path.name.endswith(PATCH_SUFFIXES) or path.name in PATCH_SUFFIXES:
        raise FleetError("BAD_PATH", f"patch_file {raw!r} must end in .patch or .diff")
    if any(part.lower() == ".git" for part in path.parts) or ".." in path.parts:
        raise FleetError("BAD_PATH", f"patch_file {raw!r} must not contain '..' or a .git directory")
    if not path.parent.is_dir():
        raise FleetError("NOT_FOUND", f"directory of patch_file {raw!r} does not exist")
    if path.is_symlink():
        raise FleetError("BAD_PATH", f"patch_file {raw!r} is a symlink")
    if path.exists() and not path.is_file():
        raise FleetError("BAD_PATH", f"patch_file {raw!r} is not a regular file")
    return path


def read_patch_file(path: Path) -> list[PatchEntry]:
    """The entries of an existing patch file (NOT_FOUND when missing, LIMIT above 16 MiB)."""
    return parse_patch(_decode(_read_bytes(path), f"patch file {str(path)!r}"))


def _read_bytes(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_PATCH_BYTES + 1)
    except FileNotFoundError:
        raise FleetError("NOT_FOUND", f"patch file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise FleetError("BAD_PATH", f"cannot read patch file {str(path)!r}: {exc.strerror}") from None
    if len(data) > MAX_PATCH_BYTES:
        raise FleetError("LIMIT", f"patch file {str(path)!r} is larger than {MAX_PATCH_BYTES} bytes")
    return data


def _decode(data: bytes, what: str) -> str:
    """Patch bytes as text; bytes that are not UTF-8 (entries for Latin-1, Shift-JIS ... files) are kept as
    surrogate escapes so the file is written back byte for byte."""
    if b"\0" in data:
        raise FleetError("BAD_ARGUMENT", f"{what} contains NUL bytes (binary content is not supported)")
    return data.decode("utf-8", "surrogateescape")


class _DirLock:
    """An exclusive flock on the patch file's directory: read-modify-write cycles never interleave."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.fd = -1

    def __enter__(self) -> "_DirLock":
        self.fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _atomic_write(path: Path, data: bytes, *, exclusive: bool) -> None:
    """Write `data` to `path` via a synced temp file; `exclusive` fails (CONFLICT) if `path` appeared."""
    if len(data) > MAX_PATCH_BYTES:
        raise FleetError("LIMIT", f"patch file would be larger than {MAX_PATCH_BYTES} bytes")
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if exclusive:
            os.link(tmp, path)
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except FileExistsError:
        raise FleetError("CONFLICT", f"patch file {str(path)!r} already exists") from None
    except OSError as exc:
        raise FleetError("BAD_PATH", f"cannot write patch file {str(path)!r}: {exc.strerror}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_entries(patch_file: object, entries: list[PatchEntry], write_mode: str,
                  root: Path | None = None) -> dict:
    """Store `entries` (text "" = "this path has no diff") in `patch_file` with `write_mode` semantics.

    append: add entries, CONFLICT if a path is already held by an entry.
    upsert: replace the entry holding each path in place (or drop it when the new entry is empty), else add.
    overwrite: the file becomes exactly these entries. create_only: CONFLICT if the file exists.
    Returns `{patch_file, write_mode, added, replaced, removed (paths), added_entries, replaced_entries,
    removed_entries ([{path, index, old_index?, replaced_path?, reason?}] with positions in the file after
    and before the write), added_count, replaced_count, removed_count, entries_before (null when the old
    file could not be read), entries_after, written, warnings [{code, message}]}`; `written` is false when
    the file already held exactly these bytes. Warnings: OVERWROTE_UNREADABLE_PATCH (overwrite replaced a
    file that did not parse), POSSIBLE_PROJECT_ROOT_DIR_DRIFT (entries kept from before name files that
    do not exist under `root`: they were probably made against another root).
    """
    if write_mode not in WRITE_MODES:
        raise FleetError("BAD_ARGUMENT", f"write_mode must be one of {', '.join(WRITE_MODES)}")
    path = check_patch_file(patch_file)
    warnings: list[dict] = []
    with _DirLock(path.parent):
        exists = path.exists()
        if write_mode == "create_only" and exists:
            raise FleetError("CONFLICT", f"patch file {str(path)!r} already exists (write_mode create_only)")
        current = path.read_bytes() if exists else None
        before: list[PatchEntry] | None = read_patch_file(path) if exists and write_mode != "overwrite" else []
        if exists and write_mode == "overwrite":
            try:
                before = read_patch_file(path)
            except FleetError as exc:
                before = None
                warnings.append({"code": "OVERWROTE_UNREADABLE_PATCH",
                                 "message": f"replaced a patch file that did not parse: {exc.message}"})
        keep = before if write_mode in ("append", "upsert") else []
        after, report = _merge(keep or [], entries, write_mode)
        if write_mode == "overwrite":
            report["removed"] = [{"path": e.path, "old_index": n, "reason": "overwrite"}
                                 for n, e in enumerate(before or [])]
        drift = _drifted(keep or [], root)
        if drift:
            warnings.append({"code": "POSSIBLE_PROJECT_ROOT_DIR_DRIFT",
                             "message": f"{len(drift)} entries kept in the patch file name files that do not exist "
                                        f"under {str(root)!r} (e.g. {drift[0]!r}): they may have been made "
                                        "against another project root"})
        data = as_bytes("".join(entry.text for entry in after))
        written = current != data
        if written:
            _atomic_write(path, data, exclusive=write_mode == "create_only")
    names = {kind: [r["path"] for r in rows] for kind, rows in report.items()}
    return {"patch_file": str(path), "write_mode": write_mode, **names,
            "added_entries": report["added"], "replaced_entries": report["replaced"],
            "removed_entries": report["removed"], "added_count": len(report["added"]),
            "replaced_count": len(report["replaced"]), "removed_count": len(report["removed"]),
            "entries_before": None if before is None else len(before), "entries_after": len(after),
            "written": written, "warnings": warnings}


def _drifted(entries: list[PatchEntry], root: Path | None) -> list[str]:
    """Paths that entries kept from before expect to exist (they modify, delete or move them) but that do
    not exist under `root`."""
    if root is None:
        return []
    return [e.old_path or e.path for e in entries
            if e.kind != "create" and not os.path.lexists(root / (e.old_path or e.path))]


def _merge(before: list[PatchEntry], entries: list[PatchEntry],
           write_mode: str) -> tuple[list[PatchEntry], dict[str, list[dict]]]:
    """The entries after the write, and what happened to each: `added` / `replaced` / `removed` rows."""
    after = list(before)
    slots = list(range(len(before)))  # each entry's index in the file before (None: new)
    report: dict[str, list[dict]] = {"added": [], "replaced": [], "removed": []}
    for entry in entries:
        holders = [n for n, old in enumerate(after) if old.paths & entry.paths]
        if write_mode == "append" and holders and entry.text:
            clash = sorted(after[holders[0]].paths & entry.paths)[0]
            raise FleetError("CONFLICT", f"entry #{holders[0]} already holds {clash!r} "
                                         "(use write_mode upsert to replace it)")
        if write_mode == "upsert" and len(holders) > 1:
            raise FleetError("CONFLICT", f"entries {', '.join('#' + str(n) for n in holders)} all hold paths of "
                                         f"{entry.path!r}; remove some first")
        if write_mode == "upsert" and holders:
            n = holders[0]
            old = after[n]
            if entry.text:
                after[n] = entry
                row = {"path": entry.path, "_entry": id(entry), "old_index": slots[n]}
                if old.path != entry.path:
                    row["replaced_path"] = old.path
                report["replaced"].append(row)
            else:
                after.pop(n)
                report["removed"].append({"path": old.path, "old_index": slots.pop(n),
                                          "reason": "empty_diff_upsert"})
        elif entry.text:
            after.append(entry)
            slots.append(None)
            report["added"].append({"path": entry.path, "_entry": id(entry)})
    position = {id(e): n for n, e in enumerate(after)}
    for row in report["replaced"] + report["added"]:
        row["index"] = position[row.pop("_entry")]  # where it ended up, after later removals
    return after, report


# --- the tools -----------------------------------------------------------------------------------------

def _listing(entries: list[PatchEntry]) -> list[dict]:
    return [{"index": n, **entry.summary()} for n, entry in enumerate(entries)]


def tool_policy_ok(entries: list[PatchEntry]) -> bool:
    """Could patch.generate have written these entries? They parsed (so: no binary patch, combined diff,
    unsafe path or miscounted hunk), there is at least one, and no path is held by two entries."""
    return bool(entries) and not _duplicates(entries)


def _duplicates(entries: list[PatchEntry]) -> list[str]:
    seen: set[str] = set()
    dup: set[str] = set()
    for entry in entries:
        dup |= seen & entry.paths
        seen |= entry.paths
    return sorted(dup)


def inspect_patch(patch_file: str) -> PatchInspected:
    """List a patch file's entries.

    Input: `patch_file` (absolute path to a .patch/.diff file).
    Output: `{patch_file, entries: [{index, path, old_path, kind, hunks, insertions, deletions, bytes}],
    entry_count, duplicate_paths, insertions, deletions, bytes}`; `kind` is one of modify, create, delete,
    rename, copy, chmod; `old_path` is set for renames and copies; `duplicate_paths` lists paths held by
    more than one entry (git would apply them in order; upsert refuses to pick one).
    """
    path = check_patch_file(patch_file)
    entries = read_patch_file(path)
    return {"patch_file": str(path), "entries": _listing(entries), "entry_count": len(entries),
            "duplicate_paths": _duplicates(entries),
            "insertions": sum(e.insertions for e in entries), "deletions": sum(e.deletions for e in entries),
            "bytes": sum(len(as_bytes(e.text)) for e in entries), "tool_policy_ok": tool_policy_ok(entries)}


def remove_patch_entries(patch_file: str, paths: list[str] | None = None,
                         indices: list[int] | None = None) -> PatchRemoved:
    """Drop entries from a patch file by path (every entry holding it) and/or by 0-based index.

    Output: `{patch_file, removed: [entry summaries with their former index], removed_count,
    entries_before, entries_after}`. A path no entry holds or an index out of range is NOT_FOUND and
    nothing is written.
    """
    if not paths and not indices:
        raise FleetError("BAD_ARGUMENT", "give paths and/or indices of the entries to remove")
    for value in paths or []:
        check_rel_path(value)
    if any(not isinstance(n, int) or isinstance(n, bool) for n in indices or []):
        raise FleetError("BAD_ARGUMENT", "indices must be integers")
    path = check_patch_file(patch_file)
    with _DirLock(path.parent):
        entries = read_patch_file(path)
        doomed = set()
        for n in indices or []:
            if not 0 <= n < len(entries):
                raise FleetError("NOT_FOUND", f"no entry #{n}: the patch file has {len(entries)} entries")
            doomed.add(n)
        for value in paths or []:
            holders = {n for n, entry in enumerate(entries) if value in entry.paths}
            if not holders:
                raise FleetError("NOT_FOUND", f"no entry holds {value!r}")
            doomed |= holders
        keep = [entry for n, entry in enumerate(entries) if n not in doomed]
        _atomic_write(path, as_bytes("".join(entry.text for entry in keep)), exclusive=False)
    return {"patch_file": str(path), "removed": [row for row in _listing(entries) if row["index"] in doomed],
            "removed_count": len(doomed), "entries_before": len(entries), "entries_after": len(keep)}


def git_apply_check(root: Path, patch: bytes) -> dict:
    """`git apply --check` of `patch` (on stdin) against the work tree at `root`; never writes anything.

    Output: `{ok, message}`; `message` is git's first complaint when it refuses the patch.
    """
    if not patch:
        return {"ok": True, "message": None}
    try:
        result = run_git(root, ["apply", "--check", "--whitespace=nowarn", "-"], input_bytes=patch,
                         check=False, timeout=30, max_bytes=1024 * 1024)
    except GitError as exc:
        raise FleetError.from_git(exc) from exc
    if result.returncode == 0:
        return {"ok": True, "message": None}
    return {"ok": False, "message": result.stderr.strip()[:4000] or f"git apply exited {result.returncode}"}


def validate_patch(patch: str | None = None, patch_file: str | None = None, repo: str | None = None) -> PatchValidated:
    """Check that a patch parses and, given `repo`, that `git apply --check` accepts it there.

    Input: exactly one of `patch` (the text) or `patch_file` (absolute path); optional `repo` (absolute
    path to the top of a git work tree). Output: `{valid, entries: [...as inspect_patch], entry_count,
    total_hunks, duplicate_paths, error: null | {code, message}, git_check: null | {ok, message},
    tool_policy_ok (see `tool_policy_ok`)}`. A patch that does not parse is an answer (`valid: false` with `error`), not a failure.
    """
    if (patch is None) == (patch_file is None):
        raise FleetError("BAD_ARGUMENT", "give exactly one of patch or patch_file")
    root = work_tree_root(repo) if repo is not None else None
    answer: dict = {"valid": False, "entries": [], "entry_count": 0, "total_hunks": 0, "duplicate_paths": [],
                    "error": None, "git_check": None, "tool_policy_ok": False}
    if patch_file is not None:
        data = _read_bytes(check_patch_file(patch_file))
    elif not isinstance(patch, str):
        raise FleetError("BAD_ARGUMENT", "patch must be a string")
    else:
        data = patch.encode("utf-8", "surrogatepass")
        if len(data) > MAX_PATCH_BYTES:
            raise FleetError("LIMIT", f"patch is larger than {MAX_PATCH_BYTES} bytes")
    try:
        entries = parse_patch(_decode(data, "patch"))
        if not entries:
            raise FleetError("BAD_ARGUMENT", "the patch holds no file entries")
    except FleetError as exc:
        answer["error"] = exc.as_dict()
        return answer
    answer.update(entries=_listing(entries), entry_count=len(entries),
                  total_hunks=sum(e.hunks for e in entries), duplicate_paths=_duplicates(entries),
                  tool_policy_ok=tool_policy_ok(entries))
    if root is not None:
        answer["git_check"] = git_apply_check(root, as_bytes("".join(e.text for e in entries)))
    answer["valid"] = answer["git_check"] is None or answer["git_check"]["ok"]
    return answer
