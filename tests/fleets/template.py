"""Each fleet shape built once per test session with the git CLI into a template, then copied per test.

Building a fleet costs hundreds of git commands (0.3–3 s); copying the built folders costs a fraction of that.
A copy must be indistinguishable from a fresh build at the new place, so `copy_tree`:
- keeps file and folder mtimes (fleetdeck dates activity by them) and symlinks as links, and refreshes each
  work tree's git index (the copy's inodes and ctimes are new: a stale index is not what a build leaves);
- rewrites the template's absolute path to the copy's in git's own small files that hold one (a worktree's
  `.git` file and its `gitdir`, `config` remote URLs, FETCH_HEAD), leaving objects, index, reflogs and work
  trees byte for byte (a committed `.gitmodules` keeps its URL, a reflog its "clone: from": they are content);
- rewrites the path in every text column of an index database in the tree (messages aside, as in the
  reflogs) and re-takes what the index stores about files it read (reflog inodes, watch marks), as a scan
  at the copy would have stored them.
The template itself is never handed to a test.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from fleet.repo.record import reflog_stats
from fleet.git.mark import watch_mark
from tests.fleets.gitbuild import git

T = TypeVar("T")

_SQLITE_MAGIC = b"SQLite format 3\0"
_ADMIN_MAX_BYTES = 1 << 20
# Index columns that copy what the copied files say, not where they are: reflog messages ("clone: from
# <path>") and a submodule's URL (from the committed `.gitmodules`) keep the template's path as their files do.
_CONTENT = {("reflog", "message"), ("events", "message"), ("event_rows", "message"), ("submodules", "url")}


class Templates:
    """The session's built fleet shapes, by name, under one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._built: dict[str, tuple[Path, Any]] = {}

    def copy(self, shape: str, build: Callable[[Path], T], dest: Path) -> T:
        """`build(base)`'s fleet (everything it makes under `base`) at `dest`: built the first time `shape` is
        asked for, copied every time; the result with the template's paths moved to `dest`."""
        if shape not in self._built:
            base = self.folder / f"{len(self._built)}-{shape.replace(os.sep, '-')}"
            base.mkdir(parents=True)
            self._built[shape] = (base, build(base))
        base, made = self._built[shape]
        copy_tree(base, dest)
        return moved(made, base, dest)


_SHARED: list[Templates] = []


def shared() -> Templates:
    """This process's templates (one set per pytest process: each xdist worker builds its own), in a
    temp folder removed at exit."""
    if not _SHARED:
        folder = Path(tempfile.mkdtemp(prefix="fleetdeck-templates-"))
        atexit.register(shutil.rmtree, folder, True)
        _SHARED.append(Templates(folder))
    return _SHARED[0]


def moved(value: Any, old: Path, new: Path) -> Any:
    """`value` (paths, strings, and dicts, lists, tuples of them) with the prefix `old` replaced by `new`."""
    if isinstance(value, Path):
        return new / value.relative_to(old) if value.is_relative_to(old) else value
    if isinstance(value, str):
        return str(new) + value[len(str(old)):] if value == str(old) or value.startswith(f"{old}/") else value
    if isinstance(value, dict):
        return {k: moved(v, old, new) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(moved(v, old, new) for v in value)
    return value


def copy_tree(src: Path, dest: Path) -> None:
    """Copy the built tree `src` into `dest` (which may exist, empty) as if it had been built there."""
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    old, new = os.fsencode(src), os.fsencode(dest)
    databases, work_trees = [], []
    for folder, dirs, files in os.walk(dest):
        if ".git" in dirs or ".git" in files:
            work_trees.append(folder)
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                target = os.readlink(path)
                if target.startswith(os.fsdecode(old)):
                    os.unlink(path)
                    os.symlink(os.fsdecode(new) + target[len(old):], path)
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            if name.endswith(".db") and _is_database(path):
                databases.append(path)
            elif _is_git_admin(folder, name):
                _replace_in_file(path, old, new)
        dirs[:] = [d for d in dirs if d != "objects"]
    for tree in work_trees:  # a copy has new inodes and ctimes: git's index is fresh again, as after a build
        git(tree, "update-index", "-q", "--refresh", check=False)
    for db in databases:
        _move_database(db, os.fsdecode(src), os.fsdecode(dest))


def _is_git_admin(folder: str, name: str) -> bool:
    """git's own small files (inside a `.git` folder, or a `.git` file): not its objects, its index or its
    reflogs (their messages, "clone: from <path>", are history, and the index holds how far it read them)."""
    marker = f"{os.sep}.git{os.sep}"
    where = (folder + os.sep).find(marker)
    return name == ".git" or (where >= 0 and name != "index" and f"{os.sep}logs{os.sep}" not in
                              (folder + os.sep)[where:])


def _is_database(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _replace_in_file(path: str, old: bytes, new: bytes) -> None:
    st = os.stat(path)
    if st.st_size > _ADMIN_MAX_BYTES:
        return
    with open(path, "rb") as handle:
        data = handle.read()
    if old in data:
        with open(path, "wb") as handle:
            handle.write(data.replace(old, new))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _move_database(path: str, old: str, new: str) -> None:
    """The index at `path` as a scan at the copy would have left it: paths moved in every text column, the
    reflog files' inodes and the watch marks taken again of the copied git dirs, a new instance id."""
    folder = os.path.dirname(path)
    kept = os.stat(path), os.stat(folder)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("begin immediate")
        tables = [row[0] for row in conn.execute(
            "select name from sqlite_master where type = 'table' and sql not like 'CREATE VIRTUAL TABLE%' "
            "and name not like 'sqlite_%' and name not like '%search%'")]
        for table in tables:
            columns = [row[1] for row in conn.execute(f"pragma table_info('{table}')")
                       if row[2].upper() == "TEXT" and (table, row[1]) not in _CONTENT]
            for column in columns:
                conn.execute(f'update "{table}" set "{column}" = ? || substr("{column}", ?) '
                             f'where "{column}" = ? or substr("{column}", 1, ?) = ?',
                             (new, len(old) + 1, old, len(old) + 1, old + "/"))
                conn.execute(f'update "{table}" set "{column}" = replace("{column}", ?, ?) '
                             f'where instr("{column}", ?)', (f'"{old}/', f'"{new}/', f'"{old}/'))
        if "meta" in tables:  # each index file carries its own random id (fleet.views.ranking tells them apart)
            conn.execute("update meta set value = ? where key = 'instance'", (json.dumps(secrets.token_hex(8)),))
        if "repos" in tables:
            repos = list(conn.execute("select id, gitdir from repos where gitdir is not null"))
            for repo_id, gitdir in repos:
                common = os.path.normpath(os.path.join(gitdir, _commondir(gitdir)))
                if "reflog_files" in tables:
                    for ref, _path, inode, _size, _mtime in reflog_stats(gitdir, common):
                        conn.execute("update reflog_files set inode = ? where repo_id = ? and ref = ?",
                                     (inode, repo_id, ref))
                if "repo_marks" in tables:
                    conn.execute("update repo_marks set mark = ? where repo_id = ? and mark is not null",
                                 (watch_mark(gitdir, common), repo_id))
        conn.execute("commit")
    finally:
        conn.close()
    for where, st in zip((path, folder), kept):
        os.utime(where, ns=(st.st_atime_ns, st.st_mtime_ns))


def _commondir(gitdir: str) -> str:
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
            return handle.read().strip() or "."
    except OSError:
        return "."
