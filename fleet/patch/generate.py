"""Structured file changes -> one git-style unified diff that `git apply` accepts.

Agents are bad at writing diffs by hand (wrong line counts, lost `\\ No newline` markers, CRLF damage);
they are good at saying what a file should contain. `generate_patch` takes that intent, reads the current
files from the work tree where needed, and writes the diff itself: deterministic (same input and files ->
same bytes), CRLF and missing final newlines preserved, names quoted as git quotes them. It never writes
to the repository; with `patch_file` it stores the entries in that file (see `fleet.patch.file`).

Change modes (every change is a dict with `mode` and `path`, a path relative to the repo root):
- `file_content`  {path, new_content}: the full new content of an existing file.
- `search_replace` {path, replacements: [{search, replace, line_hint?}]}: every search must match the
  current file exactly once, or once nearest to its 1-based `line_hint`; matches are found in the
  current content (so hints refer to its line numbers) and must not overlap.
- `create_file`   {path, new_content, new_mode?}: a file that does not exist yet (`new_mode` 100644|100755).
- `delete_file`   {path}: an existing file.
- `text_pair`     {path, old_text, new_text}: diff two texts given directly; `old_text` stands for the
  whole current file (the work tree is not read; `git_check` says whether it matches).
- `rename_file`   {path, new_path, new_content?}: move an existing file, optionally changing it.
- `chmod`         {path, new_mode, new_content?}: switch 100644 <-> 100755, optionally changing it.
"""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

from fleet.errors import FleetError
from fleet.git.patchtext import quote_text
from fleet.patch.file import MAX_PATCH_BYTES, WRITE_MODES, PatchEntry, git_apply_check, write_entries
from fleet.repo.paths import check_rel_path, resolve_in_repo, work_tree_root
from fleet.patch.textdiff import hunks, similarity, split_lines

MAX_CONTENT_BYTES = 4 * 1024 * 1024
MAX_CHANGES = 500
MAX_REPLACEMENTS = 200
MODES = {
    "file_content": ({"new_content"}, set()),
    "search_replace": ({"replacements"}, set()),
    "create_file": ({"new_content"}, {"new_mode"}),
    "delete_file": (set(), set()),
    "text_pair": ({"old_text", "new_text"}, set()),
    "rename_file": ({"new_path"}, {"new_content"}),
    "chmod": ({"new_mode"}, {"new_content"}),
}
FILE_MODES = ("100644", "100755")


def generate_patch(repo: str, changes: list[dict], context_lines: int = 3, patch_file: str | None = None,
                   write_mode: str = "append", check: bool = True) -> dict:
    """Turn `changes` into one unified diff against the work tree of `repo`.

    Input: `repo` (absolute path to the top of a git work tree), `changes` (list of change dicts, see the
    module docstring), `context_lines` (1..20, default 3), optional `patch_file` (absolute .patch/.diff
    path) with `write_mode` append|upsert|overwrite|create_only, `check` (run `git apply --check`).
    Output: `{patch, entries: [{path, old_path, kind, hunks, insertions, deletions, bytes}], unchanged:
    [paths whose change made no difference], files_changed, insertions, deletions, bytes,
    git_check: null | {ok, message}, patch_file: null | the report of `fleet.patch.file.write_entries`}`.
    """
    if not isinstance(context_lines, int) or isinstance(context_lines, bool) or not 1 <= context_lines <= 20:
        raise FleetError("BAD_ARGUMENT", "context_lines must be an integer from 1 to 20 "
                                         "(without context git apply needs --unidiff-zero)")
    if write_mode not in WRITE_MODES:
        raise FleetError("BAD_ARGUMENT", f"write_mode must be one of {', '.join(WRITE_MODES)}")
    if not isinstance(changes, list) or not changes:
        raise FleetError("BAD_ARGUMENT", "changes must be a non-empty list")
    if len(changes) > MAX_CHANGES:
        raise FleetError("LIMIT", f"at most {MAX_CHANGES} changes per call ({len(changes)} given)")
    root = work_tree_root(repo)
    _check_distinct_targets(changes)
    entries = [_entry(root, change, n, context_lines) for n, change in enumerate(changes)]
    made = [entry for entry in entries if entry.text]
    patch = "".join(entry.text for entry in made)
    data = patch.encode("utf-8")
    if len(data) > MAX_PATCH_BYTES:
        raise FleetError("LIMIT", f"the patch would be {len(data)} bytes; the cap is {MAX_PATCH_BYTES}")
    stored = write_entries(patch_file, entries, write_mode) if patch_file is not None else None
    return {
        "patch": patch,
        "entries": [entry.summary() for entry in made],
        "unchanged": [entry.path for entry in entries if not entry.text],
        "files_changed": len(made),
        "insertions": sum(entry.insertions for entry in made),
        "deletions": sum(entry.deletions for entry in made),
        "bytes": len(data),
        "git_check": git_apply_check(root, data) if check else None,
        "patch_file": stored,
    }


