"""Hostile repositories, built with the real git CLI: repos whose own config aims every command git could run
at a marker folder, and the snapshot that proves a read changed nothing.

A test builds one with `hostile_repo`, takes `snapshot(repo)`, reads it through a fleetdeck surface, then
checks `fired(marker) == []` (nothing ran) and that the snapshot is unchanged (nothing written, mtimes
included). Other hostile-input tests (tests/test_hostile_files.py) reuse these builders.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from pathlib import Path

from tests.fleets.gitbuild import bare_remote, clone, commit_file, git, init_repo, write

# Every hook git could fire around an index or ref change, a checkout, a commit or a push.
HOOKS = ("post-index-change", "pre-commit", "post-commit", "post-checkout", "post-merge", "pre-push",
         "reference-transaction", "pre-auto-gc", "post-rewrite", "fsmonitor-watchman", "push-to-checkout")
OLD = 1_600_000_000          # an mtime far in the past: a freshen or touch by a read shows up at once

# Where a hostile repo puts its config and its attributes.
CONFIG_PLACES = ("config", "include", "includeif", "worktree_config")
ATTRIBUTE_PLACES = ("gitattributes", "info_attributes", "attributes_file")


def fired(marker: Path) -> list[str]:
    """The names of the commands that ran (each touches `marker/<name>`)."""
    return sorted(os.listdir(marker)) if marker.exists() else []


def marker_command(marker: Path, name: str, then: str = "cat") -> str:
    """A shell command that records that it ran, then behaves like `then` (a filter must still output)."""
    return f"touch {shlex.quote(str(marker / name))}; {then}"


def marker_script(path: Path, marker: Path, name: str) -> Path:
    write(path, f"#!/bin/sh\ntouch {shlex.quote(str(marker / name))}\ncat >/dev/null 2>&1 || true\n")
    path.chmod(0o755)
    return path


def hostile_config(repo: Path, marker: Path) -> str:
    """Config text naming a command for every key git could run on a read (and some it runs on writes)."""
    gitdir = repo / ".git"
    scripts = gitdir / "evil-bin"
    for name in ("fsmonitor", "ssh", "gpg", "pager", "editor", "askpass", "credential", "external-diff",
                 "diff-command", "merge-driver"):
        marker_script(scripts / name, marker, name)
    hooks = gitdir / "evil-hooks"
    for hook in HOOKS:
        marker_script(hooks / hook, marker, f"hook-{hook}")
        marker_script(gitdir / "hooks" / hook, marker, f"default-hook-{hook}")

    def q(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "\n".join([
        '[filter "evil"]',
        f"\tclean = {q(marker_command(marker, 'filter-clean'))}",
        f"\tsmudge = {q(marker_command(marker, 'filter-smudge'))}",
        "\trequired = true",
        '[filter "evilproc"]',
        f"\tprocess = {q(marker_command(marker, 'filter-process'))}",
        "\trequired = true",
        '[diff "evil"]',
        f"\ttextconv = {q(marker_command(marker, 'textconv'))}",
        f"\tcommand = {q(str(scripts / 'diff-command'))}",
        '[merge "evil"]',
        f"\tdriver = {q(str(scripts / 'merge-driver') + ' %O %A %B')}",
        "\tname = evil",
        "[merge]",
        "\tdefault = evil",
        "[diff]",
        f"\texternal = {q(str(scripts / 'external-diff'))}",
        "[core]",
        f"\tfsmonitor = {q(str(scripts / 'fsmonitor'))}",
        f"\thooksPath = {q(str(hooks))}",
        f"\tsshCommand = {q(str(scripts / 'ssh'))}",
        f"\tpager = {q(str(scripts / 'pager'))}",
        f"\teditor = {q(str(scripts / 'editor'))}",
        f"\taskPass = {q(str(scripts / 'askpass'))}",
        "[gpg]",
        f"\tprogram = {q(str(scripts / 'gpg'))}",
        "[credential]",
        f"\thelper = {q(str(scripts / 'credential'))}",
        "[log]",
        "\tshowSignature = true",
        "",
    ])


ATTRIBUTES = "*.txt filter=evil diff=evil merge=evil\n*.p filter=evilproc diff=evil merge=evil\n"


def diverged_pair(base: Path, name: str, *, root: Path | None = None) -> tuple[Path, Path]:
    """(repo, seed): `repo` under `root` tracks origin/main, one commit ahead and one behind, both sides
    changing shared.txt (far apart, so git's own merge is clean but a merge driver would be asked)."""
    remote = bare_remote(base / f"{name}-remote.git")
    seed = init_repo(base / f"{name}-seed", commits=1)
    write(seed / "shared.txt", "".join(f"line {i}\n" for i in range(20)))
    write(seed / "data.txt", "data\n")
    write(seed / "proc.p", "processed\n")
    git(seed, "add", ".")
    git(seed, "commit", "-q", "-m", "files")
    git(seed, "remote", "add", "origin", str(remote))
    git(seed, "push", "-q", "-u", "origin", "main")
    repo = clone(remote, (root or base) / name)
    commit_file(seed, "shared.txt", "upstream\n" + "".join(f"line {i}\n" for i in range(1, 20)), "upstream edit")
    git(seed, "push", "-q", "origin", "main")
    git(repo, "fetch", "-q")
    commit_file(repo, "shared.txt", "".join(f"line {i}\n" for i in range(19)) + "local\n", "local edit")
    return repo, seed


def hostile_repo(base: Path, name: str, marker: Path, *, root: Path | None = None,
                 config_in: str = "config", attributes_in: str = "info_attributes") -> Path:
    """A diverged repo (see `diverged_pair`) whose own config aims every command at `marker`, with a
    stat-dirty tracked file, a modified file, a modified `.p` file and an untracked file.

    `config_in`: `config` (.git/config), `include` (include.path), `includeif` (includeIf "gitdir:"),
    `worktree_config` (config.worktree). `attributes_in`: `gitattributes` (the work tree's .gitattributes,
    uncommitted), `info_attributes` (.git/info/attributes), `attributes_file` (core.attributesFile).
    """
    marker.mkdir(parents=True, exist_ok=True)
    repo, _ = diverged_pair(base, name, root=root)
    gitdir = repo / ".git"
    text = hostile_config(repo, marker)
    config = gitdir / "config"
    if config_in == "config":
        config.write_text(config.read_text() + text)
    elif config_in == "include":
        write(gitdir / "evil.cfg", text)
        config.write_text(config.read_text() + "[include]\n\tpath = evil.cfg\n")
    elif config_in == "includeif":
        write(gitdir / "evil.cfg", text)
        config.write_text(config.read_text() + f'[includeIf "gitdir:{repo}/"]\n\tpath = evil.cfg\n')
    elif config_in == "worktree_config":
        config.write_text(config.read_text() + "[extensions]\n\tworktreeConfig = true\n")
        config.write_text(config.read_text().replace("repositoryformatversion = 0", "repositoryformatversion = 1"))
        write(gitdir / "config.worktree", text)
    else:
        raise ValueError(config_in)
    if attributes_in == "gitattributes":
        write(repo / ".gitattributes", ATTRIBUTES)
    elif attributes_in == "info_attributes":
        write(gitdir / "info" / "attributes", ATTRIBUTES)
    elif attributes_in == "attributes_file":
        write(gitdir / "evil-attributes", ATTRIBUTES)
        with open(config, "a", encoding="utf-8") as fh:
            fh.write(f"[core]\n\tattributesFile = {gitdir / 'evil-attributes'}\n")
    else:
        raise ValueError(attributes_in)
    dirty_work_tree(repo)
    return repo


def dirty_work_tree(repo: Path) -> None:
    """Touch a tracked file (stat-dirty: git must re-hash it, running any clean filter), modify two, add one."""
    os.utime(repo / "shared.txt", (OLD, OLD))
    write(repo / "data.txt", "data changed\n")
    write(repo / "proc.p", "processed changed\n")
    write(repo / "new.txt", "untracked\n")


def age_git_dir(repo: Path) -> None:
    """Set every file and folder under the repository's .git to an old mtime, so any touch shows."""
    for top, dirs, files in os.walk(repo / ".git"):
        for name in files + dirs:
            os.utime(os.path.join(top, name), (OLD, OLD), follow_symlinks=False)
    os.utime(repo / ".git", (OLD, OLD))


def snapshot(root: Path) -> dict[str, str]:
    """Every file, folder and symlink under `root` (.git included): kind, mode, size, mtime, content hash."""
    snap: dict[str, str] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(top, name)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):
                digest = content_digest(full)
            elif stat.S_ISLNK(st.st_mode):
                digest = "-> " + os.readlink(full)
            else:
                digest = "dir" if stat.S_ISDIR(st.st_mode) else "other"
            snap[full] = f"{st.st_mode:o}:{st.st_size if not stat.S_ISDIR(st.st_mode) else ''}:" \
                         f"{st.st_mtime_ns}:{digest}"
    st = os.lstat(root)
    snap[str(root)] = f"{st.st_mode:o}::{st.st_mtime_ns}:dir"
    return snap


def content_digest(path: str) -> str:
    """A hash of a regular file's bytes: each stretch of data with its offset, read in blocks, and the file's
    size; the holes of a sparse file (zeros no block holds) are not read. Equal bytes laid out alike hash
    alike, and a byte written anywhere shows, yet a sparse GiB costs its few blocks, not a GiB of memory."""
    digest = hashlib.sha1()
    with open(path, "rb") as fh:
        fd, size, at = fh.fileno(), os.fstat(fh.fileno()).st_size, 0
        while at < size:
            try:
                at = os.lseek(fd, at, os.SEEK_DATA)
            except OSError:          # no data past `at` (ENXIO): the rest is a hole
                break
            end = os.lseek(fd, at, os.SEEK_HOLE)
            digest.update(b"@%d:" % at)
            fh.seek(at)
            while at < end and (block := fh.read(min(1 << 20, end - at))):
                digest.update(block)
                at += len(block)
        digest.update(b"size %d" % size)
    return digest.hexdigest()


def snapshot_diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What changed between two snapshots, one line per path (for assertion messages)."""
    lines = [f"new {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"gone {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"changed {p}: {before[p]} -> {after[p]}" for p in sorted(before.keys() & after.keys())
              if before[p] != after[p]]
    return lines
