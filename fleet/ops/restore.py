"""Restore points: everything needed to bring a repository back to the moment before a proposal ran.

Taken by the executor right before it runs anything, kept until pruned by an explicit command:
- refs under `refs/fleetdeck/restore/<id>/`: HEAD, every ref the operation will move, a `git stash create`
  snapshot of index and working tree (`.../stash`), and a commit holding the exact bytes (no filters) of
  every file that differs from HEAD or the index, untracked ones too when the operation deletes them
  (`.../files`): `git stash create` alone does not hold untracked files;
- a row in `restore_points`: HEAD's branch and sha, the saved refs (None = did not exist), the index as a
  tree, the file list (path, mode, blob; or deleted), the untracked paths, and the state after the
  operation (so an undo can refuse when someone changed the repository since).

Restoring puts refs and HEAD back, the index and tracked files with `read-tree -u --reset`, then writes
the saved files' exact bytes; files that were untracked before keep the content they have now.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from fleet.errors import FleetError
from fleet.git.run import run, text
from fleet.index.store import Index
from fleet.ops.gitexec import exec_git
from fleet.ops.state import head_state, read_status, ref_sha, revalidate
from fleet.repo.record import iso

PREFIX = "refs/fleetdeck/restore"
MAX_UNTRACKED = 10000


def restore_ref(point_id: str, ref: str) -> str:
    return f"{PREFIX}/{point_id}/{ref[5:] if ref.startswith('refs/') else ref}"


def _save_blobs(repo: str, paths: list[str]) -> dict[str, list]:
    """{path: [mode, blob]} with each file's exact bytes written as a blob (no clean filter), or
    {path: None} for a path that does not exist in the working tree."""
    saved: dict[str, list | None] = {}
    regular = []
    for rel in paths:
        full = os.path.join(repo, rel)
        if os.path.islink(full):
            blob = text(exec_git(repo, ["hash-object", "-w", "--stdin"],
                                 input_bytes=os.fsencode(os.readlink(full))).stdout).strip()
            saved[rel] = ["120000", blob]
        elif os.path.isfile(full):
            regular.append(rel)
        elif not os.path.lexists(full):
            saved[rel] = None
    if regular:
        lines = exec_git(repo, ["hash-object", "-w", "--no-filters", "--stdin-paths"],
                         input_bytes=b"".join(os.fsencode(p) + b"\n" for p in regular)).stdout.split()
        for rel, blob in zip(regular, lines):
            mode = "100755" if os.stat(os.path.join(repo, rel)).st_mode & 0o111 else "100644"
            saved[rel] = [mode, blob.decode("ascii")]
    return saved


def _files_commit(repo: str, point_id: str, files: dict[str, list | None]) -> str | None:
    """A commit whose tree holds the saved blobs, so git never prunes them while the restore point lives."""
    entries = [(p, v) for p, v in files.items() if v is not None]
    if not entries:
        return None
    with tempfile.TemporaryDirectory(prefix="fleetdeck-rp-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        info = b"".join(f"{mode} {blob}\t".encode() + os.fsencode(path) + b"\0" for path, (mode, blob) in entries)
        exec_git(repo, ["update-index", "-z", "--add", "--index-info"], input_bytes=info, extra_env=env)
        tree = text(exec_git(repo, ["write-tree"], extra_env=env).stdout).strip()
    return text(exec_git(repo, ["commit-tree", tree, "-m", f"fleetdeck restore point {point_id}"],
                         extra_env={"GIT_AUTHOR_NAME": "fleetdeck", "GIT_AUTHOR_EMAIL": "fleetdeck@localhost",
                                    "GIT_COMMITTER_NAME": "fleetdeck",
                                    "GIT_COMMITTER_EMAIL": "fleetdeck@localhost"}).stdout).strip()


def take(index: Index, repo: str, point_id: str, refs: list[str], untracked_content: list[str],
         undo: dict | None = None) -> dict:
    """Save the repository's state before proposal `point_id` runs. `refs` are the refs it will move;
    `untracked_content` the untracked paths it may delete (their bytes are saved too)."""
    head_ref, head = head_state(repo)
    status, _ = read_status(repo)
    if status.conflicted:
        raise FleetError("CONFLICT", "the repository has unresolved conflicts; finish or abort that first")
    changed = sorted({p for e in status.entries if e.kind in "12" for p in (e.path, e.orig_path) if p})
    untracked = [e.path for e in status.entries if e.kind == "?"]
    if len(untracked) > MAX_UNTRACKED:
        raise FleetError("LIMIT", f"more than {MAX_UNTRACKED} untracked files: a restore point cannot list them")
    files = _save_blobs(repo, sorted(set(changed) | set(untracked_content)))
    saved_refs = {ref: ref_sha(repo, ref) for ref in dict.fromkeys([*refs, *([head_ref] if head_ref else [])])}
    index_tree = text(exec_git(repo, ["write-tree"]).stdout).strip()
    snapshot = text(exec_git(repo, ["stash", "create"], literal=False).stdout).strip() or None
    files_commit = _files_commit(repo, point_id, files)
    keep = {"HEAD": head, "stash": snapshot, "files": files_commit,
            **{ref: sha for ref, sha in saved_refs.items()}}
    updates = "".join(f"update {restore_ref(point_id, ref)} {sha}\n" for ref, sha in keep.items() if sha)
    if updates:
        exec_git(repo, ["update-ref", "--stdin"], input_bytes=updates.encode())
    row = {"id": point_id, "repo": repo, "created_at": time.time(), "head_ref": head_ref, "head": head,
           "refs": json.dumps(saved_refs), "index_tree": index_tree, "stash_snapshot": snapshot,
           "files_commit": files_commit, "files": json.dumps({"saved": files, "untracked": untracked,
                                                              "undo": undo or {}})}
    with index.write() as conn:
        conn.execute(f"INSERT OR REPLACE INTO restore_points ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     tuple(row.values()))
    return details(index, point_id)


def record_after(index: Index, point_id: str, after: dict, undo: dict) -> None:
    """The state the proposal left (an undo checks it is still so) and the undo steps its run reported."""
    with index.write() as conn:
        row = conn.execute("SELECT files FROM restore_points WHERE id = ?", (point_id,)).fetchone()
        files = json.loads(row[0])
        files["undo"] = {**files.get("undo", {}), **undo}
        conn.execute("UPDATE restore_points SET after = ?, files = ? WHERE id = ?",
                     (json.dumps(after), json.dumps(files), point_id))


def details(index: Index, point_id: str) -> dict:
    cur = index.conn.execute("SELECT * FROM restore_points WHERE id = ?", (point_id,))
    found = cur.fetchone()
    if found is None:
        raise FleetError("NOT_FOUND", f"no restore point {str(point_id)[:80]!r}")
    row = dict(zip([d[0] for d in cur.description], found))
    files = json.loads(row["files"])
    op = index.conn.execute("SELECT op, status FROM proposals WHERE id = ?", (point_id,)).fetchone()
    saved = files["saved"]
    return {
        "restore_point": row["id"], "repo": row["repo"], "created_at": iso(row["created_at"]),
        "op": op[0] if op else None, "proposal_status": op[1] if op else None,
        "head_ref": row["head_ref"], "head": row["head"], "refs": json.loads(row["refs"]),
        "index_tree": row["index_tree"], "stash_snapshot": row["stash_snapshot"],
        "files_commit": row["files_commit"],
        "files": [{"path": p, "saved": v is not None, "mode": v[0] if v else None, "blob": v[1] if v else None}
                  for p, v in sorted(saved.items())],
        "git_refs": [restore_ref(row["id"], r) for r, sha in [("HEAD", row["head"]), ("stash", row["stash_snapshot"]),
                     ("files", row["files_commit"]), *json.loads(row["refs"]).items()] if sha],
        "after": json.loads(row["after"]) if row["after"] else None,
        "pruned": bool(row["pruned"]),
        "undoable": bool(row["after"]) and not row["pruned"],
        "_untracked": files["untracked"], "_saved": saved, "_undo": files.get("undo", {}),
    }


def public(point: dict) -> dict:
    return {k: v for k, v in point.items() if not k.startswith("_")}


def list_points(index: Index, repo: str, limit: int = 200) -> dict:
    rows = index.conn.execute("SELECT id FROM restore_points WHERE repo = ? AND pruned = 0 "
                              "ORDER BY created_at DESC", (repo,)).fetchall()
    points = [public(details(index, r[0])) for r in rows[:limit]]
    for p in points:
        p.pop("files", None)
    return {"repo": repo, "restore_points": points, "truncated": len(rows) > limit,
            "omitted_count": max(0, len(rows) - limit)}


def prune(index: Index, point_id: str) -> dict:
    """The one way a restore point goes: its refs deleted (git may then collect what only they kept) and its
    row marked pruned. Only by the person's explicit command (`fleetdeck restore-points REPO --prune ID`)."""
    point = details(index, point_id)
    if point["pruned"]:
        raise FleetError("NOT_FOUND", f"restore point {point_id} is already pruned")
    refs = text(run(point["repo"], ["for-each-ref", "--format=%(refname)", f"{PREFIX}/{point_id}/"]).stdout).split()
    if refs:
        exec_git(point["repo"], ["update-ref", "--stdin"], input_bytes="".join(f"delete {r}\n" for r in refs).encode())
    with index.write() as conn:
        conn.execute("UPDATE restore_points SET pruned = 1 WHERE id = ?", (point_id,))
    return {"restore_point": point_id, "repo": point["repo"], "refs_deleted": len(refs)}


