"""Two snapshots side by side: what changed, and what uncommitted work vanished without becoming a commit.

Work is *discarded* when content that was uncommitted in the older snapshot (it differed from that
snapshot's HEAD, or was untracked) is gone from the newer one — the path deleted, or put back to the newer
HEAD's version — and did not move into a new stash entry. An edit that replaces content with other content
is editing, not discarding; a commit keeps the content (HEAD then holds it). A stash entry that disappeared
without its changes showing up in the working tree (a `stash pop` shows them) was dropped: discarded too.
"""

from __future__ import annotations

from fleet.snapshot.objects import ZERO
from fleet.snapshot.shadow import Shadow

MAX_LISTED = 200
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


Change = tuple[str, str, str, str, str, str]   # (status letter, old sha, new sha, path, new mode, old mode)
MAX_PATH_ARGS = 200


def raw_diff(shadow: Shadow, old: str, new: str, paths: list[str] = ()) -> list[Change]:
    """`git diff-tree -r` between two trees (or commits), one Change per changed path."""
    args = ["diff-tree", "-r", "-z", "--no-renames", "--raw", old, new]
    if paths:
        args += ["--", *paths]
    out = shadow.git(["--literal-pathspecs", *args]).stdout
    fields = out.split(b"\0")
    changes = []
    for i in range(0, len(fields) - 1, 2):
        head, path = fields[i], fields[i + 1]
        if not head.startswith(b":"):
            continue
        old_mode, new_mode, old_sha, new_sha, status = head[1:].split(b" ")
        changes.append((status.decode()[:1], old_sha.decode(), new_sha.decode(),
                        path.decode("utf-8", "surrogateescape"), new_mode.decode(), old_mode.decode()))
    return changes


def blobs_at(shadow: Shadow, treeish: str | None, paths: list[str]) -> dict[str, str]:
    """Each path's `mode sha` in `treeish` (a commit or tree the store or the repository holds): a file's
    content is its bytes and its mode, so an exec bit put back counts as a change undone."""
    if not treeish or not paths:
        return {}
    named = paths if len(paths) <= MAX_PATH_ARGS else []      # many paths: the whole tree, filtered here
    out = shadow.git(["--literal-pathspecs", "ls-tree", "-r", "-z", treeish, "--", *named],
                     ok_codes=(0, 128)).stdout
    wanted = set(paths)
    found = {}
    for entry in out.split(b"\0"):
        if b"\t" in entry:
            info, raw = entry.split(b"\t", 1)
            path = raw.decode("utf-8", "surrogateescape")
            if path in wanted:
                mode, _, sha = info.decode().split(" ")
                found[path] = f"{mode} {sha}"
    return found


def _sizes(shadow: Shadow, shas: list[str]) -> int:
    if not shas:
        return 0
    out = shadow.git(["cat-file", "--batch-check=%(objectsize)"], input_bytes=("\n".join(shas) + "\n").encode()).stdout
    return sum(int(line) for line in out.split() if line.isdigit())


def _lines(shadow: Shadow, old: str, new: str, paths: list[str]) -> int:
    if not paths:
        return 0
    named = paths if len(paths) <= MAX_PATH_ARGS else []
    out = shadow.git(["--literal-pathspecs", "diff-tree", "-r", "-z", "--no-renames", "--numstat", old, new,
                      "--", *named]).stdout
    wanted = set(paths)
    total = 0
    for record in out.split(b"\0"):
        parts = record.split(b"\t")
        if len(parts) >= 3 and parts[1].isdigit() and parts[2].decode("utf-8", "surrogateescape") in wanted:
            total += int(parts[1])
    return total


def discarded_between(shadow: Shadow, old: dict, new: dict) -> tuple[int, dict | None]:
    """How many paths changed from `old` to `new`, and the discarded work (None when nothing was lost)."""
    changes = raw_diff(shadow, old["tree"], new["tree"])
    candidates = [(path, f"{old_mode} {old_sha}", old_sha) for status, old_sha, _, path, _, old_mode in changes
                  if status in "DMT"]
    lost: list[str] = []
    lost_blobs: list[str] = []
    if candidates:
        paths = [p for p, _, _ in candidates]
        old_head = blobs_at(shadow, old["head"], paths)
        new_head = blobs_at(shadow, new["head"], paths)
        new_work = {path: f"{mode} {new_sha}" for _, _, new_sha, path, mode, _ in changes}
        stashed: dict[str, set[str]] = {}
        for tip in new["stash"]:
            if tip not in old["stash"]:
                for path, sha in blobs_at(shadow, tip, paths).items():
                    stashed.setdefault(path, set()).add(sha)
                for path, sha in blobs_at(shadow, f"{tip}^3", paths).items():
                    stashed.setdefault(path, set()).add(sha)
        kept = {f"{mode} {new_sha}" for status, _, new_sha, _, mode, _ in changes if status in "AMT"}
        for path, was, old_sha in candidates:
            if old_head.get(path) == was or was in stashed.get(path, ()) or was in kept:
                continue                        # committed, moved into a new stash entry, or moved (a rename)
            after = new_work[path]
            if after.endswith(ZERO) or after == new_head.get(path):
                lost.append(path)
                lost_blobs.append(old_sha)
    dropped = [tip for tip in old["stash"] if tip not in new["stash"] and not _popped(shadow, tip, new["tree"])]
    if not lost and not dropped:
        return len(changes), None
    return len(changes), {
        "files": lost[:MAX_LISTED], "count": len(lost), "lines": _lines(shadow, old["tree"], new["tree"], lost),
        "bytes": _sizes(shadow, lost_blobs), "stashes_dropped": dropped, "agents": new["agents"],
        "command": new.get("command")}


def _popped(shadow: Shadow, tip: str, tree: str) -> bool:
    """Whether a stash entry that left the list was applied: every path it changed (over its base), and every
    untracked file it holds (`stash -u`: its third parent), has the stash's content in the working tree now."""
    changed = raw_diff(shadow, f"{tip}^1", tip)
    if shadow.git(["rev-parse", "-q", "--verify", f"{tip}^3^{{commit}}"], ok_codes=(0, 1, 128)).stdout.strip():
        changed += raw_diff(shadow, EMPTY_TREE, f"{tip}^3")
    if not changed:
        return True
    wanted = {path: f"{mode} {sha}" for _, _, sha, path, mode, _ in changed}
    now = blobs_at(shadow, tree, list(wanted))
    return all(now.get(path, ZERO) == value for path, value in wanted.items())
