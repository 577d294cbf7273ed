"""Recoverable commits: tips that an event dropped (amend, reset, rebase, a deleted branch, leaving a detached
HEAD) and that no ref reaches any more, while git still has the object.

Reachability changes all the time (a branch is recreated, a gc runs), so it is asked of git at query time:
per repo one `cat-file --batch-check` (does the object still exist), one `rev-list CANDIDATES --not --all`
(which of them no ref reaches) and one `log --no-walk` (subjects). Read-only: nothing is written to the repo.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fleet.git.files import is_sha
from fleet.git.run import GitError, run_git
from fleet.index.freshness import history_progress

if TYPE_CHECKING:
    from fleet.index.store import Index

# Events whose old tip may have been dropped: a rewrite, a branch deletion, or HEAD leaving a commit.
_CANDIDATES = ("e.old_sha is not null and (e.rewrote = 1 or (e.kind = 'branch' and e.new_sha is null)"
               " or e.kind = 'checkout')")


def lost_commits(index: "Index", since: float | None = None, repo_ids: list[int] | None = None) -> dict:
    """`{commits: [...], errors: [...], history}`, newest drop first; each commit says where, what, when and
    how; `history` (`fleet.index.freshness.history_progress`) says whether every repo's events are read yet."""
    clauses, args = [_CANDIDATES, "r.gone = 0"], []
    if since is not None:
        clauses.append("e.at >= ?")
        args.append(int(since))
    if repo_ids is not None:
        clauses.append(f"e.repo_id in ({', '.join('?' * len(repo_ids))})")
        args.extend(repo_ids)
    rows = index.conn.execute(
        "select r.id, r.name, r.path, e.old_sha, e.at, e.kind, e.ref, e.message, e.identity"
        " from events e join repos r on r.id = e.repo_id"
        f" where {' and '.join(clauses)} order by e.at desc, e.id desc", args).fetchall()
    by_repo: dict[int, dict[str, tuple]] = {}
    for row in rows:
        drops = by_repo.setdefault(row[0], {})
        drops.setdefault(row[3], row)  # the newest event that dropped this tip
    commits: list[dict] = []
    errors: list[dict] = []
    for drops in by_repo.values():
        first = next(iter(drops.values()))
        name, path = first[1], first[2]
        if not os.path.isdir(path):
            continue
        try:
            details = unreachable_commits(path, list(drops))
        except GitError as exc:
            errors.append({"repo": name, "error": exc.message})
            continue
        for sha, (subject, author, committed_at) in details.items():
            _rid, _name, _path, _sha, at, kind, ref, message, identity = drops[sha]
            commits.append({
                "repo": name, "path": path, "sha": sha, "subject": subject, "author": author,
                "committed_at": committed_at, "dropped_at": at, "dropped_by": kind, "ref": ref,
                "message": message, "identity": identity,
            })
    commits.sort(key=lambda c: (-c["dropped_at"], c["repo"], c["sha"]))
    return {"commits": commits, "errors": errors, "history": history_progress(index)}


def unreachable_commits(path: str, shas: list[str]) -> dict[str, tuple[str, str, int]]:
    """Of `shas`, the commits that still exist but no ref reaches: {sha: (subject, author, commit time)}."""
    shas = [s for s in shas if is_sha(s)]
    if not shas:
        return {}
    check = run_git(path, ["cat-file", "--batch-check"], input_bytes="".join(f"{s}\n" for s in shas).encode())
    present = []
    for line in check.stdout.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "commit":
            present.append(parts[0])
    if not present:
        return {}
    out = run_git(path, ["rev-list", *present, "--not", "--all"]).stdout.decode("ascii", "replace")
    wanted = set(present)
    lost = [s for s in out.split() if s in wanted]
    if not lost:
        return {}
    log = run_git(path, ["log", "--no-walk=unsorted", "-z", "--format=%H%x00%ct%x00%an <%ae>%x00%s", *lost])
    fields = log.stdout.decode("utf-8", "replace").split("\0")
    result: dict[str, tuple[str, str, int]] = {}
    for i in range(0, len(fields) - 3, 4):
        sha, ct, author, subject = fields[i:i + 4]
        result[sha.strip()] = (subject, author, int(ct))
    return result
