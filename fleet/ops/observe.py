"""What an executed proposal changed beyond what its preview listed: a hook's doing, never silent.

A person's approved run lets the repository's hooks run (the preview said which); a `pre-commit` hook can
still add a file to the commit, or write one into the work tree. So the executor notes the repository's
state (HEAD, every `git status` entry with its content hash) right before the op runs and compares after:
every changed path that the preview never named — not in its file lists, and not among the paths between
the old HEAD and a commit the preview named as the destination (a checkout's target, a merge's source) —
is reported in the result's `unexpected_changes`, as `{path, where: commit|work tree}`.
"""

from __future__ import annotations

import os

from fleet.errors import FleetError
from fleet.git.run import run, text
from fleet.ops.pins import content_hash, head_state, read_status

MAX_REPORTED = 200
_PATH_LISTS = ("files", "files_changing", "untracked", "untracked_files", "untracked_deleted",
               "uncommitted_changes_discarded", "files_restored", "local_changes_carried")
_DESTINATIONS = ("source_sha", "onto_sha", "start_sha", "start", "stash")


def before(repo: str) -> dict | None:
    """HEAD and every status entry (with the bytes it names, hashed), right before the op runs; None when
    the repository cannot be read (the report then says so)."""
    try:
        return _state(repo)
    except FleetError:
        return None


def _state(repo: str) -> dict:
    _, head = head_state(repo)
    status, _ = read_status(repo)
    entries = {}
    for entry in status.entries:
        for path in filter(None, (entry.path, entry.orig_path)):
            entries[path] = f"{entry.kind}{entry.xy}:{content_hash(os.path.join(repo, path))}"
    return {"head": head, "entries": entries}


def _listed(preview: dict) -> tuple[set[str], list[str], bool]:
    """(the paths a preview names, the commits it names as where HEAD or the tree is going, whether its
    lists are whole: a list cut for display, `files_changing` of `files_changing_count`, is not)."""
    paths: set[str] = set()
    commits: list[str] = []
    whole = True
    for key in _PATH_LISTS:
        if isinstance(preview.get(f"{key}_count"), int) and preview[f"{key}_count"] > len(preview.get(key) or []):
            whole = False
        for item in preview.get(key) or []:
            if isinstance(item, str):
                paths.add(item)
            elif isinstance(item, dict):
                paths.update(p for p in (item.get("path"), item.get("from")) if isinstance(p, str))
    if isinstance(preview.get("path"), str):
        paths.add(preview["path"])
    for key, field in (("to", "head"), ("head", "restored")):
        value = preview.get(key)
        commits.append(value.get(field) if isinstance(value, dict) else value)
    commits += [preview.get(key) for key in _DESTINATIONS]
    for step in preview.get("steps") or []:
        sub_paths, sub_commits, sub_whole = _listed(step.get("preview") or {})
        paths |= sub_paths
        commits += sub_commits
        whole = whole and sub_whole
    return paths, [c for c in commits if isinstance(c, str) and c], whole


def _changed(repo: str, a: str, b: str) -> list[str]:
    result = run(repo, ["diff-tree", "-r", "--no-renames", "--name-only", "-z", a, b, "--"], check=False)
    return [p for p in text(result.stdout).split("\0") if p] if result.returncode == 0 else []


def unexpected(repo: str, seen: dict, preview: dict) -> list[dict]:
    """The paths the run changed that the preview never listed (the work tree's only when the preview's
    lists are whole; the commits' always, against the destinations' full diffs)."""
    expected, destinations, whole = _listed(preview)
    now = _state(repo)
    old_head = seen["head"]
    if old_head:
        for commit in destinations:
            expected.update(_changed(repo, old_head, commit))
    out = []
    if old_head and now["head"] and now["head"] != old_head:
        out += [{"path": p, "where": "commit"} for p in _changed(repo, old_head, now["head"]) if p not in expected]
    moved = {p for p in seen["entries"].keys() | now["entries"].keys()
             if seen["entries"].get(p) != now["entries"].get(p)} if whole else set()
    committed = {item["path"] for item in out}
    out += [{"path": p, "where": "work tree"} for p in sorted(moved) if p not in expected and p not in committed]
    return out[:MAX_REPORTED]


def report(repo: str, seen: dict | None, preview: dict, neutral: bool) -> dict:
    """The result's fields: `unexpected_changes` (None, with the reason, when the state could not be
    read); with `neutral`, the repository code that was left out."""
    try:
        if seen is None:
            raise FleetError("GIT_FAILED", "the state before the run could not be read")
        out: dict = {"unexpected_changes": unexpected(repo, seen, preview)}
    except FleetError as exc:
        out = {"unexpected_changes": None, "unexpected_changes_unknown": exc.message}
    if neutral and preview.get("repo_code"):
        out["repo_code_skipped"] = preview["repo_code"]
    return out
