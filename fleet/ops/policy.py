"""The person's policy for agents' proposals: which are refused, which wait for a person, which run at once.

The file is `$XDG_CONFIG_HOME/fleetdeck/policy.toml` (or `--policy PATH`, passed on as `$FLEETDECK_POLICY`).
Without one, every proposal waits for a person. A policy that is configured but missing, unreadable,
unparsable or carrying unknown keys/actions makes every write refuse with POLICY_INVALID (fail closed);
reads never load it. Example (also in `fleetdeck policy --help` and the README):

    [settings]
    expiry_minutes = 30          # pending proposals expire after this long (1..10080)
    max_pending_per_agent = 20   # more pending proposals from one agent are refused with LIMIT (1..1000)
    keep_decided_days = 30       # proposals that ended longer ago leave the index (1..3650; audit entries stay)

    [[rules]]                    # first match wins
    agent = "*"                  # glob on the authenticated agent (default "*": any client at all)
    op = ["reset", "discard"]    # an op name or a list ("*" = any)
    repo = "*/work/*"            # glob on the repo's path or fleet name (default "*")
    action = "deny"
    note = "no agent resets or discards in work repos"

    [[rules]]
    agent = "claude-code"        # only a client holding the claude-code credential (`fleetdeck agents add`)
    op = ["stage", "unstage", "commit"]
    ref = "scratch/*"            # glob every ref the proposal names or moves must match
    path = "docs/"               # repo-relative prefix every path it touches must start with
    action = "auto"              # run at once, still recorded, with a restore point, undoable

`ref` and `path` are conservative both ways: a `deny` rule matches when ANY ref/path of the proposal
matches, or when it changes paths it cannot list; an `approve`/`auto` rule only when the proposal names
refs/paths and ALL of them match. Every plan step and every repository a multi-repo op touches is judged on
its own: one deny refuses the proposal, and `auto` needs all of them auto. `auto`
never applies to a high-risk proposal: a rule naming an always-high-risk op (or `op = "*"`) with `auto` is
invalid, and a proposal made high-risk by its arguments (hard reset, amend) falls back to `approve`.

`agent` matches authenticated identities only (fleet/agents/identity.py): a client without a credential is
`unknown:<declared name>`, matched only by rules that name no agent (`*`) or `agent = "unknown"`, and an
`auto` it matches falls back to `approve`: a declared name never runs anything without a person.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from fleet.agents.identity import UNKNOWN_PREFIX, is_authenticated, rule_matches
from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.ops.catalog import HIGH, OPS, always_high
from fleet.ops.model import Plan
from fleet.settings import read_toml
from fleet.xdg import config_home

ACTIONS = ("deny", "approve", "auto")
RULE_KEYS = {"agent", "op", "repo", "ref", "path", "action", "note"}
SETTINGS = {"expiry_minutes": (30, 1, 7 * 24 * 60), "max_pending_per_agent": (20, 1, 1000),
            "keep_decided_days": (30, 1, 3650)}
MAX_POLICY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Rule:
    number: int
    action: str
    agent: str = "*"
    ops: tuple[str, ...] = ("*",)
    repo: str = "*"
    ref: str | None = None
    path: str | None = None
    note: str = ""

    def describe(self) -> str:
        parts = [f"agent={self.agent}", f"op={','.join(self.ops)}", f"repo={self.repo}"]
        if self.ref is not None:
            parts.append(f"ref={self.ref}")
        if self.path is not None:
            parts.append(f"path={self.path}")
        return f"rule #{self.number} ({' '.join(parts)}) -> {self.action}" + (f": {self.note}" if self.note else "")


@dataclass(frozen=True)
class Policy:
    source: str | None                  # the file, or None when no policy is configured
    rules: tuple[Rule, ...] = ()
    settings: dict[str, int] = field(default_factory=lambda: {k: v[0] for k, v in SETTINGS.items()})

    @property
    def expiry_seconds(self) -> float:
        return self.settings["expiry_minutes"] * 60.0

    @property
    def max_pending(self) -> int:
        return self.settings["max_pending_per_agent"]

    @property
    def keep_decided_seconds(self) -> float:
        return self.settings["keep_decided_days"] * 86400.0


@dataclass(frozen=True)
class Decision:
    action: str          # deny | approve | auto
    rule: int | None     # the rule's number (1-based), None for the default
    why: str

    def as_dict(self) -> dict:
        return {"action": self.action, "rule": self.rule, "why": self.why}


def policy_path() -> tuple[Path, bool]:
    """(the policy file, whether it was configured explicitly): `$FLEETDECK_POLICY` or the XDG default."""
    explicit = os.environ.get("FLEETDECK_POLICY")
    if explicit:
        return Path(explicit), True
    return config_home() / "fleetdeck" / "policy.toml", False


POLICY_META = "policy_file"  # the meta key where an index names its own policy file (the demo's)


def adopt_index_policy(index: Index) -> str | None:
    """An index that names its own policy file (the demo's) has it followed by a process over it with no
    `--policy` and no `$FLEETDECK_POLICY` (`fleetdeck mcp --db <demo>/fleet.db`); returns it, or None. Here, not
    in fleet/demo.py, so the MCP bridge checks it without importing the write side before `initialize`."""
    path = index.meta(POLICY_META)
    if os.environ.get("FLEETDECK_POLICY") or not isinstance(path, str) or not os.path.isfile(path):
        return None
    os.environ["FLEETDECK_POLICY"] = path
    return path


_CACHE: dict[tuple, Policy] = {}


def load_policy() -> Policy:
    """The policy every write obeys; POLICY_INVALID when it is configured but unusable (never a default)."""
    path, explicit = policy_path()
    try:
        st = path.stat()
    except FileNotFoundError:
        if explicit:
            raise FleetError("POLICY_INVALID", f"the policy file {path} does not exist") from None
        return Policy(None)
    except OSError as exc:
        raise FleetError("POLICY_INVALID", f"cannot read the policy file {path}: {exc.strerror}") from None
    key = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
    cached = _CACHE.get(key)
    if cached is None:
        _CACHE.clear()
        cached = _CACHE[key] = parse_policy_file(path)
    return cached


def parse_policy_file(path: Path) -> Policy:
    doc = read_toml(path, MAX_POLICY_BYTES, "POLICY_INVALID", "the policy file")
    if doc is None:
        raise FleetError("POLICY_INVALID", f"the policy file {path} does not exist")
    return parse_policy(doc, str(path))


def parse_policy(doc: dict, source: str) -> Policy:
    """Validate a parsed policy document strictly: unknown keys, actions or ops are errors, not ignored."""
    def bad(message: str) -> FleetError:
        return FleetError("POLICY_INVALID", f"{source}: {message}")

    unknown = set(doc) - {"settings", "rules"}
    if unknown:
        raise bad(f"unknown top-level key {sorted(unknown)[0]!r} (expected [settings] and [[rules]])")
    settings = {k: v[0] for k, v in SETTINGS.items()}
    raw_settings = doc.get("settings", {})
    if not isinstance(raw_settings, dict):
        raise bad("[settings] must be a table")
    for key, value in raw_settings.items():
        if key not in SETTINGS:
            raise bad(f"unknown setting {key!r} (known: {', '.join(SETTINGS)})")
        _, low, high = SETTINGS[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise bad(f"setting {key} must be an integer in {low}..{high}")
        settings[key] = value
    raw_rules = doc.get("rules", [])
    if not isinstance(raw_rules, list):
        raise bad("rules must be an array of tables ([[rules]])")
    rules = []
    for number, raw in enumerate(raw_rules, start=1):
        if not isinstance(raw, dict):
            raise bad(f"rule #{number} must be a table")
        extra = set(raw) - RULE_KEYS
        if extra:
            raise bad(f"rule #{number} has unknown key {sorted(extra)[0]!r} (known: {', '.join(sorted(RULE_KEYS))})")
        action = raw.get("action")
        if action not in ACTIONS:
            raise bad(f"rule #{number} needs action = one of {', '.join(ACTIONS)}")
        ops = raw.get("op", "*")
        ops = (ops,) if isinstance(ops, str) else ops
        if not isinstance(ops, (list, tuple)) or not ops or not all(isinstance(o, str) for o in ops):
            raise bad(f"rule #{number}: op must be an op name or a non-empty list of them")
        for op in ops:
            if op != "*" and op not in OPS:
                raise bad(f"rule #{number}: unknown op {op!r}")
        if action == "auto" and ("*" in ops or any(always_high(o) for o in ops)):
            raise bad(f"rule #{number}: auto cannot apply to high-risk ops; name the low/medium ops it covers")
        for key in ("agent", "repo", "ref", "path", "note"):
            if key in raw and not isinstance(raw[key], str):
                raise bad(f"rule #{number}: {key} must be a string")
        if raw.get("agent", "").startswith(UNKNOWN_PREFIX):
            raise bad(f"rule #{number}: agent matches authenticated agents; agent = \"unknown\" names every "
                      "unauthenticated client (their declared names are never matched)")
        rules.append(Rule(number, action, raw.get("agent", "*"), tuple(ops), raw.get("repo", "*"),
                          raw.get("ref"), raw.get("path"), raw.get("note", "")))
    return Policy(source, tuple(rules), settings)


def _covers(pattern: str | None, values: tuple[str, ...], action: str, match, listed: bool = True) -> bool:
    if pattern is None:
        return True
    if not listed:  # it touches more than it can name: a deny must assume the worst, an allow cannot vouch
        return action == "deny"
    if action == "deny":
        return any(match(v, pattern) for v in values)
    return bool(values) and all(match(v, pattern) for v in values)


def _prefix(path: str, prefix: str) -> bool:
    prefix = prefix.strip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


@dataclass(frozen=True)
class Subject:
    """One thing a proposal does in one repository, as the policy judges it, with its final arguments:
    the proposal itself, each step of a plan, each repository a multi-repo op touches."""
    op: str
    repo_path: str
    repo_name: str | None = None
    refs: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    paths_listed: bool = True   # False: it changes paths it cannot list (a `path` deny then matches)
    risk: str = "low"
    label: str = ""             # "step 2 (commit)", a repository: said in the decision's why

    def as_dict(self) -> dict:
        return {"op": self.op, "repo": self.repo_path, "repo_name": self.repo_name, "refs": list(self.refs),
                "paths": list(self.paths), "paths_listed": self.paths_listed, "risk": self.risk,
                "label": self.label}

    @classmethod
    def from_dict(cls, d: dict) -> "Subject":
        return cls(d["op"], d["repo"], d.get("repo_name"), tuple(d.get("refs", ())), tuple(d.get("paths", ())),
                   d.get("paths_listed", True), d.get("risk", "low"), d.get("label", ""))


def _decide_one(policy: Policy, agent: str, s: Subject) -> Decision:
    """The first rule that matches this subject, or the default (a person approves)."""
    for rule in policy.rules:
        if not rule_matches(rule.agent, agent, fnmatch.fnmatchcase):
            continue
        if "*" not in rule.ops and s.op not in rule.ops:
            continue
        if not (fnmatch.fnmatchcase(s.repo_path, rule.repo)
                or (s.repo_name is not None and fnmatch.fnmatchcase(s.repo_name, rule.repo))):
            continue
        if not _covers(rule.ref, s.refs, rule.action, fnmatch.fnmatchcase):
            continue
        if not _covers(rule.path, s.paths, rule.action, _prefix, s.paths_listed):
            continue
        if rule.action == "auto" and s.risk == HIGH:
            return Decision("approve", rule.number, f"{rule.describe()}; but this proposal is high-risk, "
                                                    "so a person approves it")
        if rule.action == "auto" and not is_authenticated(agent):
            return Decision("approve", rule.number, f"{rule.describe()}; but {agent} is an unauthenticated "
                                                    "client (no agent credential), so a person approves it")
        return Decision(rule.action, rule.number, rule.describe())
    where = f"no rule in {policy.source} matches" if policy.source else "no policy file"
    return Decision("approve", None, f"{where}: a person approves every proposal")


def evaluate(policy: Policy, agent: str, subjects: list[Subject], deferred: str | None = None) -> Decision:
    """The one decision for a proposal (what `fleetdeck policy check`, propose and the executor all use):
    every subject judged on its own; any deny refuses the whole proposal, any subject a person must approve
    makes the proposal wait, and `auto` needs every subject auto and nothing `deferred` (an argument known
    only when it runs)."""
    judged = [(s, _decide_one(policy, agent, s)) for s in subjects]

    def said(s: Subject, d: Decision) -> Decision:
        return Decision(d.action, d.rule, f"{s.label}: {d.why}" if s.label and len(judged) > 1 else d.why)

    for action in ("deny", "approve"):
        for s, d in judged:
            if d.action == action:
                return said(s, d)
    first = judged[0][1]
    if deferred:
        return Decision("approve", first.rule, f"{first.why}; but {deferred}, so a person approves it")
    return first


def repo_label(index: Index, path: str) -> str:
    """A repository as the person knows it in the fleet: its root's name, then its path under that root
    (two repositories both called `api` under different roots never look alike); the path itself outside."""
    holding = [r for r in index.roots() if path == r or path.startswith(r.rstrip("/") + "/")]
    if not holding:
        return path
    root = max(holding, key=len)
    name = os.path.basename(root.rstrip("/")) or root
    rel = os.path.relpath(path, root)
    return name if rel == "." else f"{name}/{rel}"


def policy_subjects(index: Index, op: str, repo: str, plan: Plan, risk: str) -> list[Subject]:
    """What the policy judges: the proposal in its repository, then each step or other repository the op
    names (plan.subjects), each with its own final refs, paths and risk."""
    main = Subject(op, repo, index.name_at(repo), tuple(plan.policy_refs), tuple(plan.policy_paths),
                   plan.paths_listed, risk)
    more = [Subject(x["op"], x["repo"], index.name_at(x["repo"]), tuple(x.get("refs", ())),
                    tuple(x.get("paths", ())), x.get("paths_listed", True), x.get("risk", risk),
                    x.get("label") or repo_label(index, x["repo"]))
            for x in plan.subjects]
    return [main, *more]