def _check_distinct_targets(changes: list[dict]) -> None:
    """One patch holds one entry per path: two changes to the same path (a rename holds both) are refused."""
    owner: dict[str, int] = {}
    for n, change in enumerate(changes):
        if not isinstance(change, dict):
            raise FleetError("BAD_ARGUMENT", f"changes[{n}] must be an object")
        for key in ("path", "new_path") if change.get("mode") == "rename_file" else ("path",):
            value = change.get(key)
            if isinstance(value, str) and owner.get(value) == n:
                raise FleetError("BAD_ARGUMENT", f"changes[{n}] renames {value!r} onto itself")
            if isinstance(value, str) and value in owner:
                raise FleetError("BAD_ARGUMENT", f"changes[{owner[value]}] and changes[{n}] both touch "
                                                 f"{value!r}; merge them into one change")
            if isinstance(value, str):
                owner[value] = n


def _entry(root: Path, change: dict, n: int, context: int) -> PatchEntry:
    where = f"changes[{n}]"
    mode = change.get("mode")
    if mode not in MODES:
        raise FleetError("BAD_ARGUMENT", f"{where}.mode must be one of {', '.join(MODES)} (got {mode!r})")
    required, optional = MODES[mode]
    missing = sorted((required | {"path"}) - change.keys())
    if missing:
        raise FleetError("BAD_ARGUMENT", f"{where} ({mode}) lacks {', '.join(missing)}")
    unknown = sorted(change.keys() - required - optional - {"mode", "path"})
    if unknown:
        allowed = ", ".join(sorted(required | optional | {"mode", "path"}))
        raise FleetError("BAD_ARGUMENT", f"{where} ({mode}) has unknown fields {', '.join(unknown)}; "
                                         f"allowed: {allowed}")
    path = check_rel_path(change["path"], f"{where}.path")
    if mode == "text_pair":
        resolve_in_repo(root, path, f"{where}.path")
        old = _content(change["old_text"], f"{where}.old_text")
        new = _content(change["new_text"], f"{where}.new_text")
        return _modify(path, old, new, context)
    if mode == "create_file":
        target = resolve_in_repo(root, path, f"{where}.path")
        if os.path.lexists(target):
            raise FleetError("CONFLICT", f"{where}: {path!r} already exists (use file_content to change it)")
        file_mode = _file_mode(change.get("new_mode", "100644"), f"{where}.new_mode")
        return _create(path, _content(change["new_content"], f"{where}.new_content"), file_mode, context)
    old, file_mode = _read_current(root, path, f"{where}.path")
    if mode == "file_content":
        return _modify(path, old, _content(change["new_content"], f"{where}.new_content"), context)
    if mode == "search_replace":
        return _modify(path, old, _replace_all(old, change["replacements"], path, where), context)
    if mode == "delete_file":
        return _delete(path, old, file_mode, context)
    new = _content(change["new_content"], f"{where}.new_content") if "new_content" in change else old
    if mode == "chmod":
        return _chmod(path, old, new, file_mode, _file_mode(change["new_mode"], f"{where}.new_mode"), context)
    new_path = check_rel_path(change["new_path"], f"{where}.new_path")
    target = resolve_in_repo(root, new_path, f"{where}.new_path")
    if os.path.lexists(target):
        raise FleetError("CONFLICT", f"{where}: rename target {new_path!r} already exists")
    return _rename(path, new_path, old, new, context)


