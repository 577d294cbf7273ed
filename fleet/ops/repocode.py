"""The code a repository defines that a write would run: found for the preview, neutralized for `auto`.

A repository's own config (`.git/config`, `config.worktree`, the files they include) and its hooks folder
are a stranger's code, as on the read side (docs/security.md, "Hostile repositories"); the person's global
and system config are trusted. `inventory` lists what a repository defines — hooks, filters, merge and
diff drivers, and programs (`core.sshCommand`, `core.fsmonitor`, `gpg.program`, `credential.helper`, ...)
— by reading its config through `git config --show-scope` and its hooks folder (running nothing). Every
preview carries that list, so a person approving knows what git will run in their hands.

An `auto` run has no person: it runs with `neutral_config`'s overrides (hooks looked up in the person's
global `core.hooksPath` or nowhere, every repository-set program replaced by the trusted value or a
harmless default, filters and diff drivers overridden as on a read), or it is downgraded to "a person
approves" by `auto_blockers` when leaving the repository's code out would change the op's result:
- a filter, for every op that moves content between the work tree and git's objects (neutralized, a
  git-crypt or nbstripout clean filter would store the raw bytes: the op would not be the person's);
- a merge driver, for ops that merge (git cannot be told on the command line to skip one: an emptied driver
  is run as an empty command);
- a `pre-push` hook, for a push (git-lfs uploads its objects there: skipped, the remote gets pointers only).
Hooks are otherwise only skipped: a commit without its hooks records exactly the index and message the
preview showed (the index is pinned), and the result says which code did not run.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from dataclasses import dataclass

from fleet.errors import FleetError
from fleet.git.files import BrokenRepo, read_file
from fleet.git.revs import git_dirs
from fleet.git.run import run, text

HOOKS = ("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
         "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
         "pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
         "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "sendemail-validate",
         "fsmonitor-watchman", "post-index-change")
# Keys naming a program git may start, with the harmless value an `auto` run gets when the person's own
# config does not set the key (an empty value for a helper list resets it).
PROGRAMS = {"core.fsmonitor": "false", "core.sshcommand": "ssh", "core.pager": "cat", "core.editor": "true",
            "core.askpass": "", "core.gitproxy": "none", "sequence.editor": "true", "gpg.program": "gpg",
            "gpg.openpgp.program": "gpg", "gpg.x509.program": "gpgsm", "gpg.ssh.program": "ssh-keygen",
            "gpg.ssh.defaultkeycommand": "", "diff.external": "", "core.alternaterefscommand": "",
            "credential.helper": ""}
_PATTERN_PROGRAMS = (("credential.", ".helper", ""), ("remote.", ".receivepack", "git-receive-pack"),
                     ("remote.", ".uploadpack", "git-upload-pack"), ("pager.", "", "false"))
_MULTI = ("credential.helper",)
_FILTER_KEYS = ("clean", "smudge", "process")
_DIFF_KEYS = ("textconv", "command")
# Ops that never move content between the work tree and objects (no filter runs), per their arguments.
_CONTENT_FREE = {"unstage", "stage_hunks", "push", "branch_delete", "submodule_pointer"}
_MERGING = {"merge", "rebase", "stash_pop"}
MAX_ATTRIBUTES_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ScopedConfig:
    """A repository's config split by trust: (key, value) pairs from its own files, and from the person's."""
    repo: list[tuple[str, str | None]]
    trusted: list[tuple[str, str | None]]

    def trusted_values(self, key: str) -> list[str]:
        return [v if v is not None else "true" for k, v in self.trusted if k == key]


def read_config(cwd: str) -> ScopedConfig:
    """The config git would use in `cwd`, read with `git config --list --show-scope` (which runs nothing)."""
    data = run(cwd, ["config", "--list", "--show-scope", "--includes", "-z"], ok_codes=(0, 1)).stdout
    fields = data.split(b"\0")
    repo: list[tuple[str, str | None]] = []
    trusted: list[tuple[str, str | None]] = []
    for scope, record in zip(fields[::2], fields[1::2]):
        name, newline, value = text(record).partition("\n")
        key = _lower_key(name)
        item = (key, value if newline else None)
        if scope in (b"local", b"worktree"):
            repo.append(item)
        elif scope in (b"global", b"system"):
            trusted.append(item)
    return ScopedConfig(repo, trusted)


def _lower_key(name: str) -> str:
    """git's key as it compares: section and variable case-insensitive, the subsection exact."""
    section, _, rest = name.partition(".")
    sub, dot, var = rest.rpartition(".")
    return f"{section.lower()}.{sub}.{var.lower()}" if dot else f"{section.lower()}.{rest.lower()}"


def _split(key: str) -> tuple[str, str, str] | None:
    section, _, rest = key.partition(".")
    sub, dot, var = rest.rpartition(".")
    return (section, sub, var) if dot and sub else None


