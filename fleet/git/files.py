"""Cheap metadata straight from a git dir's files: HEAD, refs, upstream config, reflogs, worktrees, markers.

These reads cost microseconds where a git subprocess costs milliseconds, and they never touch the index
or take a lock. Everything that must match git byte for byte (status, ahead/behind) goes to the git CLI.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from dulwich.config import ConfigFile

if TYPE_CHECKING:
    from fleet.git.config import Config
    from fleet.git.mark import Walked

ZERO_OID = "0" * 40
StrPath = str | os.PathLike[str]
_SHA_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")

# Size bounds for the files fleetdeck reads itself: a hostile repository can make any of them endless
# (a FIFO, a link to /dev/zero) or huge (a sparse multi-GB file), so each read is bounded by its kind.
MAX_POINTER_BYTES = 64 * 1024        # HEAD, a loose ref, a `.git` file, commondir, worktree gitdir/locked, markers
MAX_PACKED_REFS_BYTES = 256 << 20    # packed-refs (a million refs is about 100 MB)
MAX_CONFIG_BYTES = 4 << 20           # a repo's config, each file it includes, config.worktree, .gitmodules
REFLOG_STEP_BYTES = 16 << 20         # the most of one reflog read in one step (older lines are left behind)
# Reflog times git can write (unsigned, seconds); anything else is a junk line, not an event.
MAX_REFLOG_TIME = 253402300799       # 9999-12-31T23:59:59Z, the last second a datetime can hold
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def is_sha(text: str) -> bool:
    return bool(_SHA_RE.fullmatch(text))


class BrokenRepo(Exception):
    """The repository's own files are unreadable or malformed (a corrupt HEAD, for instance).

    Messages name the file and the problem, never the file's contents (HEAD may be a link to a secret).
    """


def _open_regular(path: StrPath, what: str, follow: bool = False) -> tuple[int, int] | None:
    """(open fd, size) of a regular file, None when it does not exist, BrokenRepo for anything else.

    Opened without blocking (a FIFO never hangs us) and, unless `follow`, without following a symlink at the
    last component; refused unless fstat says it is a regular file. The caller closes the fd.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS if follow else _OPEN_FLAGS | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BrokenRepo(f"{what} is a symbolic link; fleetdeck does not follow links in git's files") from None
        raise BrokenRepo(f"{what} is unreadable ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise BrokenRepo(f"{what} is unreadable ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise BrokenRepo(f"{what} is not a regular file")
    return fd, st.st_size


def read_file(path: StrPath, limit: int, what: str, *, whole: bool = True, follow: bool = False) -> bytes | None:
    """The bytes of a regular file (see _open_regular), or None when it does not exist. `whole` refuses a
    file over `limit` bytes; otherwise only its first `limit` bytes are read (enough for a first line)."""
    opened = _open_regular(path, what, follow)
    if opened is None:
        return None
    fd, size = opened
    try:
        if whole and size > limit:
            raise BrokenRepo(f"{what} is larger than {limit} bytes")
        chunks: list[bytes] = []
        left = limit + 1 if whole else limit
        step = max(size + 1, 4096)  # what fstat says, and one more byte to see EOF: no larger buffer per small file
        while left > 0:
            chunk = os.read(fd, min(left, step))
            step = 1 << 20
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
            if len(chunks) == 1 and len(chunk) == size and left > 0:
                break   # all fstat gave, short of what was asked: a regular file's end (not read again to see it)
    except OSError as exc:
        raise BrokenRepo(f"{what} is unreadable ({exc.strerror})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if whole and len(data) > limit:  # it grew, or lied about its size (/proc)
        raise BrokenRepo(f"{what} is larger than {limit} bytes")
    return data


def _text(path: StrPath, what: str, *, whole: bool = True) -> str | None:
    data = read_file(path, MAX_POINTER_BYTES, what, whole=whole)
    return None if data is None else data.decode("utf-8", "replace")


def is_regular(path: StrPath) -> bool:
    """True for a regular file (a symlink is not one: it is never followed)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


# The files git opens first in any repository, with their bounds: one that is a FIFO stalls every git call
# there until its timeout, a huge one floods it, so a per-repo read refuses the repository up front.
_STARTUP_FILES = (("gitdir", "HEAD", MAX_POINTER_BYTES), ("gitdir", "commondir", MAX_POINTER_BYTES),
                  ("commondir", "config", MAX_CONFIG_BYTES), ("commondir", "packed-refs", MAX_PACKED_REFS_BYTES))


def check_startup_files(gitdir: StrPath, commondir: StrPath) -> None:
    """BrokenRepo when a file git reads on start is not a regular file within its bound (absent is fine)."""
    dirs = {"gitdir": gitdir, "commondir": commondir}
    for where, name, limit in _STARTUP_FILES:
        try:
            st = os.lstat(os.path.join(dirs[where], name))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise BrokenRepo(f"{name} is unreadable ({exc.strerror})") from None
        if not stat.S_ISREG(st.st_mode):
            raise BrokenRepo(f"{name} is not a regular file")
        if st.st_size > limit:
            raise BrokenRepo(f"{name} is larger than {limit} bytes")


@dataclass(frozen=True)
class Head:
    """What HEAD says: a symbolic ref (`refs/heads/x`, maybe unborn) or a detached commit."""

    ref: str | None
    sha: str | None

    @property
    def detached(self) -> bool:
        return self.ref is None and self.sha is not None


def read_head(gitdir: StrPath, refs: dict[str, str]) -> Head:
    text = _text(os.path.join(gitdir, "HEAD"), "HEAD")
    if text is None:
        raise BrokenRepo("HEAD is missing")
    text = text.strip()
    if text.startswith("ref:"):
        ref = text[4:].strip()
        if not ref.startswith("refs/") or any(ord(ch) < 32 for ch in ref):
            raise BrokenRepo("HEAD points to an invalid ref")
        return Head(ref, refs.get(ref))
    if is_sha(text):
        return Head(None, text)
    raise BrokenRepo("HEAD is not a ref or a commit id")


def read_refs(commondir: StrPath, seen_by: "Walked | None" = None) -> dict[str, str]:
    """All refs under refs/ (loose files override packed-refs), as {full name: sha}; the loose refs listed
    from `seen_by` (the watch mark's walk just before) where it listed their folders."""
    refs: dict[str, str] = {}
    packed = read_file(os.path.join(commondir, "packed-refs"), MAX_PACKED_REFS_BYTES, "packed-refs")
    if packed:
        for line in packed.decode("utf-8", "replace").splitlines():
            if not line or line[0] in "#^":
                continue
            sha, _, name = line.partition(" ")
            if is_sha(sha) and name:
                refs[name] = sha
    for name, path in _files_under(os.path.join(commondir, "refs"), "refs/", seen_by):
        sha = _loose_ref(path, name)
        if sha is not None:
            refs[name] = sha  # symbolic refs (refs/remotes/origin/HEAD) are not tips of their own
    return refs


def _loose_ref(path: str, name: str) -> str | None:
    """The sha a loose ref file holds, None for a symbolic ref, junk or a file gone since it was listed.

    The scan reads thousands of these: the checks of `_open_regular` and one `read` of a pointer's bound
    (a regular file gives all it has in one), not `read_file`'s loop that reads again to see the end."""
    opened = _open_regular(path, f"the ref {name}")
    if opened is None:
        return None
    fd = opened[0]
    try:
        data = os.read(fd, MAX_POINTER_BYTES)
    except OSError as exc:
        raise BrokenRepo(f"the ref {name} is unreadable ({exc.strerror})") from None
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace").strip()
    return text if is_sha(text) else None


def _open_include(path: str) -> io.BytesIO:
    """dulwich's opener for `include.path` files: the same bounded regular-file read (links are followed,
    as git does for includes); a refused file is skipped like a missing one, as git skips missing ones."""
    try:
        data = read_file(path, MAX_CONFIG_BYTES, "an included config file", follow=True)
    except BrokenRepo as exc:
        raise OSError(str(exc)) from None
    if data is None:
        raise FileNotFoundError(path)
    return io.BytesIO(data)


def parse_config(data: bytes, config_dir: str | None = None, *, what: str = "config",
                 includes: bool = True) -> ConfigFile:
    """dulwich's parser over bytes already read safely; BrokenRepo (never the file's text) when malformed."""
    try:
        return ConfigFile.from_file(io.BytesIO(data), config_dir=config_dir, file_opener=_open_include,
                                    expand_includes=includes)
    except Exception:  # dulwich raises ValueError and friends, quoting the offending line
        raise BrokenRepo(f"{what} is malformed") from None


def configured_work_tree(cfg: "ConfigFile | Config", gitdir: str, commondir: str) -> str | None:
    """The work tree `core.worktree` makes git use instead of the folder holding `.git`, or None.

    In the shared config it applies to the main worktree only; `config.worktree` (with the worktreeConfig
    extension) sets it per worktree. A relative value is relative to the git dir, as git reads it.
    """
    value = _cfg(cfg, (b"core",), b"worktree") if gitdir == commondir else None
    try:
        per_worktree = cfg.get_boolean((b"extensions",), b"worktreeconfig", False)
    except ValueError:
        per_worktree = False
    if per_worktree:
        data = read_file(os.path.join(gitdir, "config.worktree"), MAX_CONFIG_BYTES, "config.worktree")
        if data:
            value = _cfg(parse_config(data, gitdir, what="config.worktree"), (b"core",), b"worktree") or value
    if not value:
        return None
    if "\0" in value:
        raise BrokenRepo("core.worktree is not a valid path")
    return os.path.normpath(os.path.join(gitdir, value))


def _cfg(cfg: "ConfigFile | Config", section: tuple[bytes, ...], key: bytes) -> str | None:
    try:
        value = cfg.get(section, key)
    except KeyError:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _map_refspec(src: str, refspec: str) -> str | None:
    """Apply one fetch refspec (`+refs/heads/*:refs/remotes/o/*`) to a remote ref name."""
    spec = refspec.lstrip("+")
    if ":" not in spec:
        return None
    left, right = spec.split(":", 1)
    if "*" in left:
        prefix, _, suffix = left.partition("*")
        if src.startswith(prefix) and src.endswith(suffix):
            middle = src[len(prefix):len(src) - len(suffix) if suffix else None]
            return right.replace("*", middle, 1)
        return None
    return right if left == src else None


def upstream_ref(cfg: "ConfigFile | Config", branch: str) -> str | None:
    """The full ref name a local branch tracks (`refs/remotes/origin/main`), as git computes it."""
    section = (b"branch", branch.encode())
    remote = _cfg(cfg, section, b"remote")
    if not remote:
        return None   # most branches of a scan track nothing: their merge is not looked for
    merge = _cfg(cfg, section, b"merge")
    if not merge:
        return None
    if remote == ".":
        return merge
    try:
        specs = [v.decode("utf-8", "replace") for v in cfg.get_multivar((b"remote", remote.encode()), b"fetch")]
    except KeyError:
        specs = []
    for spec in specs:
        mapped = _map_refspec(merge, spec)
        if mapped:
            return mapped
    return None


# Schemes whose bare user name (`ssh://git@host`) is a login, not a credential; elsewhere (`https://TOKEN@host`)
# a user name alone is how tokens travel, so it is hidden.
_LOGIN_SCHEMES = frozenset({"ssh", "git+ssh", "ssh+git", "git", "file"})
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.IGNORECASE)
_QUERY_VALUE = re.compile(r"=[^&;#]*")


def redact_url(url: str) -> str:
    """A remote URL with every credential it may carry hidden: a password (`user:***@`), a user name that is
    a token (`https://***@host`), every query value (`?access_token=***`) and a fragment. Remote-helper
    URLs (`helper::https://...`) are redacted inside; scp-like and local paths carry none and stay."""
    helper, sep, inner = url.partition("::")
    if sep and "/" not in helper and ":" not in helper:
        return f"{helper}::{redact_url(inner)}"
    match = _SCHEME.match(url)
    if not match:
        return url
    scheme, rest = match.group(1).lower(), url[match.end():]
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i != -1), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, host = authority.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        if colon:
            authority = f"{user if scheme in _LOGIN_SCHEMES else '***'}:***@{host}"
        elif scheme not in _LOGIN_SCHEMES:
            authority = f"***@{host}"
    path, hash_, fragment = tail.partition("#")
    path, query_mark, query = path.partition("?")
    if query_mark:
        path += "?" + _QUERY_VALUE.sub("=***", query)
    if hash_:
        path += "#***" if fragment else "#"
    return match.group(0) + authority + path


def _multivar(cfg: "ConfigFile | Config", section: tuple[bytes, ...], key: bytes) -> list[str]:
    try:
        return [redact_url(v.decode("utf-8", "replace")) for v in cfg.get_multivar(section, key)]
    except KeyError:
        return []


def remotes(cfg: "ConfigFile | Config") -> list[dict]:
    """Each remote of a config, by name: its fetch URLs and push URLs, redacted; `url` is the first one."""
    rows = []
    for section in cfg.sections():
        if len(section) != 2 or section[0].lower() != b"remote":
            continue
        urls, push = (_multivar(cfg, section, key) for key in (b"url", b"pushurl"))
        rows.append({"name": section[1].decode("utf-8", "replace"), "url": urls[0] if urls else None,
                     "urls": urls, "push_urls": push})
    return sorted(rows, key=lambda r: r["name"])


def short_ref(ref: str) -> str:
    for prefix in ("refs/heads/", "refs/remotes/", "refs/tags/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


@dataclass(frozen=True)
class ReflogLine:
    old_sha: str | None
    new_sha: str | None
    identity: str
    at: int
    tz: str
    message: str


# Reflog message prefixes (as git writes them) and the digest kind each means; first match wins.
_KIND_PREFIXES = (
    ("commit (amend)", "amend"), ("commit (merge)", "merge"), ("merge ", "merge"), ("commit", "commit"),
    ("checkout:", "checkout"), ("pull", "pull"), ("reset:", "reset"), ("rebase", "rebase"),
    ("cherry-pick", "cherry_pick"), ("revert", "revert"), ("branch:", "branch"), ("Branch: renamed", "branch"),
    ("fetch", "fetch"), ("fleetdeck: undo", "reset"),
)
# One alternation, tried in the table's order (first match wins).
_KIND_ALTERNATION = "|".join(re.escape(prefix) for prefix, _ in _KIND_PREFIXES)
_KIND_RE = re.compile(_KIND_ALTERNATION)
_KIND_OF_PREFIX = {prefix: kind for prefix, kind in _KIND_PREFIXES} | {"": "other"}
# `<old> <new> <identity> <unix time> <tz>[\t<message>]`, one line each; the message and its tab may be absent.
# Matched on the decoded text (one decode per file, not five per line). The lookahead captures the message's
# kind prefix (`_KIND_PREFIXES`, first match wins) without consuming it, so one pass also classifies the line.
_REFLOG_LINE = re.compile(r"^([0-9a-f]{40}(?:[0-9a-f]{24})?) ([0-9a-f]{40}(?:[0-9a-f]{24})?) "
                          r"([^\n\t]*) ([0-9]{1,12}) ([+-][0-9]{4})"
                          r"(?:\t(?:(?=(" + _KIND_ALTERNATION + r")))?([^\n]*))?$",
                          re.M | re.ASCII)


_ZERO_OIDS = frozenset({"0" * 40, "0" * 64})
# A message's kind is decided by its first _KIND_SPAN characters (the longest prefix): the kind of each start
# seen is kept, at most _KIND_STARTS_KEPT of them (then they are forgotten and learnt again).
_KIND_SPAN = max(len(prefix) for prefix, _ in _KIND_PREFIXES)
_KIND_OF_START: dict[str, str] = {}
_KIND_STARTS_KEPT = 4096
_HEX_DIGITS = b"0123456789abcdef"
_ZONE_TEXT = re.compile(r"[+-][0-9]{4}", re.ASCII)
_ZONE = itemgetter(4)


def parse_reflog(data: bytes) -> list[ReflogLine]:
    """Parse reflog text tolerantly: message-less lines, zero oids and junk lines (a time no clock can show
    included) never raise; junk is skipped."""
    return [ReflogLine(*fields[:6]) for fields in reflog_fields(data)]


Fields = tuple[str | None, str | None, str, int, str, str, str]  # (old, new, identity, at, tz, message, kind)


def reflog_fields(data: bytes) -> list[Fields]:
    """`parse_reflog` as plain tuples (old, new, identity, at, tz, message, kind): the scan's ingest reads every
    reflog line of the fleet, and objects per line cost more than the parsing. `kind` is `reflog_kind(message)`."""
    return logs_fields([data])[0]


def logs_fields(logs: list[bytes]) -> list[list[Fields]]:
    """`reflog_fields` of each of `logs`. A repo's reflogs are cut together, checked once for all: most logs
    hold a few lines (10,275 of the realistic fleet's 13,050 under five), and a call and a check for each
    cost more than cutting their lines.

    Decoding each whole text once with "replace" gives each field what decoding it alone would: an invalid
    sequence never swallows the ASCII space, tab or newline that ends a field. Logs whose lines are all as
    git writes them are cut into their fields with str methods (`split_fields`: a fifth fewer instructions
    and less time than the regex); when any one is not, each is taken alone, and one that still is not is
    matched line by line (`matched_fields`), which skips the junk."""
    if not any(logs):
        return [[] for _ in logs]   # empty logs (no stash, nothing new since): neither parse is set up for them
    texts = [data.decode("utf-8", "replace") for data in logs]
    fields = split_fields(texts)
    if fields is None:
        fields = ([matched_fields(texts[0])] if len(texts) == 1
                  else [(split_fields([text]) or [matched_fields(text)])[0] for text in texts])
    return fields


def matched_fields(text: str) -> list[Fields]:
    """`reflog_fields` of a decoded log, every line matched with `_REFLOG_LINE` (junk lines skipped)."""
    zero, kind_of = _ZERO_OIDS, _KIND_OF_PREFIX
    return [(None if old in zero else old, None if new in zero else new, who, at, tz, msg, kind_of[prefix])
            for old, new, who, ts, tz, prefix, msg in _REFLOG_LINE.findall(text)
            if (at := int(ts)) <= MAX_REFLOG_TIME]


def split_fields(texts: list[str]) -> list[list[Fields]] | None:
    """`matched_fields` of each of `texts` when every line of each (but empty ones) cuts into the fields
    `_REFLOG_LINE` would match, else None. A line is cut at its first tab and at spaces: the shas end at the
    first two, the time and zone follow the last two (the regex's identity is greedy); what the regex checks
    character by character is checked once for all the texts, on the distinct values: each sha 40 or 64
    lowercase hex digits, each time 1-12 ASCII digits, each zone a sign and four ASCII digits. A line past
    MAX_REFLOG_TIME is left out unchecked: the regex leaves it out too, whether it matches or not."""
    zero, kinds, span, latest = _ZERO_OIDS, _KIND_OF_START, _KIND_SPAN, MAX_REFLOG_TIME
    logs: list[list[Fields]] = []
    shas: list[str] = []
    stamps: list[str] = []
    zones: set[str] = set()
    try:
        for text in texts:
            rows: list[Fields] = []
            for line in text.split("\n"):
                if line:
                    head, _, msg = line.partition("\t")
                    old, new, rest = head.split(" ", 2)
                    who, ts, tz = rest.rsplit(" ", 2)
                    if (at := int(ts)) <= latest:
                        shas += old, new
                        stamps.append(ts)
                        rows.append((None if old in zero else old, None if new in zero else new, who, at, tz, msg,
                                     kinds.get(msg[:span]) or _kind_of_start(msg[:span])))
            zones.update(map(_ZONE, rows))
            logs.append(rows)
        distinct = set(shas)
        if (set(map(len, distinct)) <= {40, 64} and not "".join(distinct).encode("ascii").translate(None, _HEX_DIGITS)
                and "".join(stamps).encode("ascii").isdigit() and max(map(len, stamps), default=0) <= 12
                and all(map(_ZONE_TEXT.fullmatch, zones))):
            return logs
    except ValueError:  # too few fields, a time int() refuses, a sha or time not ASCII
        pass
    return None


def _kind_of_start(start: str) -> str:
    """`reflog_kind` of a message's first _KIND_SPAN characters, kept for the next message starting so."""
    if len(_KIND_OF_START) >= _KIND_STARTS_KEPT:
        _KIND_OF_START.clear()
    kind = _KIND_OF_START[start] = reflog_kind(start)
    return kind


def read_reflog(path: StrPath, offset: int = 0, limit: int = REFLOG_STEP_BYTES) -> tuple[bytes, int, bool]:
    """The complete lines of a reflog from byte `offset` on, at most `limit` bytes of them: (lines, the offset
    just past them, clipped). When more than `limit` bytes follow `offset`, the oldest are skipped (clipped)
    and reading starts at the first line boundary within the newest `limit` bytes. A missing file is empty."""
    opened = _open_regular(path, "a reflog")
    if opened is None:
        return b"", 0, False
    fd, size = opened
    try:
        start = min(max(offset, 0), size)
        clipped = size - start > limit
        if clipped:
            start = size - limit
        data = os.pread(fd, size - start, start)  # no more than fstat saw: a buffer of `limit` costs an mmap
    except OSError as exc:
        raise BrokenRepo(f"a reflog is unreadable ({exc.strerror})") from None
    finally:
        os.close(fd)
    if clipped:  # drop the partial line the window starts in (or, with no line break at all, everything)
        skip = data.find(b"\n") + 1
        data, start = (data[skip:], start + skip) if skip else (b"", start + len(data))
    complete = data.rfind(b"\n") + 1
    return data[:complete], start + complete, clipped


def _files_under(base: str, prefix: str, seen_by: "Walked | None" = None) -> list[tuple[str, str]]:
    """(prefix + relative name, path) for every file below `base` (scandir: far cheaper than os.walk+Path);
    each folder `seen_by` listed is taken from it."""
    out: list[tuple[str, str]] = []
    stack = [(base, prefix)]
    while stack:
        folder, name = stack.pop()
        entries = _listing(folder, seen_by)
        if entries is None:
            continue
        for entry in entries:
            if entry.is_symlink():
                continue   # never followed; past it is_dir() and is_file() answer without a keyword to parse
            if entry.is_dir():
                stack.append((entry.path, f"{name}{entry.name}/"))
            elif entry.is_file():
                out.append((name + entry.name, entry.path))
    return out


def absent(path: str, seen_by: "Walked | None") -> bool:
    """Whether the watch mark's walk (`seen_by`) listed the folder `path` is in without `path` among its
    entries: it was not there in the state the mark vouches for, so a read behind the mark need not look."""
    if seen_by is None:
        return False
    parent, name = os.path.split(path)
    names = seen_by.names.get(parent)
    if names is not None:
        return name not in names
    entries = seen_by.folders.get(parent)
    return entries is not None and all(e.name != name for e in entries)


def _listing(folder: str, seen_by: "Walked | None") -> list[os.DirEntry] | None:
    """`folder`'s entries, as `seen_by` listed them when it did; None when it cannot be listed."""
    entries = seen_by.folders.get(folder) if seen_by is not None else None
    if entries is None:
        if absent(folder, seen_by):
            return None
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            return None
    return entries


def _regular(path: str, seen_by: "Walked | None") -> bool:
    """`is_regular(path)`, from the stat `seen_by` took of it when it has one."""
    st = seen_by.files.get(path) if seen_by is not None else None
    if st is None and absent(path, seen_by):
        return False
    return stat.S_ISREG(st.st_mode) if st is not None else is_regular(path)


def reflog_files(gitdir: StrPath, commondir: StrPath, seen_by: "Walked | None" = None) -> list[tuple[str, str]]:
    """(ref name, reflog file) for HEAD of the main and every linked worktree, branches and remotes; the
    folders `seen_by` (the watch mark's walk just before) listed are taken from it. Paths are joined as
    plain strings, as the walk's listing joins them (os.path.join cost more than the lookups it serves)."""
    files: list[tuple[str, str]] = []
    head = f"{gitdir}/logs/HEAD"
    if _regular(head, seen_by):
        files.append(("HEAD", head))
    logs = f"{commondir}/logs/refs"
    files.extend(sorted(_files_under(f"{logs}/heads", "refs/heads/", seen_by)))
    # refs/remotes/<remote>/HEAD only names the remote's default branch: its log repeats the clone line
    files.extend(sorted((ref, path) for ref, path in _files_under(f"{logs}/remotes", "refs/remotes/", seen_by)
                        if not ref.endswith("/HEAD")))
    if gitdir == commondir:
        wt_base = f"{commondir}/worktrees"
        try:
            names = sorted(e.name for e in _listing(wt_base, seen_by) or () if e.is_dir(follow_symlinks=False))
        except OSError:
            names = []
        for name in names:
            path = f"{wt_base}/{name}/logs/HEAD"
            if _regular(path, seen_by):
                files.append((f"worktrees/{name}/HEAD", path))
    return files


def reflog_kind(message: str) -> str:
    """Classify a reflog message into the digest's event kinds."""
    match = _KIND_RE.match(message)
    return _KIND_OF_PREFIX[match.group()] if match else "other"


def _count(text: str | None) -> int | None:
    """A small step count from a rebase file, or None for anything else (no 5,000-digit int parsing)."""
    return int(text) if text and len(text) <= 9 and text.isascii() and text.isdigit() else None


def operation(gitdir: StrPath, seen_by: "Walked | None" = None) -> tuple[str | None, dict]:
    """The operation in progress in this worktree's git dir, with the details a person needs to finish it
    (what the watch mark's walk, `seen_by`, did not list there is not looked for)."""
    listed = seen_by.names.get(os.fspath(gitdir)) if seen_by is not None else None

    def exists(name: str) -> bool:
        if listed is not None and "/" not in name and name not in listed:
            return False   # `absent`, told by name: no path built and split again for each marker
        path = os.path.join(gitdir, name)
        return not absent(path, seen_by) and os.path.exists(path)

    def first_line(name: str) -> str | None:
        """A detail of the operation, or None when absent or refused (a FIFO MERGE_MSG is left unread)."""
        try:
            text = _text(os.path.join(gitdir, name), name, whole=False)
        except BrokenRepo:
            return None
        return text.strip().splitlines()[0] if text and text.strip() else None

    if exists("rebase-merge") or (exists("rebase-apply") and not exists("rebase-apply/applying")):
        base = "rebase-merge" if exists("rebase-merge") else "rebase-apply"
        head_name = first_line(f"{base}/head-name")
        step = first_line(f"{base}/msgnum") or first_line(f"{base}/next")
        total = first_line(f"{base}/end") or first_line(f"{base}/last")
        return "rebase", {
            "branch": short_ref(head_name) if head_name and head_name != "detached HEAD" else None,
            "onto": first_line(f"{base}/onto"),
            "step": _count(step),
            "total": _count(total),
            "stopped_at": first_line("REBASE_HEAD"),
        }
    if exists("rebase-apply"):
        return "am", {}
    if exists("MERGE_HEAD"):
        msg = first_line("MERGE_MSG")
        return "merge", {"merge_head": first_line("MERGE_HEAD"), "message": msg}
    if exists("CHERRY_PICK_HEAD"):
        return "cherry-pick", {"commit": first_line("CHERRY_PICK_HEAD")}
    if exists("REVERT_HEAD"):
        return "revert", {"commit": first_line("REVERT_HEAD")}
    if exists("BISECT_LOG"):
        return "bisect", {"start": first_line("BISECT_START")}
    return None, {}


@dataclass(frozen=True)
class LinkedWorktree:
    """A linked worktree as `.git/worktrees/<id>/` describes it."""

    id: str
    gitdir: Path
    path: Path
    locked: bool
    lock_reason: str | None
    prunable: bool
    prunable_reason: str | None


def linked_worktrees(commondir: StrPath, seen_by: "Walked | None" = None) -> list[LinkedWorktree]:
    """Each worktree `worktrees/` describes; the folder taken from the watch mark's walk (`seen_by`) when it
    listed it."""
    base = os.path.join(commondir, "worktrees")
    listed = seen_by.folders.get(base) if seen_by is not None else None
    if listed is None and (absent(base, seen_by) or not os.path.isdir(base)):
        return []
    result: list[LinkedWorktree] = []
    for entry in sorted(os.scandir(base) if listed is None else listed, key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            continue
        wt_gitdir = Path(entry.path)
        pointer = _text(wt_gitdir / "gitdir", f"worktrees/{entry.name}/gitdir")
        pointer = pointer.strip() if pointer and "\0" not in pointer else None
        dotgit = Path(pointer) if pointer else None
        if dotgit is not None and not dotgit.is_absolute():
            dotgit = Path(os.path.normpath(wt_gitdir / dotgit))
        lock_text = _text(wt_gitdir / "locked", f"worktrees/{entry.name}/locked", whole=False)
        locked = lock_text is not None
        prunable_reason = None
        if dotgit is None:
            prunable_reason = "gitdir file points to non-existent location"
        elif not locked and not os.path.exists(dotgit):
            prunable_reason = "gitdir file points to non-existent location"
        result.append(LinkedWorktree(
            id=entry.name, gitdir=wt_gitdir, path=dotgit.parent if dotgit else wt_gitdir,
            locked=locked, lock_reason=(lock_text.strip() or None) if lock_text is not None else None,
            prunable=prunable_reason is not None and not locked, prunable_reason=prunable_reason,
        ))
    return result
