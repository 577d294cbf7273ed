"""Local rows as the hub stores them, and what leaves the machine under `[team] share`.

`share = "paths"` sends rows as the index holds them. `share = "names"` sends repo names and states and no
absolute path: the path columns go, a worktree is named by its path inside the repo, presence by the repo's
name, and every string anywhere in a row (reflog messages, errors, previews) has the machine's own prefixes
(the fleet's roots, each repo's path, the home folder) replaced by `…`, then any absolute path left (a linked
worktree or a git dir elsewhere, a `file://` URL) by `…/` and its last component. Audit entries then travel as their
chain links only (seq, hash, previous hash, signature, event, time), never the signed text.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

HIDDEN = "…"
PATH_KEYS = ("path", "root", "gitdir", "repo_path")
# An absolute path not after a word, a dot, a colon or a slash (so `origin/main` and `host:/srv` stay), or a file URL.
ABSOLUTE = re.compile(r"file://[^\s'\"]*|(?<![\w.~:/…-])/[^\s'\"]+")
AUDIT_LINK_KEYS = ("seq", "at", "event", "chain", "prev_hash", "hash", "key_id", "sig", "op", "decision", "risk")


@dataclass(frozen=True)
class Share:
    """What may leave the machine: everything (`paths`) or names and states (`names`)."""

    names: bool
    prefixes: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, mode: str, prefixes: list[str]) -> "Share":
        home = os.path.expanduser("~")
        found = {os.path.normpath(p) for p in [*prefixes, home] if p and os.path.isabs(p) and p != "/"}
        return cls(mode == "names", tuple(sorted(found, key=len, reverse=True)))

    def text(self, value: str) -> str:
        if not self.names:
            return value
        for prefix in self.prefixes:
            if prefix in value:
                value = value.replace(prefix, HIDDEN)
        return ABSOLUTE.sub(_last_component, value)

    def value(self, value: Any) -> Any:
        """`value` with every string scrubbed (names mode), keys of absolute paths dropped from dicts."""
        if not self.names:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items() if k not in PATH_KEYS}
        return value

    def inside(self, path: str | None, repo_path: str | None) -> str:
        """A path as the hub keys it: itself, or (names) relative to its repo, else scrubbed."""
        if not self.names or not path:
            return path or ""
        if repo_path and (path == repo_path or path.startswith(repo_path.rstrip("/") + "/")):
            return os.path.relpath(path, repo_path)
        return self.text(path)


def _last_component(match: re.Match) -> str:
    return f"{HIDDEN}/{os.path.basename(match.group(0).rstrip('/'))}"


def digest(row: Any) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:32]


def preview_digest(preview: Any) -> str:
    """The digest of a proposal's preview, the same whether it is read as stored (JSON text) or decoded."""
    if isinstance(preview, str):
        try:
            preview = json.loads(preview)
        except ValueError:
            pass
    return digest(preview)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)  # one encoder: json.dumps makes one per call


def jsonb(value: Any) -> str:
    return _ENCODER.encode(value)


# A record's lists that are not the repo row: its children go to their own hub tables; stashes and remotes stay on
# the machine (a remote URL may carry a credential).
NOT_IN_RECORD = ("branches", "worktrees", "submodules", "stash_list", "remotes")


def repo(machine: str, record: dict, share: Share) -> tuple[tuple, dict[str, list[tuple]]]:
    """The `repos` row and its children's rows (branches, worktrees, submodules)."""
    path = record.get("path")
    plain = {k: v for k, v in record.items() if k not in NOT_IN_RECORD}
    row = (machine, plain["id"], plain["name"], None if share.names else path, plain.get("generation") or 0,
           plain.get("score") or 0, bool(plain.get("gone")), jsonb(share.value(plain)))
    children = {
        "branches": [(machine, plain["id"], b["name"], jsonb(share.value(b))) for b in record.get("branches", [])],
        "worktrees": [(machine, plain["id"], share.inside(w["path"], path),
                       jsonb({**share.value(w), "path": share.inside(w["path"], path)}))
                      for w in record.get("worktrees", [])],
        "submodules": [(machine, plain["id"], s["path"], jsonb(share.value(s)))
                       for s in record.get("submodules", [])],
    }
    return row, children


def event(machine: str, ev: dict, share: Share) -> tuple:
    return (machine, ev["id"], ev["repo_id"], ev["ref"], ev["kind"], ev["at"], jsonb(share.value(ev)))


def presence(machine: str, row: dict, share: Share) -> tuple:
    repo = (row.get("repo_name") or os.path.basename(row["repo"])) if share.names else row["repo"]
    return (machine, row["agent"], repo, row.get("session") or "", row["state"],
            jsonb({**share.value(row), "repo": repo}))


def proposal(machine: str, row: dict, names: dict[str, str], share: Share) -> tuple:
    """The mirrored proposal, with `preview_digest`: the digest of the preview as this machine holds it, which
    a decision made on the hub signs (fleet/team/decisions.py) and this machine checks before acting."""
    row = {**row, "preview_digest": preview_digest(row.get("preview"))}
    shown = {**row, "repo": names.get(row["repo"], os.path.basename(row["repo"]))} if share.names else row
    return (machine, row["id"], row["status"], row["created_at"], row["expires_at"], jsonb(share.value(shown)))


def lost(machine: str, repo_id: int, commit: dict, share: Share) -> tuple:
    return (machine, repo_id, commit["sha"], commit["dropped_at"], jsonb(share.value(commit)))


def audit(machine: str, chain: str, entry: dict, line: bytes, share: Share) -> tuple:
    """Paths: the entry and its exact signed line (the hub's copy can be verified on its own). Names: the
    chain's links only, checked against the machine's own log. `chain`: the log's identity on the hub."""
    if share.names:
        return (machine, chain, entry["seq"], entry.get("hash") or "",
                jsonb({k: entry[k] for k in AUDIT_LINK_KEYS if k in entry}), None)
    return (machine, chain, entry["seq"], entry.get("hash") or "", jsonb(entry), line.decode("utf-8", "replace"))
