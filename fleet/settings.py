"""The person's settings file: `$XDG_CONFIG_HOME/fleetdeck/settings.toml` (or `$FLEETDECK_SETTINGS`).

Every key is declared in SECTIONS with its type, default and meaning, so a typo or a wrong type is a clear
error naming the key instead of a setting silently ignored (a new section is declared here too). A missing
file means every default. Errors are BAD_ARGUMENT, as for the presence switches read from the same file.

    [audit]
    enabled = true                       # false turns the audit log off (shown as "audit off")
    dir = "/mnt/worm/fleetdeck-audit"    # default: <data dir>/audit, next to the index
    key = "~/.config/fleetdeck/audit-keys/1a2b3c4d5e6f7a8b.pem"   # Ed25519 signing key (PKCS8 PEM, 0600)
    verify_keys = ["~/old-key.pub.pem"]  # extra public keys `audit verify` trusts (rotated keys)
    fsync_interval_ms = 200              # fsync at most this long after an append ...
    fsync_batch = 256                    # ... or after this many appends, whichever comes first
    segment_max_bytes = 8388608          # rotate the active segment at this size
    segments_kept = 16                   # rotated segments kept; older ones are pruned behind a checkpoint
    retention_days = 90                  # ... but never one holding an entry younger than this (0: no floor)
    allow_degraded_writes = false        # true: decisions go on while the log cannot be written

    [passkeys]
    require = "high"                     # once one is registered: "high" risk approvals, "all" decisions, "off"

    [approval]
    noninteractive = false               # true: `proposals approve|reject|undo --yes` and `dashboard link`
                                         # work without a terminal (for your own scripts; so would an agent's)
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from fleet.errors import FleetError
from fleet.git.files import BrokenRepo, read_file
from fleet.xdg import config_home

MAX_SETTINGS_BYTES = 256 * 1024


@dataclass(frozen=True)
class Key:
    """One setting: its type, default, bounds (for integers) and what it does."""

    kind: type
    default: Any
    doc: str
    low: int | None = None
    high: int | None = None


SECTIONS: dict[str, dict[str, Key]] = {
    # read by fleet/presence/switches.py (which says what each switch turns off); declared here so a file
    # that sets them is not refused as unknown
    "presence": {
        "read_agent_sessions": Key(bool, True, "read agents' session stores, editor storage and in-repo traces"),
        "record_mcp_clients": Key(bool, True, "record which repos each MCP client works in"),
    },
    "audit": {
        "enabled": Key(bool, True, "record every MCP tool call and decision in the audit log"),
        "dir": Key(str, None, "folder of the audit segments (default: <data dir>/audit)"),
        "key": Key(str, None, "Ed25519 signing key, PKCS8 PEM readable by its owner only"),
        "verify_keys": Key(list, [], "extra public keys (PEM files) that `audit verify` trusts"),
        "fsync_interval_ms": Key(int, 200, "longest time an appended entry waits for fsync", 1, 60_000),
        "fsync_batch": Key(int, 256, "appends that force an fsync before the interval ends", 1, 1_000_000),
        "segment_max_bytes": Key(int, 8 * 1024 * 1024, "size at which the active segment rotates",
                                 1024 * 1024, 1024 ** 3),
        "segments_kept": Key(int, 16, "rotated segments kept before the oldest is pruned", 1, 100_000),
        "retention_days": Key(int, 90, "entries younger than this are never pruned, whatever segments_kept "
                                       "says (0: no age floor)", 0, 36_500),
        "allow_degraded_writes": Key(bool, False, "decide and run proposals even when the audit log cannot be "
                                                  "written (refused with AUDIT_UNAVAILABLE otherwise)"),
    },
    # read by fleet/snapshot/config.py: the safety net's snapshots of every working tree
    "snapshots": {
        "enabled": Key(bool, True, "keep snapshots of every working tree (false turns the safety net off)"),
        "dir": Key(str, None, "folder of the shadow stores (default: <data dir>/snapshots, next to the index)"),
        "max_file_bytes": Key(int, 50 * 1024 * 1024, "files larger than this are skipped and listed",
                              1, 1024 ** 4),
        "repo_budget_bytes": Key(int, 1024 ** 3, "disk budget of one working tree's store", 1024 ** 2, 1024 ** 5),
        "fleet_budget_bytes": Key(int, 10 * 1024 ** 3, "disk budget of every store together",
                                  1024 ** 2, 1024 ** 5),
        "keep_all_hours": Key(int, 24, "every snapshot is kept this long", 1, 24 * 365),
        "hourly_days": Key(int, 7, "one an hour is kept until this many days old", 0, 3650),
        "daily_days": Key(int, 30, "one a day is kept until this many days old", 0, 36500),
        "min_interval_s": Key(int, 30, "while edits go on, a snapshot at least this often", 1, 86_400),
        "pause_s": Key(int, 3, "a snapshot follows once edits pause this long", 1, 3600),
        "guard": Key(str, "off", "`ask`: agents' hooks ask the person before a command that discards work"),
    },
    # read by fleet/ops/passkeys.py: which decisions need a passkey once one is registered (docs/security.md)
    "passkeys": {
        "require": Key(str, "high", "`high`: approving a high-risk proposal needs your passkey; `all`: every "
                                    "decision does; `off`: none"),
    },
    # read by fleet/cli/terminal.py: whether the CLI's decisions may skip the terminal (docs/security.md)
    "approval": {
        "noninteractive": Key(bool, False, "let `proposals approve|reject|undo --yes` and `dashboard link` "
                                           "run without a terminal"),
    },
    # read by fleet/notify/config.py: notifications of what needs the person (docs/needs-you.md). The URLs
    # are secrets: a settings file holding one must be readable by its owner only (0600)
    "notify": {
        "include": Key(str, "names", "`names`: repo, op and agent names in messages; `counts`: only what kind"),
        "desktop": Key(bool, True, "native desktop notifications from `serve` while no dashboard tab is open"),
        "proposal": Key(bool, True, "notify of pending proposals"),
        "waiting": Key(bool, True, "notify of agents waiting on you"),
        "discarded": Key(bool, True, "notify of discarded uncommitted work"),
        "conflict": Key(bool, True, "notify of conflicts and operations in progress where an agent is"),
        "quiet_hours": Key(str, "", "`22:00-07:00`: nothing is sent between these local times"),
        "burst": Key(int, 5, "more messages than this in a minute become one summary", 1, 1000),
        "ntfy": Key(str, "", "an ntfy topic URL (https://ntfy.sh/<topic> or your own server's)"),
        "slack": Key(str, "", "a Slack incoming webhook URL"),
        "discord": Key(str, "", "a Discord webhook URL"),
        "webhook": Key(str, "", "a URL that gets a JSON POST signed with HMAC-SHA256 (X-Fleetdeck-Signature)"),
        "webhook_secret": Key(str, "", "the HMAC key of `webhook` (required with it)"),
    },
    # read by web/conn.py: the HTTP front door's guard against connections that never finish a request
    "serve": {
        "header_timeout_s": Key(int, 10, "a connection that has not sent a whole request line and headers this "
                                         "many seconds after opening (or after its last answer) is closed", 1, 3600),
    },
    # read by fleet/team/config.py: team mode's hub (docs/team.md). `fleetdeck team join` writes this section;
    # the password is never here but in `team-password` beside this file (0600)
    "team": {
        "hub": Key(str, "", "the hub's PostgreSQL connection string, without its password"),
        "machine": Key(str, "", "this machine's name on the hub (its enrolled role)"),
        "share": Key(str, "paths", "`paths`: rows as the index holds them; `names`: repo names and states, "
                                   "no absolute path"),
        "push_interval_ms": Key(int, 500, "how often serve and watch look for rows to push", 50, 600_000),
        "accept_remote_approvals": Key(bool, False, "act on decisions made on the hub (signed by a pinned key)"),
        "approver_keys": Key(list, [], "public keys (PEM files) of the people whose hub decisions count"),
    },
}


def settings_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$FLEETDECK_SETTINGS`, else `$XDG_CONFIG_HOME/fleetdeck/settings.toml` (`~/.config/...`)."""
    environ = os.environ if environ is None else environ
    if environ.get("FLEETDECK_SETTINGS"):
        return Path(environ["FLEETDECK_SETTINGS"])
    return config_home(environ) / "fleetdeck" / "settings.toml"


