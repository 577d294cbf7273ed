"""Structured file changes -> one git-style unified diff that `git apply` accepts.

Agents are bad at writing diffs by hand (wrong line counts, lost `\\ No newline` markers, CRLF damage);
they are good at saying what a file should contain. `generate_patch` takes that intent, reads the current
files from the work tree where needed, and writes the diff itself: deterministic (same input and files ->
same bytes), CRLF and missing final newlines preserved, names quoted as git quotes them. It never writes
to the repository; with `patch_file` it stores the entries in that file (see `fleet.patch.file`).

Change modes (every change is a dict with `mode` and `path` — or `file_path`, uni-diff-patch's name for
it — a path relative to the root, or absolute inside it; optional `encoding` names the file's encoding
(default utf-8; Latin-1, cp1252, Shift-JIS, EUC-JP, GBK ... any encoding that writes a line break as the
single byte LF): the file is read, and its entry written, in that encoding):
- `file_content`  {path, new_content}: the full new content of an existing file.
- `search_replace` {path, replacements: [{search, replace, line_hint?}]}: every search must match the
  current file exactly once, or once nearest to its 1-based `line_hint`; matches are found in the
  current content (so hints refer to its line numbers) and must not overlap.
- `create_file`   {path, new_content, new_mode?}: a file that does not exist yet (`new_mode` 100644|100755).
- `delete_file`   {path}: an existing file.
- `text_pair`     {path, old_text, new_text}: diff two texts given directly; `old_text` stands for the
  whole current file (the work tree is not read; `git_check` says whether it matches).
- `rename_file`   {path, new_path, new_content?}: move an existing file, optionally changing it.
- `chmod`         {path, new_mode, old_mode?, new_content?}: switch 100644 <-> 100755, optionally changing it
  (`old_mode`, when given, must be the file's mode now).

The root is a git work tree, or (from the CLI) a plain folder; `text_pair` changes need none at all: their
path is only a name in the patch (no file is read, nothing is checked).
"""

from __future__ import annotations

import codecs
import difflib
import os
import stat
from pathlib import Path
from typing import TypedDict

from fleet.errors import FleetError
from fleet.git.patchtext import quote_text
from fleet.patch.file import MAX_PATCH_BYTES, WRITE_MODES, PatchEntry, as_bytes, git_apply_check, write_entries
from fleet.repo.paths import resolve_in_repo, work_tree_root
from fleet.repo.scope import check_rel_path
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
    "chmod": ({"new_mode"}, {"new_content", "old_mode"}),
}
COMMON = {"mode", "path", "encoding"}
FILE_MODES = ("100644", "100755")


class PatchGenerated(TypedDict):
    patch: str
    entries: list[dict]
    unchanged: list[str]
    files_changed: int
    insertions: int
    deletions: int
    bytes: int
    git_check: dict | None
    patch_file: dict | None


