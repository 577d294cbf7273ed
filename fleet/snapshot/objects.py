"""Git objects written and read by fleetdeck itself, in a shadow store only.

Writing a blob, tree or commit through git would freshen (`utime`) an equal object that git finds in an
alternate object directory — the repository's own store — so the shadow store writes its loose objects here,
in Python, and git only ever reads them. Loose objects are zlib-compressed `<type> <size>\\0<body>` named by
the SHA-1 of that header and body (sha1 repositories only; a sha256 repository is refused upstream).
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path

from fleet.fsio import replace_file

ZERO = "0" * 40


def object_id(kind: bytes, body: bytes) -> str:
    return hashlib.sha1(b"%s %d\0" % (kind, len(body)) + body).hexdigest()


def write_object(objects: Path, kind: bytes, body: bytes) -> str:
    """Store one object in `objects` (a shadow store's object directory) unless it is already loose there;
    written to a temp file and renamed, so a killed process never leaves a half object under its name."""
    header = b"%s %d\0" % (kind, len(body))
    sha = hashlib.sha1(header + body).hexdigest()
    folder = objects / sha[:2]
    target = folder / sha[2:]
    if target.exists():
        return sha
    folder.mkdir(mode=0o700, exist_ok=True)
    compressor = zlib.compressobj(1)
    replace_file(target, compressor.compress(header) + compressor.compress(body) + compressor.flush(), 0o400)
    return sha


def commit_body(tree: str, parents: list[str], message: str, when: float) -> bytes:
    """A commit by fleetdeck itself (the shadow store never needs the person's identity)."""
    stamp = f"fleetdeck <fleetdeck@localhost> {int(when)} +0000"
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents), f"author {stamp}", f"committer {stamp}", "",
             message]
    return "\n".join(lines).encode("utf-8")