def check_undo(repo: str, point: dict) -> None:
    """STALE unless the repository is exactly as the proposal left it (an undo must not lose later work)."""
    if point["pruned"]:
        raise FleetError("NOT_FOUND", f"restore point {point['restore_point']} was pruned")
    if not point["after"]:
        raise FleetError("BAD_ARGUMENT", f"restore point {point['restore_point']} belongs to a proposal that did "
                                         "not complete; nothing to undo (see `fleetdeck proposals show`)")
    if os.path.realpath(point["repo"]) != os.path.realpath(repo):
        raise FleetError("BAD_ARGUMENT", "that restore point belongs to another repository")
    try:
        revalidate(repo, point["after"])
    except FleetError as exc:
        raise FleetError("STALE", "cannot undo: " + exc.message.replace("since the preview", "since the "
                                                                        "proposal ran")) from None


def reflog_message(point_id: str) -> str:
    """What an undo writes in the reflogs it moves (fleet.git.files reads it as a `reset`)."""
    return f"fleetdeck: undo {point_id}"


def apply(repo: str, point: dict) -> dict:
    """Bring `repo` back to the restore point. Call check_undo first (and take a restore point of now)."""
    undo = point["_undo"]
    _undo_satellites(repo, undo)
    pre_untracked = [p for p in point["_untracked"] if point["_saved"].get(p) is None
                     and os.path.lexists(os.path.join(repo, p))]
    keep_now = _save_blobs(repo, pre_untracked)  # files that were untracked before: keep today's bytes
    updates = []
    for ref, sha in point["refs"].items():
        updates.append(f"update {ref} {sha}\n" if sha else f"delete {ref}\n")
    why = ["-m", reflog_message(point["restore_point"])]  # the reflog (timeline, digest) says what moved it
    if updates:
        exec_git(repo, ["update-ref", *why, "--stdin"], input_bytes="".join(updates).encode())
    if point["head_ref"]:
        exec_git(repo, ["symbolic-ref", *why, "HEAD", point["head_ref"]])
    elif point["head"]:
        exec_git(repo, ["update-ref", *why, "--no-deref", "HEAD", point["head"]])
    exec_git(repo, ["read-tree", "-u", "--reset", point["index_tree"]])
    written = []
    for rel, value in {**keep_now, **point["_saved"]}.items():
        full = os.path.join(repo, rel)
        _check_inside(repo, rel)
        if value is None:
            if os.path.lexists(full) and not os.path.isdir(full):
                os.unlink(full)
            continue
        mode, blob = value
        data = run(repo, ["cat-file", "blob", blob]).stdout
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full) and not os.path.isdir(full):
            os.unlink(full)
        if mode == "120000":
            os.symlink(os.fsdecode(data), full)
        else:
            with open(full, "wb") as fh:
                fh.write(data)
            os.chmod(full, 0o755 if mode == "100755" else 0o644)
        written.append(rel)
    if undo.get("stash_drop"):
        top = ref_sha(repo, "refs/stash")
        if top == undo["stash_drop"]:
            exec_git(repo, ["stash", "drop", "-q"], literal=False)
    if undo.get("stash_store"):
        exec_git(repo, ["stash", "store", "-m", undo.get("stash_message") or "restored by fleetdeck",
                        undo["stash_store"]])
    return {"head": head_state(repo)[1], "files_written": len(written)}


def _undo_satellites(repo: str, undo: dict) -> None:
    """Undo steps outside the repository's own refs and files: a worktree it added, a submodule it moved."""
    sub = undo.get("submodule_head")
    if sub:
        folder = os.path.join(repo, sub["path"])
        if head_state(folder)[1] != sub["now"]:
            raise FleetError("STALE", f"cannot undo: submodule {sub['path']} moved since")
        if sub["ref"]:
            exec_git(folder, ["switch", "-q", sub["ref"][len("refs/heads/"):]])
        else:
            exec_git(folder, ["switch", "-q", "--detach", sub["sha"]])
    if undo.get("worktree_remove"):
        exec_git(repo, ["worktree", "remove", undo["worktree_remove"]])


def _check_inside(repo: str, rel: str) -> None:
    """A saved path is written only where it stays inside the repository (no symlinked folder on the way)."""
    parent = os.path.realpath(os.path.dirname(os.path.join(repo, rel)))
    root = os.path.realpath(repo)
    if os.path.commonpath([parent, root]) != root:
        raise FleetError("BAD_PATH", f"{rel!r} now leads outside the repository through a symlink")