def generate_patch(repo: str | None, changes: list[dict], context_lines: int = 3, patch_file: str | None = None,
                   write_mode: str = "append", check: bool = True, plain_folder: bool = False,
                   with_bytes: bool = False) -> PatchGenerated:
    """Turn `changes` into one unified diff against the work tree of `repo`.

    Input: `repo` (absolute path to the top of a git work tree; None when every change is a text_pair;
    with `plain_folder` any folder will do), `changes` (list of change dicts, see the module docstring),
    `context_lines` (1..20, default 3), optional `patch_file` (absolute .patch/.diff path) with
    `write_mode` append|upsert|overwrite|create_only, `check` (run `git apply --check`).
    Output: `{patch, entries: [{path, old_path, kind, hunks, insertions, deletions, bytes, encoding}],
    unchanged: [paths whose change made no difference], files_changed, insertions, deletions, bytes,
    git_check: null | {ok, message}, patch_file: null | the report of `fleet.patch.file.write_entries`}`.
    `patch` is the readable text; an entry in another `encoding` is written to the patch file, counted
    in `bytes` and checked with git in that encoding (`with_bytes` adds those exact bytes as `patch_bytes`).
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
    changes = [_normalized(change, n) for n, change in enumerate(changes)]
    root = _root(repo, plain_folder, changes)
    changes = [_relative(change, n, root) for n, change in enumerate(changes)]
    _check_distinct_targets(changes)
    entries = [_entry(root, change, n, context_lines) for n, change in enumerate(changes)]
    made = [entry for entry in entries if entry.text]
    patch = "".join(entry.shown or entry.text for entry in made)
    data = as_bytes("".join(entry.text for entry in made))
    if len(data) > MAX_PATCH_BYTES:
        raise FleetError("LIMIT", f"the patch would be {len(data)} bytes; the cap is {MAX_PATCH_BYTES}")
    stored = write_entries(patch_file, entries, write_mode, root) if patch_file is not None else None
    return {
        "patch": patch,
        "entries": [entry.summary() for entry in made],
        "unchanged": [entry.path for entry in entries if not entry.text],
        "files_changed": len(made),
        "insertions": sum(entry.insertions for entry in made),
        "deletions": sum(entry.deletions for entry in made),
        "bytes": len(data),
        "git_check": git_apply_check(root, data) if check and root is not None else None,
        "patch_file": stored,
        **({"patch_bytes": data} if with_bytes else {}),
    }


def _normalized(change: object, n: int) -> dict:
    """`file_path` read as `path` (uni-diff-patch's spelling; both at once must agree)."""
    if not isinstance(change, dict):
        raise FleetError("BAD_ARGUMENT", f"changes[{n}] must be an object")
    if "file_path" not in change:
        return change
    change = dict(change)
    alias = change.pop("file_path")
    if "path" in change and change["path"] != alias:
        raise FleetError("BAD_ARGUMENT", f"changes[{n}] has both path and file_path, and they differ")
    change["path"] = alias
    return change


def _root(repo: str | None, plain_folder: bool, changes: list[dict]) -> Path | None:
    """The folder changes are relative to: the top of a git work tree, a plain folder (CLI), or none when
    every change is a text_pair and no repo was given."""
    if repo is None:
        needing = [n for n, c in enumerate(changes) if c.get("mode") != "text_pair"]
        if needing:
            raise FleetError("BAD_ARGUMENT", f"changes[{needing[0]}] ({changes[needing[0]].get('mode')}) reads a "
                                             "file: give the repository (only text_pair changes need none)")
        return None
    try:
        return work_tree_root(repo)
    except FleetError as exc:
        folder = Path(os.path.realpath(repo)) if isinstance(repo, str) else None
        if plain_folder and exc.code == "BAD_ARGUMENT" and folder is not None and folder.is_dir():
            return folder
        raise


def _relative(change: dict, n: int, root: Path | None) -> dict:
    """An absolute `path`/`new_path` inside the root made relative to it (outside: BAD_PATH)."""
    out = change
    for key in ("path", "new_path"):
        value = change.get(key)
        if isinstance(value, str) and os.path.isabs(value):
            if root is None:
                raise FleetError("BAD_PATH", f"changes[{n}].{key} is absolute but there is no project root")
            real = os.path.realpath(value)
            if os.path.commonpath([real, str(root)]) != str(root) or real == str(root):
                raise FleetError("BAD_PATH", f"changes[{n}].{key} {value!r} is outside the project root {str(root)!r}")
            out = {**out, key: os.path.relpath(real, root)}
    return out


def _encoding(value: object, field: str) -> str:
    """A codec name git can apply text patches in: a line break must be the single byte LF and no
    character may contain NUL (UTF-16 and UTF-32 files are binary to git)."""
    if not isinstance(value, str) or not value or len(value) > 64:
        raise FleetError("BAD_ARGUMENT", f"{field} must be an encoding name such as utf-8, latin-1, shift_jis")
    try:
        name = codecs.lookup(value).name
    except LookupError:
        raise FleetError("BAD_ARGUMENT", f"{field}: unknown encoding {value!r}") from None
    try:
        ascii_safe = "\n".encode(name) == b"\n" and b"\0" not in "a-@ ".encode(name)
    except (UnicodeError, LookupError):
        ascii_safe = False
    if not ascii_safe or name in ("utf-7",):
        raise FleetError("BAD_ARGUMENT", f"{field}: {value!r} cannot be patched as text (its line break is not "
                                         "the byte LF or its characters hold NUL bytes; git treats such files "
                                         "as binary)")
    return name


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
    unknown = sorted(change.keys() - required - optional - COMMON)
    if unknown:
        allowed = ", ".join(sorted(required | optional | COMMON))
        raise FleetError("BAD_ARGUMENT", f"{where} ({mode}) has unknown fields {', '.join(unknown)}; "
                                         f"allowed: {allowed}")
    path = check_rel_path(change["path"], f"{where}.path")
    enc = _encoding(change.get("encoding", "utf-8"), f"{where}.encoding")
    if mode == "text_pair":
        if root is not None:
            resolve_in_repo(root, path, f"{where}.path")
        old = _content(change["old_text"], f"{where}.old_text")
        new = _content(change["new_text"], f"{where}.new_text")
        return _encoded(_modify(path, old, new, context), enc)
    assert root is not None  # _root refuses other modes without one
    if mode == "create_file":
        target = resolve_in_repo(root, path, f"{where}.path")
        if os.path.lexists(target):
            raise FleetError("CONFLICT", f"{where}: {path!r} already exists (use file_content to change it)")
        file_mode = _file_mode(change.get("new_mode", "100644"), f"{where}.new_mode")
        return _encoded(_create(path, _content(change["new_content"], f"{where}.new_content"), file_mode, context),
                        enc)
    old, file_mode = _read_current(root, path, f"{where}.path", enc)
    if mode == "file_content":
        return _encoded(_modify(path, old, _content(change["new_content"], f"{where}.new_content"), context), enc)
    if mode == "search_replace":
        return _encoded(_modify(path, old, _replace_all(old, change["replacements"], path, where), context), enc)
    if mode == "delete_file":
        return _encoded(_delete(path, old, file_mode, context), enc)
    new = _content(change["new_content"], f"{where}.new_content") if "new_content" in change else old
    if mode == "chmod":
        if "old_mode" in change and _file_mode(change["old_mode"], f"{where}.old_mode") != file_mode:
            raise FleetError("CONFLICT", f"{where}: {path!r} has mode {file_mode}, not old_mode {change['old_mode']}")
        return _encoded(_chmod(path, old, new, file_mode, _file_mode(change["new_mode"], f"{where}.new_mode"),
                               context), enc)
    new_path = check_rel_path(change["new_path"], f"{where}.new_path")
    target = resolve_in_repo(root, new_path, f"{where}.new_path")
    if os.path.lexists(target):
        raise FleetError("CONFLICT", f"{where}: rename target {new_path!r} already exists")
    return _encoded(_rename(path, new_path, old, new, context), enc)


def _encoded(entry: PatchEntry, encoding: str) -> PatchEntry:
    """`entry` with its hunk lines in the file's encoding (headers, paths and hunk headers stay UTF-8/ASCII,
    as git writes them); a UTF-8 entry is returned as it is."""
    if encoding == "utf-8" or not entry.text:
        return entry
    head, marker, body = entry.text.partition("\n@@ ")
    try:
        data = (head + marker).encode("utf-8") + body.encode(encoding) if marker else entry.text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FleetError("BAD_ARGUMENT", f"{entry.path!r}: the new text holds {exc.object[exc.start]!r}, which "
                                         f"{encoding} cannot write") from None
    return PatchEntry(entry.path, entry.old_path, entry.kind, data.decode("utf-8", "surrogateescape"), entry.hunks,
                      entry.insertions, entry.deletions, encoding, entry.text)


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


def _read_current(root: Path, path: str, field: str, encoding: str = "utf-8") -> tuple[str, str]:
    """(text, git mode) of an existing regular file in the work tree, decoded from `encoding`; refuses
    binary files and bytes that are not in that encoding."""
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
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        hint = " (pass its encoding, e.g. latin-1 or shift_jis)" if encoding == "utf-8" else ""
        shown = "UTF-8" if encoding == "utf-8" else encoding
        raise FleetError("BAD_ARGUMENT", f"{field}: {path!r} is not {shown} text (byte {exc.start}){hint}") from None
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