# --- inputs --------------------------------------------------------------------------------------------

def _content(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise FleetError("BAD_ARGUMENT", f"{field} must be a string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise FleetError("BAD_ARGUMENT", f"{field} contains lone surrogates: it is not valid Unicode text") from None
    if size > MAX_CONTENT_BYTES:
        raise FleetError("LIMIT", f"{field} is {size} bytes; the cap is {MAX_CONTENT_BYTES}")
    if "\0" in value:
        raise FleetError("BAD_ARGUMENT", f"{field} contains NUL: binary content is not supported")
    return value


def _file_mode(value: object, field: str) -> str:
    if value not in FILE_MODES:
        raise FleetError("BAD_ARGUMENT", f"{field} must be 100644 or 100755 (got {value!r})")
    return str(value)


def _read_current(root: Path, path: str, field: str) -> tuple[str, str]:
    """(text, git mode) of an existing regular file in the work tree; refuses binary and non-UTF-8 files."""
    target = resolve_in_repo(root, path, field)
    try:
        info = target.lstat()
    except FileNotFoundError:
        raise FleetError("NOT_FOUND", f"{field}: {path!r} does not exist in the work tree") from None
    if not stat.S_ISREG(info.st_mode):
        raise FleetError("BAD_PATH", f"{field}: {path!r} is not a regular file")
    if info.st_size > MAX_CONTENT_BYTES:
        raise FleetError("LIMIT", f"{field}: {path!r} is {info.st_size} bytes; the cap is {MAX_CONTENT_BYTES}")
    data = target.read_bytes()
    if b"\0" in data:
        raise FleetError("BAD_ARGUMENT", f"{field}: {path!r} is binary (contains NUL); binary files are not supported")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FleetError("BAD_ARGUMENT", f"{field}: {path!r} is not UTF-8 text (byte {exc.start})") from None
    return text, "100755" if info.st_mode & stat.S_IXUSR else "100644"


# --- search / replace ----------------------------------------------------------------------------------

def _replace_all(text: str, replacements: object, path: str, where: str) -> str:
    """Apply every replacement, each located in the current `text`, from the last to the first."""
    if not isinstance(replacements, list) or not replacements:
        raise FleetError("BAD_ARGUMENT", f"{where}.replacements must be a non-empty list")
    if len(replacements) > MAX_REPLACEMENTS:
        raise FleetError("LIMIT", f"{where}: at most {MAX_REPLACEMENTS} replacements per file")
    spans: list[tuple[int, int, str, int]] = []
    for k, item in enumerate(replacements):
        field = f"{where}.replacements[{k}]"
        if not isinstance(item, dict) or not {"search", "replace"} <= item.keys() \
                or item.keys() - {"search", "replace", "line_hint"}:
            raise FleetError("BAD_ARGUMENT", f"{field} must be {{search, replace, line_hint?}}")
        search = _content(item["search"], f"{field}.search")
        replace = _content(item["replace"], f"{field}.replace")
        if not search:
            raise FleetError("BAD_ARGUMENT", f"{field}.search must not be empty")
        hint = item.get("line_hint")
        if hint is not None and (not isinstance(hint, int) or isinstance(hint, bool) or hint < 1):
            raise FleetError("BAD_ARGUMENT", f"{field}.line_hint must be a positive line number")
        start = _locate(text, search, hint, path, field)
        spans.append((start, start + len(search), replace, k))
    spans.sort()
    for (s1, e1, _, k1), (s2, _, _, k2) in zip(spans, spans[1:]):
        if s2 < e1:
            raise FleetError("BAD_ARGUMENT", f"{where}.replacements[{k1}] and [{k2}] overlap in {path!r} "
                                             f"(lines {_line_of(text, s1)} and {_line_of(text, s2)})")
    for start, end, replace, _ in reversed(spans):
        text = text[:start] + replace + text[end:]
    return text


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _locate(text: str, search: str, hint: int | None, path: str, field: str) -> int:
    """Offset of the one match of `search` (nearest `hint` when several); errors name the candidates."""
    starts = []
    at = text.find(search)
    while at != -1:
        starts.append(at)
        at = text.find(search, at + 1)
    if not starts:
        raise FleetError("NOT_FOUND", f"{field}.search not found in {path!r}{_near_misses(text, search)}")
    if len(starts) == 1:
        return starts[0]
    lines = [_line_of(text, s) for s in starts]
    if hint is not None:
        best = min(abs(line - hint) for line in lines)
        nearest = [s for s, line in zip(starts, lines) if abs(line - hint) == best]
        if len(nearest) == 1:
            return nearest[0]
        shown = sorted({line for line in lines if abs(line - hint) == best})
        raise FleetError("BAD_ARGUMENT", f"{field}.search matches {len(starts)} places in {path!r}; lines "
                                         f"{_join(shown)} are equally near line_hint {hint}")
    raise FleetError("BAD_ARGUMENT", f"{field}.search matches {len(starts)} places in {path!r} "
                                     f"(lines {_join(lines)}); pass line_hint to pick one")


def _join(numbers: list[int], cap: int = 20) -> str:
    shown = ", ".join(str(n) for n in numbers[:cap])
    return shown + (f" and {len(numbers) - cap} more" if len(numbers) > cap else "")


def _near_misses(text: str, search: str) -> str:
    """A hint for a failed search: the line ending mismatch, or the lines most like its first line."""
    if "\r\n" in text and "\n" in search and "\r\n" not in search:
        return "; the file uses CRLF line endings but the search text uses LF"
    first = next((line.strip() for line in search.split("\n") if line.strip()), "")
    lines = text.split("\n")
    if not first or len(lines) > 20000:
        return ""
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(first, stripped, n=3, cutoff=0.6)
    found = [f"line {n + 1}: {lines[n].strip()[:80]!r}" for n, line in enumerate(stripped) if line in close][:3]
    return "; closest candidates: " + ", ".join(found) if found else ""


# --- entries -------------------------------------------------------------------------------------------

def _file_line(marker: str, name: str | None) -> str:
    if name is None:
        return f"{marker} /dev/null\n"
    quoted = quote_text(name)
    # git ends a name holding a space with a tab, so readers do not mistake the end of the name.
    return f"{marker} {quoted}\t\n" if quoted == name and " " in name else f"{marker} {quoted}\n"


def _build(path: str, old_path: str | None, kind: str, extra: list[str], old: str, new: str,
           context: int, old_name: str | None, new_name: str | None) -> PatchEntry:
    parts = hunks(split_lines(old), split_lines(new), context)
    if not parts and not extra:
        return PatchEntry(path, old_path, kind, "", 0, 0, 0)
    text = f"diff --git {quote_text('a/' + (old_path or path))} {quote_text('b/' + path)}\n" + "".join(extra)
    if parts:
        text += _file_line("---", old_name) + _file_line("+++", new_name) + "".join(h.text() for h in parts)
    return PatchEntry(path, old_path, kind, text, len(parts),
                      sum(h.insertions for h in parts), sum(h.deletions for h in parts))


def _modify(path: str, old: str, new: str, context: int) -> PatchEntry:
    return _build(path, None, "modify", [], old, new, context, f"a/{path}", f"b/{path}")


def _create(path: str, new: str, mode: str, context: int) -> PatchEntry:
    return _build(path, None, "create", [f"new file mode {mode}\n"], "", new, context, None, f"b/{path}")


def _delete(path: str, old: str, mode: str, context: int) -> PatchEntry:
    return _build(path, None, "delete", [f"deleted file mode {mode}\n"], old, "", context, f"a/{path}", None)


def _chmod(path: str, old: str, new: str, old_mode: str, new_mode: str, context: int) -> PatchEntry:
    if old_mode == new_mode:
        return _modify(path, old, new, context)
    return _build(path, None, "chmod", [f"old mode {old_mode}\n", f"new mode {new_mode}\n"], old, new,
                  context, f"a/{path}", f"b/{path}")


def _rename(path: str, new_path: str, old: str, new: str, context: int) -> PatchEntry:
    score = similarity(split_lines(old), split_lines(new))
    extra = [f"similarity index {score}%\n", f"rename from {quote_text(path)}\n",
             f"rename to {quote_text(new_path)}\n"]
    return _build(new_path, path, "rename", extra, old, new, context, f"a/{path}", f"b/{new_path}")
