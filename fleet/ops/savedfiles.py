"""The exact content of working-tree paths, saved into a restore point and written back by an undo.

Each saved path is one of: absent (`None`: it must not exist after the undo), a folder (`["040000", None,
perm]`), or a file or symlink (`[git mode, blob, perm]`: the bytes, or the link's target, as a blob, and the
permission bits exactly, 0600 stays 0600). Blobs go into the repository's own object store, kept alive by the
restore point's `files` commit under `refs/fleetdeck/restore/<id>/` (so they live, and are pruned, with the
restore point, and `git gc` never collects them). They are written with the read side's hardened runner
(`fleet.git.run`: no hook, no filter, no driver, no signing program of the repository's runs) and
`hash-object --no-filters`, so what is stored is the file's bytes, not what a clean filter makes of them.

`state_of` is the fingerprint an undo compares (type, permission bits, sha256 of the bytes, read here, not by
git): a path's state right after the operation, against its state when the undo runs.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile

from fleet.errors import FleetError
from fleet.git.run import GitError, GitResult, run_git, text
from fleet.repo.scope import behind_link

DIR = "040000"
_IDENTITY = {"GIT_AUTHOR_NAME": "fleetdeck", "GIT_AUTHOR_EMAIL": "fleetdeck@localhost",
             "GIT_COMMITTER_NAME": "fleetdeck", "GIT_COMMITTER_EMAIL": "fleetdeck@localhost"}


def _git(repo: str, args: list[str], data: bytes | None = None, env: dict[str, str] | None = None) -> GitResult:
    """The read side's hardened runner (nothing the repository defines runs), with room for big files."""
    try:
        return run_git(repo, args, input_bytes=data, extra_env=env, timeout=600, max_bytes=1 << 40)
    except GitError as exc:
        raise FleetError.from_git(exc) from exc


def _lstat(full: str) -> os.stat_result | None:
    try:
        return os.lstat(full)
    except FileNotFoundError:
        return None


def save(repo: str, paths: list[str]) -> dict[str, list | None]:
    """{path: None | [mode, blob, perm]} for each path as it is now in the working tree."""
    saved: dict[str, list | None] = {}
    regular: list[tuple[str, int]] = []
    folders: dict = {}
    for rel in paths:
        full = os.path.join(repo, rel)
        # behind a folder swapped for a link, the path is gone as git sees it; what the link leads to (outside
        # the repository, perhaps) must never be read into the repository's objects
        st = None if behind_link(repo, rel, folders) else _lstat(full)
        if st is None:
            saved[rel] = None
        elif stat.S_ISLNK(st.st_mode):
            saved[rel] = ["120000", _hash(repo, ["--stdin"], os.fsencode(os.readlink(full)))[0], 0o777]
        elif stat.S_ISDIR(st.st_mode):
            saved[rel] = [DIR, None, stat.S_IMODE(st.st_mode)]
        elif stat.S_ISREG(st.st_mode):
            regular.append((rel, stat.S_IMODE(st.st_mode)))
        else:
            raise FleetError("BAD_PATH", f"{rel!r} is neither a file, a symlink nor a folder: a restore point "
                                         "cannot hold it")
    if regular:
        blobs = _hash(repo, ["--stdin-paths"], b"".join(os.fsencode(rel) + b"\n" for rel, _ in regular))
        if len(blobs) != len(regular):
            raise FleetError("GIT_FAILED", "git hash-object did not save every file")
        for (rel, perm), blob in zip(regular, blobs):
            saved[rel] = ["100755" if perm & 0o111 else "100644", blob, perm]
    return saved


def _hash(repo: str, how: list[str], data: bytes) -> list[str]:
    out = _git(repo, ["hash-object", "-w", "--no-filters", *how], data).stdout
    return text(out).split()


def files_commit(repo: str, point_id: str, saved: dict[str, list | None]) -> str | None:
    """A commit whose tree holds the saved blobs, so git never prunes them while the restore point lives."""
    entries = [(p, v) for p, v in saved.items() if v is not None and v[1]]
    if not entries:
        return None
    with tempfile.TemporaryDirectory(prefix="fleetdeck-rp-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        info = b"".join(f"{v[0]} {v[1]}\t".encode() + os.fsencode(p) + b"\0" for p, v in entries)
        _git(repo, ["update-index", "-z", "--add", "--index-info"], info, env)
        tree = text(_git(repo, ["write-tree"], env=env).stdout).strip()
    return text(_git(repo, ["commit-tree", "--no-gpg-sign", tree, "-m", f"fleetdeck restore point {point_id}"],
                     env=_IDENTITY).stdout).strip()


def state_of(repo: str, rel: str) -> str:
    """absent | dir:<perm> | link:<target> | file:<perm>:<sha256> | other (what an undo compares)."""
    full = os.path.join(repo, rel)
    try:
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            return "link:" + os.readlink(full)
        if stat.S_ISDIR(st.st_mode):
            return f"dir:{stat.S_IMODE(st.st_mode):o}"
        if not stat.S_ISREG(st.st_mode):
            return "other"
        digest = hashlib.sha256()
        with open(full, "rb", buffering=0) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return f"file:{stat.S_IMODE(st.st_mode):o}:{digest.hexdigest()}"
    except FileNotFoundError:
        return "absent"
    except (NotADirectoryError, OSError) as exc:
        return f"unreadable:{exc.errno}"


def write_back(repo: str, entries: dict[str, list | None]) -> int:
    """Make each path exactly as saved: absent ones removed (deepest first), then folders and files created
    (shallowest first). Never through a symlinked folder out of the repository. Returns paths written."""
    for rel in sorted((p for p, v in entries.items() if v is None), key=lambda p: -p.count("/")):
        if behind_link(repo, rel):
            continue        # absent, as git sees it; what the link leads to is not the repository's
        full = _inside(repo, rel)
        st = _lstat(full)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(full)
        elif st is not None and not os.listdir(full):
            os.rmdir(full)
    written = 0
    for rel in sorted((p for p, v in entries.items() if v is not None), key=lambda p: p.count("/")):
        mode, blob, perm = _entry(entries[rel])
        full = _inside(repo, rel)
        st = _lstat(full)
        if mode == DIR:
            if st is not None and not stat.S_ISDIR(st.st_mode):
                os.unlink(full)
            os.makedirs(full, exist_ok=True)
            os.chmod(full, perm)
            continue
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(full)  # an empty folder left where the file was; a full one raises and stops the undo
            else:
                os.unlink(full)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        data = _git(repo, ["cat-file", "blob", blob]).stdout
        if mode == "120000":
            os.symlink(os.fsdecode(data), full)
        else:
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                os.fchmod(fh.fileno(), perm)
        written += 1
    return written


def _entry(value: list) -> tuple[str, str | None, int]:
    """(mode, blob, perm); restore points saved before permission bits were kept hold [mode, blob]."""
    mode, blob = value[0], value[1]
    perm = value[2] if len(value) > 2 else (0o755 if mode == "100755" else 0o644)
    return mode, blob, perm


def _inside(repo: str, rel: str) -> str:
    """The path, when it stays inside the repository (no symlinked folder on the way out)."""
    full = os.path.join(repo, rel)
    parent = os.path.realpath(os.path.dirname(full))
    root = os.path.realpath(repo)
    if os.path.commonpath([parent, root]) != root:
        raise FleetError("BAD_PATH", f"{rel!r} now leads outside the repository through a symlink")
    return full