def program_default(key: str) -> str | None:
    """The harmless value for a program key, None when the key names no program."""
    if key in PROGRAMS:
        return PROGRAMS[key]
    for head, tail, default in _PATTERN_PROGRAMS:
        if key.startswith(head) and key.endswith(tail) and len(key) > len(head) + len(tail):
            return default
    return None


# --- the inventory ---------------------------------------------------------------------------------------

def hooks_dir(cwd: str, config: ScopedConfig) -> tuple[str, bool]:
    """(the folder git looks hooks up in, whether the repository chose it): the repository's
    `core.hooksPath`, else the person's, else the common git dir's `hooks`."""
    own = [v for k, v in config.repo if k == "core.hookspath" and v is not None]
    if own:
        return _expand(own[-1], _top(cwd)), True
    person = config.trusted_values("core.hookspath")
    if person:
        return _expand(person[-1], _top(cwd)), False
    return os.path.join(git_dirs(cwd)[1], "hooks"), True


def _top(cwd: str) -> str:
    top = text(run(cwd, ["rev-parse", "--show-toplevel"], check=False).stdout).strip()
    return top or cwd


def _expand(path: str, top: str) -> str:
    return os.path.join(top, os.path.expanduser(path))


def repo_hooks(cwd: str, config: ScopedConfig) -> list[str]:
    folder, chosen_by_repo = hooks_dir(cwd, config)
    if not chosen_by_repo:
        return []
    return [name for name in HOOKS
            if os.path.isfile(os.path.join(folder, name)) and os.access(os.path.join(folder, name), os.X_OK)]


def _attribute_lines(cwd: str, config: ScopedConfig) -> list[str]:
    """Attribute lines from the files git reads first (the top .gitattributes, info/attributes,
    core.attributesFile); a nested .gitattributes is not read here: patterns are shown, not relied on."""
    places = [os.path.join(_top(cwd), ".gitattributes"), os.path.join(git_dirs(cwd)[1], "info", "attributes")]
    places += [_expand(v, _top(cwd)) for k, v in config.repo + config.trusted if k == "core.attributesfile" and v]
    lines: list[str] = []
    for place in places:
        try:   # a bounded, non-blocking read of a regular file: a FIFO planted there stalls nothing
            data = read_file(place, MAX_ATTRIBUTES_BYTES, place, whole=False, follow=True)
        except (BrokenRepo, OSError):
            continue
        lines += text(data or b"").splitlines()
    return lines


def _patterns(lines: list[str], attribute: str, name: str) -> list[str]:
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#") and f"{attribute}={name}" in parts[1:]:
            out.append(parts[0])
    return list(dict.fromkeys(out))


def inventory(cwd: str) -> list[dict]:
    """Everything the repository at `cwd` defines that git could run, as the preview shows it:
    `[{kind: hook|filter|merge driver|diff driver|program, name, ...}]`. A key set to the very value the
    person's own config gives it (`git lfs install --local`) is the person's, not listed."""
    config = read_config(cwd)
    items: list[dict] = [{"kind": "hook", "name": name} for name in repo_hooks(cwd, config)]
    drivers: dict[tuple[str, str], list[str]] = {}
    for key, value in config.repo:
        if value is not None and value in config.trusted_values(key):
            continue
        parts = _split(key)
        if parts and parts[0] == "filter" and parts[2] in _FILTER_KEYS:
            drivers.setdefault(("filter", parts[1]), []).append(parts[2])
        elif parts and parts[0] == "merge" and parts[2] == "driver":
            drivers.setdefault(("merge driver", parts[1]), []).append("driver")
        elif parts and parts[0] == "diff" and parts[2] in _DIFF_KEYS:
            drivers.setdefault(("diff driver", parts[1]), []).append(parts[2])
        elif program_default(key) is not None and not (key == "core.fsmonitor" and _is_bool(value)):
            items.append({"kind": "program", "name": key, "command": (value or "")[:200]})
    lines = _attribute_lines(cwd, config) if drivers else []
    attribute = {"filter": "filter", "merge driver": "merge", "diff driver": "diff"}
    for (kind, name), keys in sorted(drivers.items()):
        item = {"kind": kind, "name": name, "keys": sorted(set(keys)),
                "patterns": _patterns(lines, attribute[kind], name)}
        if kind == "merge driver" and name in merge_default(config):
            item["default"] = True        # merge.default: every path without a merge attribute
        items.append(item)
    return items


def _is_bool(value: str | None) -> bool:
    return value is None or value.lower() in ("true", "false", "yes", "no", "on", "off", "1", "0", "")


def merge_default(config: ScopedConfig) -> list[str]:
    values = [v for k, v in config.repo if k == "merge.default" and v]
    return values[-1:]


def digest(items: list[dict]) -> str:
    """What the executor pins: the inventory as the preview showed it."""
    return hashlib.sha256(repr(sorted(sorted(i.items()) for i in items)).encode()).hexdigest()