def read_toml(path: Path, limit: int, code: str, what: str) -> dict[str, Any] | None:
    """A person's TOML file (settings, policy), or None when it does not exist; FleetError `code` when it is
    not a regular file, is unreadable, larger than `limit` bytes, not UTF-8 or not TOML. Links are followed
    (dotfiles are often linked); FIFOs and devices are refused without blocking."""
    try:
        data = read_file(path, limit, f"{what} {path}", follow=True)
    except BrokenRepo as exc:
        raise FleetError(code, str(exc)) from None
    if data is None:
        return None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise FleetError(code, f"{what} {path} is not valid TOML: {exc}") from None


def load_settings(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every section with every key: the file's values over the defaults. FleetError BAD_ARGUMENT otherwise."""
    path = path or settings_path()
    raw = read_toml(path, MAX_SETTINGS_BYTES, "BAD_ARGUMENT", "settings file") or {}
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise FleetError("BAD_ARGUMENT", f"{path}: unknown section [{unknown[0]}] (known: "
                                         f"{', '.join(sorted(SECTIONS))})")
    return {name: _section(path, name, keys, raw.get(name, {})) for name, keys in SECTIONS.items()}


def _section(path: Path, name: str, keys: dict[str, Key], given: object) -> dict[str, Any]:
    if not isinstance(given, dict):
        raise FleetError("BAD_ARGUMENT", f"{path}: [{name}] must be a table")
    unknown = sorted(set(given) - set(keys))
    if unknown:
        raise FleetError("BAD_ARGUMENT", f"{path}: unknown key {name}.{unknown[0]} (known: "
                                         f"{', '.join(sorted(keys))})")
    values = {}
    for key, spec in keys.items():
        value = given.get(key, spec.default)
        if key in given:
            _check(path, f"{name}.{key}", spec, value)
        values[key] = value
    return values


def _check(path: Path, where: str, spec: Key, value: object) -> None:
    ok = isinstance(value, spec.kind) and not (spec.kind is int and isinstance(value, bool))
    if spec.kind is list:
        ok = ok and all(isinstance(v, str) for v in value)  # type: ignore[union-attr]
    if not ok:
        kind = "a list of strings" if spec.kind is list else f"a {spec.kind.__name__}"
        raise FleetError("BAD_ARGUMENT", f"{path}: {where} must be {kind}, not {value!r}")
    if spec.kind is int and not spec.low <= value <= spec.high:  # type: ignore[operator]
        raise FleetError("BAD_ARGUMENT", f"{path}: {where} must be between {spec.low} and {spec.high}, "
                                         f"not {value}")
