"""What a preview relied on, pinned so the executor can check nothing moved before it runs.

A pin holds HEAD (its branch and sha), the sha of every ref the preview saw, and a fingerprint of the
working-tree state: `git status` (porcelain v2, every untracked file listed) plus the exact bytes of every
file it lists, for the whole tree or for the paths the operation touches. Any difference at execution time
means the person approved something that is no longer what would happen: the proposal fails, nothing runs.
"""

from __future__ import annotations

import hashlib
import os

from fleet.errors import FleetError
from fleet.git.run import run, text
from fleet.git.status import Status, parse_status

STATUS = ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--ignore-submodules=none"]


def head_state(repo: str) -> tuple[str | None, str | None]:
    """(the branch HEAD points at as a full ref, or None when detached; HEAD's sha, or None when unborn)."""
    sym = run(repo, ["symbolic-ref", "-q", "HEAD"], ok_codes=(0, 1))
    ref = text(sym.stdout).strip() or None
    return ref, ref_sha(repo, "HEAD")


def ref_sha(repo: str, ref: str) -> str | None:
    """The sha a full ref name (or HEAD) points at, None when it does not exist."""
    result = run(repo, ["rev-parse", "--verify", "--quiet", "--end-of-options", ref], check=False)
    sha = text(result.stdout).strip()
    return sha if result.returncode == 0 and sha else None


def read_status(repo: str, paths: list[str] | None = None) -> tuple[Status, bytes]:
    spec = ["--", *paths] if paths else []
    data = run(repo, [*STATUS, *spec]).stdout
    return parse_status(data), data


def content_hash(full: str) -> str:
    try:
        if os.path.islink(full):
            return "link:" + os.readlink(full)
        if os.path.isdir(full):
            return "dir"
        digest = hashlib.sha256()
        with open(full, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return "file:" + oct(os.stat(full).st_mode & 0o111) + ":" + digest.hexdigest()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def tree_fingerprint(repo: str, paths: list[str] | None = None) -> str:
    """sha256 over the status of `paths` (or the whole tree) and the exact bytes of every file it lists."""
    status, raw = read_status(repo, paths)
    digest = hashlib.sha256(raw)
    for entry in status.entries:
        for path in filter(None, (entry.path, entry.orig_path)):
            digest.update(b"\0" + path.encode("utf-8", "surrogateescape") + b"\0")
            digest.update(content_hash(os.path.join(repo, path)).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def index_digest(repo: str) -> str:
    """sha256 of what the index holds relative to HEAD (paths, modes, blob ids): what a commit would record."""
    raw = run(repo, ["diff-index", "--cached", "--raw", "-z", "--no-abbrev", "HEAD"]).stdout
    return hashlib.sha256(raw).hexdigest()


def pin(repo: str, refs: list[str], paths: list[str] | None, index: bool = False, head: bool = True) -> dict:
    """Everything the executor re-checks: HEAD (unless `head` is False), the refs the op reads or moves, the
    working-tree state (`paths` None: the whole tree; [] : none of it) and, with `index`, the whole index."""
    head_ref, head_sha = head_state(repo)
    return {"head_ref": head_ref, "head": head_sha, "head_pinned": head,
            "refs": {r: ref_sha(repo, r) for r in refs},
            "tree_paths": paths, "tree": tree_fingerprint(repo, paths) if paths != [] else None,
            "index": index_digest(repo) if index and head_sha else None}


def revalidate(repo: str, pins: dict) -> None:
    """STALE, naming what changed, when the repository is no longer what the preview saw."""
    if not os.path.isdir(repo):
        raise FleetError("STALE", f"the repository {repo} is gone")
    head_ref, head = head_state(repo)
    changed = []
    if not pins.get("head_pinned", True):
        head_ref, head = pins["head_ref"], pins["head"]
    if head_ref != pins["head_ref"]:
        changed.append(f"HEAD now points at {head_ref or 'a detached commit'} (was {pins['head_ref'] or 'detached'})")
    if head != pins["head"]:
        changed.append(f"HEAD moved from {_short(pins['head'])} to {_short(head)}")
    for ref, sha in pins["refs"].items():
        now = ref_sha(repo, ref)
        if now != sha:
            changed.append(f"{ref} moved from {_short(sha)} to {_short(now)}")
    if pins.get("index") and index_digest(repo) != pins["index"]:
        changed.append("the index (what would be committed) changed since the preview")
    if pins["tree_paths"] != [] and tree_fingerprint(repo, pins["tree_paths"]) != pins["tree"]:
        where = ", ".join(pins["tree_paths"][:5]) if pins["tree_paths"] else "the working tree"
        changed.append(f"{where} changed since the preview (index or files)")
    if changed:
        raise FleetError("STALE", "the repository changed since the preview: " + "; ".join(changed))


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "nothing"
