"""What a repository's own config names that git could run, found by reading its files (which runs nothing).

A repo's `.git/config` (and every file it pulls in with `include.path` / `includeIf.*.path`, and
`config.worktree`) can define filter and diff drivers: commands git runs during plain reads when an
attribute selects them. The runner (fleet/git/run.py) overrides every driver name found here; this module
finds the names without starting a process, so the scan's hot path pays a few `stat` calls per git call.

The parser follows git's own (config.c: `git_parse_source`, `get_base_var`, `get_value`, `parse_value`) so
it sees every section git sees. Conditional includes are followed whatever their condition (collecting a
name git would not use only disables one more driver). Anything it cannot read as git would — a syntax
error, an include that is not a regular file, a file over the size bound, includes nested too deep — is
an error, and the runner then refuses to run git at all: fail closed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from dulwich.config import ConfigFile

from fleet.git.files import MAX_CONFIG_BYTES, BrokenRepo, StrPath, parse_config, read_file

MAX_INCLUDE_DEPTH = 10
_SPACE = b" \t\n\r"                      # git's isspace (sane_ctype): no \v, no \f
_KEYCHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_ESCAPES = {ord("t"): 9, ord("b"): 8, ord("n"): 10, ord("\\"): 92, ord('"'): 34}
# Sections whose subsection names a driver git may run on a read, and the keys that hold the commands.
DRIVER_SECTIONS = (b"filter", b"diff")
# A file holding none of these words (section names are plain ASCII, matched case-insensitively, and cannot
# be spelled with escapes) defines no driver, include or object format: it need not be parsed. git itself
# still refuses it if it is malformed, so nothing runs either way.
_WORDS = (*DRIVER_SECTIONS, b"include", b"extensions")


class ConfigError(Exception):
    """A config file git would refuse, or one this reader will not open (not a regular file, too big)."""


Entry = tuple[bytes, bytes | None, bytes, bytes | None]   # (section, subsection, key, value)


def parse(data: bytes, origin: str = "config") -> list[Entry]:
    """Every `(section, subsection, key, value)` in git config text; sections and keys lowercased as git does.

    `value` is None for a bare key (`[core] bare`, git's boolean true).
    """
    simple = _parse_simple(data)
    return simple if simple is not None else _parse_full(data, origin)


def _parse_full(data: bytes, origin: str) -> list[Entry]:
    """The byte-by-byte parser, step for step as git's config.c."""
    entries: list[Entry] = []
    n = len(data)
    pos = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    section: bytes | None = None
    subsection: bytes | None = None

    def bad(why: str) -> ConfigError:
        line = data.count(b"\n", 0, min(pos, n)) + 1
        return ConfigError(f"bad config line {line} in {origin}: {why}")

    while pos < n:
        c = data[pos]
        if c in _SPACE:
            pos += 1
        elif c in b"#;":
            nl = data.find(b"\n", pos)
            pos = n if nl < 0 else nl + 1
        elif c == ord("["):
            pos, section, subsection = _header(data, pos + 1, bad)
        elif chr(c).isascii() and chr(c).isalpha():
            start = pos
            while pos < n and data[pos] in _KEYCHARS:
                pos += 1
            key = data[start:pos].lower()
            while pos < n and data[pos] in b" \t":
                pos += 1
            value = None
            if pos < n and data[pos] == ord("\r") and data[pos + 1:pos + 2] == b"\n":
                pos += 1
            if pos < n and data[pos] != ord("\n"):
                if data[pos] != ord("="):
                    raise bad("expected '=' after a key")
                pos, value = _value(data, pos + 1, bad)
                value = value.split(b"\0", 1)[0]       # git's C strings end a value at a NUL byte
            else:
                pos += 1
            entries.append((section or b"", subsection, key, value))   # git accepts a key before any section
        else:
            raise bad(f"unexpected byte {c:#04x}")
    return entries


# The shapes nearly every config line has (what git itself writes), read with one regex a line. A line in
# any other shape (quotes, escapes, continuations, tabs or NUL inside a value, CR, a BOM, a key before any
# section...) sends the whole file to the byte-by-byte parser above, which follows git's config.c.
_SIMPLE_LINE = re.compile(
    rb"[ \t]*(?:"
    rb"\[([A-Za-z0-9.-]+)(?:[ \t]+\"([^\"\\\n\r\0]*)\")?\]"                     # [section] / [section "sub"]
    rb"|([A-Za-z][A-Za-z0-9-]*)[ \t]*(?:=[ \t]*([^\"\\#;\n\r\t\0]*))?"             # key [= value]
    rb")?[ \t]*(?:[#;][^\r]*)?")


def _parse_simple(data: bytes) -> list[Entry] | None:
    """`parse` for a file of simple lines only; None when any line needs the full parser."""
    entries: list[Entry] = []
    section: bytes | None = None
    subsection: bytes | None = None
    match = _SIMPLE_LINE.fullmatch
    for line in data.split(b"\n"):
        m = match(line)
        if m is None:
            return None
        name, quoted, key, value = m.groups()
        if name is not None:
            if name.startswith(b".") or name.endswith(b".") or b".." in name:
                return None
            section, subsection = _split(name.lower() + b"." + quoted) if quoted is not None else _split(name.lower())
        elif key is not None:
            if section is None:
                return None
            # the value runs greedily to a comment or the end (a lazy one cost a try per byte): its trailing
            # spaces are git's whitespace, not the value's
            entries.append((section, subsection, key.lower(), None if value is None else value.rstrip(b" ")))
    return entries


def _header(data: bytes, pos: int, bad) -> tuple[int, bytes, bytes | None]:
    """`[section]`, `[section "sub"]` (sub case-sensitive, `\\` escapes any byte) or `[section.sub]`."""
    n = len(data)
    name = bytearray()
    while True:
        if pos >= n:
            raise bad("unterminated section header")
        c = data[pos]
        pos += 1
        if c == ord("]"):
            break
        if c in _SPACE:
            while pos < n and data[pos] in _SPACE:
                if data[pos] == ord("\n"):
                    raise bad("incomplete section header")
                pos += 1
            if c == ord("\n") or pos >= n or data[pos] != ord('"'):
                raise bad("expected '\"' in a section header")
            pos += 1
            sub = bytearray()
            while True:
                if pos >= n or data[pos] == ord("\n"):
                    raise bad("incomplete section header")
                c = data[pos]
                pos += 1
                if c == ord('"'):
                    break
                if c == ord("\\"):
                    if pos >= n or data[pos] == ord("\n"):
                        raise bad("incomplete section header")
                    c = data[pos]
                    pos += 1
                sub.append(c)
            if pos >= n or data[pos] != ord("]"):
                raise bad("expected ']' after a subsection")
            return pos + 1, *_split(bytes(name).lower() + b"." + bytes(sub))
        if c not in _KEYCHARS and c != ord("."):
            raise bad("bad character in a section name")
        name.append(c)
    if not name:
        raise bad("empty section name")
    return pos, *_split(bytes(name).lower())


def _split(prefix: bytes) -> tuple[bytes, bytes | None]:
    """`filter.a.b` -> (`filter`, `a.b`): git splits a variable at its first and last dots."""
    section, dot, sub = prefix.partition(b".")
    return section, (sub if dot else None)


def _value(data: bytes, pos: int, bad) -> tuple[int, bytes]:
    """A value after `=`: quotes, `\\` escapes, line continuations and trailing comments, as parse_value."""
    n = len(data)
    out = bytearray()
    quote = comment = False
    space = 0
    while True:
        if pos >= n:
            if quote:
                raise bad("unterminated quote")
            return pos, bytes(out)
        c = data[pos]
        pos += 1
        if c == ord("\r") and pos < n and data[pos] == ord("\n"):
            c = data[pos]
            pos += 1
        if c == ord("\n"):
            if quote:
                raise bad("unterminated quote")
            return pos, bytes(out)
        if comment:
            continue
        if c in _SPACE and not quote:
            if out:
                space += 1
            continue
        if not quote and c in b";#":
            comment = True
            continue
        out += b" " * space
        space = 0
        if c == ord("\\"):
            nxt = data[pos] if pos < n else ord("\n")
            pos += 1
            if nxt == ord("\r") and pos < n and data[pos] == ord("\n"):
                nxt = ord("\n")
                pos += 1
            if nxt == ord("\n"):
                continue
            if nxt not in _ESCAPES:
                raise bad("unknown escape in a value")
            out.append(_ESCAPES[nxt])
            continue
        if c == ord('"'):
            quote = not quote
            continue
        out.append(c)


def read_config_file(path: str, limit: int = MAX_CONFIG_BYTES) -> bytes | None:
    """A config file's (or gitfile's) bytes, None when it does not exist: fleet/git/files.py's bounded
    regular-file read, following links as git does. A FIFO, a device or a giant is a ConfigError."""
    try:
        return read_file(path, limit, path, follow=True)
    except BrokenRepo as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class RepoConfig:
    """What fleetdeck needs from a repo's config files: per driver section, each name and the keys set for
    it; and the object format."""

    drivers: dict[bytes, dict[bytes, frozenset[bytes]]]
    object_format: str
    files: tuple[str, ...]          # every file read (includes too), for the cache's staleness check


def read_repo_config(paths: list[str]) -> RepoConfig:
    """Parse the repo's config files and everything they include (conditional or not)."""
    drivers: dict[bytes, dict[bytes, set[bytes]]] = {s: {} for s in DRIVER_SECTIONS}
    object_format = "sha1"
    seen: list[str] = []

    def visit(path: str, depth: int) -> None:
        nonlocal object_format
        if depth > MAX_INCLUDE_DEPTH:
            raise ConfigError(f"{path}: includes nested deeper than {MAX_INCLUDE_DEPTH}")
        data = read_config_file(path)
        seen.append(path)
        if data is None or not any(word in data.lower() for word in _WORDS):
            return
        for section, sub, key, value in parse(data, path):
            if section in drivers and sub is not None:
                drivers[section].setdefault(sub, set()).add(key)
            elif section == b"extensions" and sub is None and key == b"objectformat" and value \
                    and value.lower() in (b"sha1", b"sha256"):   # it is written into a config of ours
                object_format = value.lower().decode("ascii")
            elif key == b"path" and value and ((section == b"include" and sub is None)
                                              or (section == b"includeif" and sub is not None)):
                visit(_include_path(value, path), depth + 1)

    for path in paths:
        visit(path, 0)
    # A name holding NUL is cut there by git's C strings into a key without a driver name: nothing to run.
    return RepoConfig({s: {n: frozenset(k) for n, k in names.items() if b"\0" not in n}
                       for s, names in drivers.items()}, object_format, tuple(seen))


def _include_path(value: bytes, including: str) -> str:
    """An include's target as git resolves it: `~` expanded, relative to the including file's folder."""
    target = os.fsdecode(value)
    if target.startswith("~"):
        target = os.path.expanduser(target)
    return os.path.join(os.path.dirname(including), target)


class Config:
    """A repository's config as fleetdeck's readers ask it (the calls they make of a dulwich ConfigFile: get,
    get_multivar, get_boolean, sections), over `parse`'s entries: the record reader's hot path, with no
    dulwich parse. Section names and keys match case-insensitively, subsections exactly, as in git; the last
    value of a key wins; a bare key is `true`.

    `plain`: the entries, in the file's order, when they are all of one file that includes none and has
    plain lines only (`_parse_simple`): what any git config parser reads from it, libgit2's too (the in-process
    status's eligibility check takes them for that level, fleet/repo/libstatus.py); else None."""

    def __init__(self, entries: list[Entry] = (), *, plain: bool = False) -> None:
        self._values: dict[tuple[bytes, ...], dict[bytes, list[bytes]]] = {}
        for section, sub, key, value in entries:
            name = (section,) if sub is None else (section, sub)
            self._values.setdefault(name, {}).setdefault(key, []).append(b"true" if value is None else value)
        self.plain: list[Entry] | None = entries if plain else None

    def _all(self, section: tuple[bytes, ...], key: bytes) -> list[bytes]:
        # Names are stored lowercased and callers nearly always ask in lowercase: try the name as given first
        # (a branch's upstream costs a few of these per branch of every repo in a scan).
        keys = self._values.get(section)
        if keys is None:
            keys = self._values.get((section[0].lower(), *section[1:]), {})
        values = keys.get(key) or keys.get(key.lower())
        if not values:
            raise KeyError(key)
        return values

    def get(self, section: tuple[bytes, ...], key: bytes) -> bytes:
        return self._all(section, key)[-1]

    def get_multivar(self, section: tuple[bytes, ...], key: bytes) -> list[bytes]:
        return list(self._all(section, key))

    def get_boolean(self, section: tuple[bytes, ...], key: bytes, default: bool | None = None) -> bool | None:
        """git's booleans: true/yes/on, false/no/off/empty, or an integer; ValueError for anything else."""
        try:
            value = self.get(section, key).lower()
        except KeyError:
            return default
        if value in (b"true", b"yes", b"on"):
            return True
        if value in (b"false", b"no", b"off", b""):
            return False
        try:
            return int(value) != 0
        except ValueError:
            raise ValueError(f"bad boolean config value {value!r}") from None

    def sections(self) -> list[tuple[bytes, ...]]:
        return list(self._values)


def read_config(commondir: StrPath, *, complete: bool = False) -> ConfigFile | Config:
    """The repository's own config file (branch upstreams, remotes, core.worktree), includes followed.

    Most of a scan's Python time went to parsing configs that hold none of these: unless `complete`, those
    are skipped unparsed (an empty config is returned). A file without includes is read by fleetdeck's own
    git-exact reader (`parse`: a regex a line for the usual shapes), far cheaper than dulwich.
    """
    data = read_file(os.path.join(commondir, "config"), MAX_CONFIG_BYTES, "config")
    if not data:
        return Config()
    lowered = data.lower()
    if not complete and not any(word in lowered for word in (b"[branch", b"[remote", b"[include", b"worktree")):
        return Config()
    if b"include" in lowered:  # dulwich follows include.path and evaluates includeIf conditions
        return parse_config(data, os.fspath(commondir))
    simple = _parse_simple(data)   # `parse`, knowing which of its readers read it
    if simple is not None:
        return Config(simple, plain=True)
    try:
        return Config(_parse_full(data, "config"))
    except ConfigError:
        raise BrokenRepo("config is malformed") from None
