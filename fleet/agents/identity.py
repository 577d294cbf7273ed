"""The identity string every proposal carries in `agent`, and what it grants.

An agent that presented a valid credential is its credential's name (`claude-code`); any other MCP client is
`unknown:<declared name>`: the `unknown:` prefix cannot be a credential's name (no `:` in names), so the
string alone says whether it was authenticated. Unauthenticated clients get no `auto`, match only policy
rules that name no agent (or `agent = "unknown"`), share one pending quota (`quota_key` is `unknown` for
all of them) and may cancel only what their own MCP session proposed.
"""

from __future__ import annotations

import re

UNKNOWN = "unknown"
UNKNOWN_PREFIX = UNKNOWN + ":"
PERSON = "person"  # the person's own proposals (an undo): never an agent's name
RESERVED = frozenset({UNKNOWN, PERSON})
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_DECLARED_JUNK = re.compile(r"[^a-z0-9._-]+")


def declared_name(name: object) -> str:
    """A client's self-declared name as fleetdeck shows it: lower case, `[a-z0-9._-]`, at most 64 characters
    (`anonymous` when it declared nothing usable). Never an identity on its own."""
    text = name.strip().lower() if isinstance(name, str) else ""
    return _DECLARED_JUNK.sub("-", text).strip("-.")[:64] or "anonymous"


def unknown(declared: object) -> str:
    """The identity of a client without a valid credential."""
    return UNKNOWN_PREFIX + declared_name(declared)


def is_authenticated(agent: str) -> bool:
    """Whether an identity string came from a credential (or is the person's own)."""
    return not agent.startswith(UNKNOWN_PREFIX) and agent != UNKNOWN


def quota_key(agent: str) -> str:
    """What the pending quota counts under: the agent's name, or `unknown` for every unauthenticated client."""
    return agent if is_authenticated(agent) else UNKNOWN


def rule_matches(pattern: str, agent: str, match) -> bool:
    """A policy rule's `agent` glob against an identity: authenticated names are matched by the glob; an
    unauthenticated client only by `*` (any agent at all) or `unknown` (every unauthenticated client)."""
    if is_authenticated(agent):
        return pattern != UNKNOWN and match(agent, pattern)
    return pattern in ("*", UNKNOWN)