def describe(items: list[dict]) -> str:
    """One line for a person, such as: pre-commit hook, merge driver `evil` for *.ini, smudge filter `x`."""
    words = []
    for item in items:
        if item["kind"] == "hook":
            words.append(f"{item['name']} hook")
        elif item["kind"] == "program":
            words.append(f"program {item['name']}")
        else:
            keys = "/".join(item["keys"]) + " " if item["kind"] == "filter" else ""
            where = f" for {', '.join(item['patterns'][:5])}" if item.get("patterns") else ""
            words.append(f"{keys}{item['kind']} `{item['name']}`{where}")
    return ", ".join(words)


# --- auto: downgraded or neutralized ----------------------------------------------------------------------

def auto_blockers(op: str, args: dict, items: list[dict]) -> list[dict]:
    """The repository code whose absence would change what `op` does: with any, a person approves."""
    if op == "plan":
        found = [b for step in args.get("steps", []) for b in auto_blockers(step["op"], step.get("args", {}), items)]
        return list({repr(sorted(b.items())): b for b in found}.values())
    out = []
    for item in items:
        if item["kind"] == "filter" and _moves_content(op, args):
            out.append(item)
        elif item["kind"] == "merge driver" and op in _MERGING and args.get("mode") != "ff_only":
            out.append(item)
        elif item["kind"] == "hook" and item["name"] == "pre-push" and op == "push":
            out.append(item)
    return out


def _moves_content(op: str, args: dict) -> bool:
    if op in _CONTENT_FREE:
        return False
    if op == "branch":
        return bool(args.get("checkout"))
    if op == "reset":
        return args.get("mode") == "hard"
    if op == "patch":
        return args.get("target", "worktree") != "index"
    return True


def neutral_config(cwd: str) -> list[tuple[str, str]]:
    """Command-scope config for an `auto` run in `cwd`: hooks only from the person's own `core.hooksPath`
    (else nowhere), no fsmonitor, no `ext::` transport (a command in a URL), and every program key the repository sets given the person's value or
    the harmless default. Filters and diff drivers are overridden by the read side's guard as well."""
    config = read_config(cwd)
    person_hooks = config.trusted_values("core.hookspath")
    pairs = [("core.hooksPath", _expand(person_hooks[-1], _top(cwd)) if person_hooks else os.devnull),
             ("core.fsmonitor", "false"), ("diff.external", ""), ("protocol.ext.allow", "never")]
    done: set[str] = {"core.fsmonitor", "diff.external"}
    for key, _ in config.repo:
        default = program_default(key)
        if default is None or key in done:
            continue
        done.add(key)
        trusted = config.trusted_values(key)
        if key in _MULTI or key.startswith("credential."):
            pairs += [(key, ""), *((key, v) for v in trusted)]
        else:
            pairs.append((key, trusted[-1] if trusted else default))
    return pairs


# --- the merge preflight: which paths a custom merge driver would decide ------------------------------------

def driver_paths(repo: str, base: str | None, ours: str, theirs: str) -> dict[str, str]:
    """{path: driver} for every path both sides changed since `base` whose merge a driver other than git's
    own would decide (the attribute `merge=<name>`, or `merge.default`): git's built-in merge, which the
    preflight runs, cannot predict those."""
    if base is None:
        return {}
    both = set(_changed(repo, base, ours)) & set(_changed(repo, base, theirs))
    if not both:
        return {}
    config = read_config(repo)
    defined = {p[1] for p in (_split(k) for k, _ in config.repo + config.trusted)
               if p and p[0] == "merge" and p[2] == "driver"}
    fallback = (merge_default(config) or [None])[0]
    paths = sorted(both)
    raw = text(run(repo, ["check-attr", "-z", "merge", "--", *paths]).stdout).split("\0")
    out = {}
    for path, _, value in zip(raw[::3], raw[1::3], raw[2::3]):
        name = fallback if value == "unspecified" else value
        if name in defined:
            out[path] = name
    for side in (ours, theirs):   # a rebase checks out the other side first, its attributes apply then
        try:
            blob = run(repo, ["cat-file", "blob", f"{side}:.gitattributes"], check=False,
                       max_bytes=MAX_ATTRIBUTES_BYTES)
        except FleetError:            # too big to read: any of these paths may go to a driver
            return {p: out.get(p, "(unknown)") for p in paths}
        lines = text(blob.stdout).splitlines() if blob.returncode == 0 else []
        for name in defined:
            for pattern in _patterns(lines, "merge", name):
                out.update({p: name for p in paths if p not in out and _attr_match(pattern, p)})
    return out


def _attr_match(pattern: str, path: str) -> bool:
    """A .gitattributes pattern against a path, looser than git (`*` may cross `/`): a driver is never missed."""
    if "/" not in pattern.rstrip("/"):
        return fnmatch.fnmatchcase(os.path.basename(path), pattern)
    return fnmatch.fnmatchcase(path, pattern.lstrip("/"))


def _changed(repo: str, a: str, b: str) -> list[str]:
    data = text(run(repo, ["diff-tree", "-r", "--no-renames", "--name-only", "-z", a, b, "--"]).stdout)
    return [p for p in data.split("\0") if p]
