"""Recent commits on a repository's HEAD, for the repo page (one `git log`, NUL-delimited)."""

from __future__ import annotations

from fleet.gitrun import run_git
from fleet.reader import iso

_FORMAT = "%H%x00%P%x00%an%x00%at%x00%s"
_FIELDS = 5


def recent_commits(path: str, head: str | None, limit: int = 20) -> list[dict]:
    """The newest `limit` commits reachable from HEAD (empty for a repo with no commits)."""
    if head is None:
        return []
    out = run_git(path, ["log", "-z", f"--max-count={int(limit)}", f"--format={_FORMAT}", "HEAD", "--"],
                  max_bytes=1024 * 1024).stdout
    parts = out.decode("utf-8", "replace").split("\0")
    commits = []
    for i in range(0, len(parts) - _FIELDS + 1, _FIELDS):
        sha, parents, author, at, subject = parts[i:i + _FIELDS]
        commits.append({"sha": sha, "parents": parents.split(), "author": author,
                        "at": iso(int(at)), "subject": subject})
    return commits
