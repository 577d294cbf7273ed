"""The audit format's fixed parts: versions, field names, canonical JSON and the entry hash.

Canonical JSON: keys sorted, separators `,` and `:` with no spaces, UTF-8 without escaping non-ASCII, and no
floats anywhere (durations are integer microseconds), so a verifier in any language re-serializes an entry
to the same bytes. `hash` = "sha256:" + hex SHA-256 of the canonical JSON of the entry without `hash` and
`sig`; `sig` signs the hash (see keys.py), and the hash covers `key_id` and the version fields.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

SCHEMA = 1       # the set of fields and their meaning
CHAIN = 1        # canonicalization + hash construction
SIGNATURE = 1    # Ed25519 over SIG_DOMAIN + hash; 0 = unsigned
GENESIS = "genesis"
MAX_ENTRY_BYTES = 256 * 1024
SUMMARY_CHARS = 512
NAME_CHARS = 200

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

# Set by the log itself, never by a caller.
RESERVED = frozenset({"schema", "chain", "signature", "seq", "id", "at", "prev_hash", "hash", "key_id", "sig"})


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical(value: Any) -> bytes:
    return _CANONICAL.encode(value).encode("utf-8")


def entry_hash(entry: dict[str, Any]) -> str:
    """The hash an entry (or a segment header, a checkpoint, an anchor) must carry."""
    body = {k: v for k, v in entry.items() if k not in ("hash", "sig")}
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def plain(value: Any) -> Any:
    """JSON-able form of tool arguments (pydantic models dumped, anything else as its str)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def clean_text(text: object, limit: int) -> str:
    """A short single-line string: control characters become spaces, cut to `limit` characters."""
    out = _CONTROL.sub(" ", str(text)[:limit])
    if not out.isascii():
        out = out.encode("utf-8", "replace").decode("utf-8")   # lone surrogates cannot be written as UTF-8
    return out
