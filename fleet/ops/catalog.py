"""The operations agents may propose, each declared once: one class per op holding its arguments (names,
types, bounds, wording), its risk level, what it may destroy, whether it is undone, and its preview and run.

Every surface takes what it needs from that class: the MCP tool `operation.preview.<op>` its signature, title
and description (mcp_bridge/tools_ops.py), the previews the argument names they accept (`OpSpec.known`)
and each argument with its default, bounds, values and the refusal's wording (`OpSpec.text`, `.flag`,
`.choice` for strings, flags and choices; `.items` for lists: paths, hunk ids, a plan's steps, a clean-up's
targets, each member checked as declared; `.number` for numbers), the policy the op names, the executor the
preview and run that the op's module binds (`OpSpec.bind`: each op module binds its own; fleet.ops.service
imports them all). What the published schema cannot say (a clean-up's 100 branches in all, "paths or all")
stays in the op's preview.

Risk levels (documented in docs/proposals.md and shown on every preview):
- low: nothing is lost and the change is plain to undo (stage, unstage, stage_hunks, a new branch, a stash,
  a new worktree);
- medium: HEAD, a branch or the working tree moves, and the restore point brings it back (commit, checkout,
  stash_pop, a soft, mixed or keep reset, merge, patch, patch_file_write, submodule_pointer, restore, restore_snapshot;
  a plan takes its riskiest step's level) or, for a push, leaves the machine (it cannot be undone, and says so);
- high: history is rewritten or work is thrown away (hard or merge reset, discard, amend, rebase,
  force-with-lease push, branch deletion), or the change's diff is longer than the page shows. A policy rule
  can never make a high-risk proposal run without a person (`auto` is refused).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import (Annotated, Any, Callable, ClassVar, Literal, NotRequired, TypedDict, Union, get_args, get_origin,
                    get_type_hints, is_typeddict)

from fleet.errors import FleetError
from fleet.git.revs import check_rev
from fleet.ops.model import MAX_MESSAGE, MAX_PATCH_BYTES, MAX_PATHS, Ctx, Plan, flag, known_args, string
from fleet.repo.scope import check_rel_path, resolve_file_in_repo

HIGH = "high"
LEVELS = ("low", "medium", "high")
# Bounds the previews check and the MCP tools publish.
MAX_REPOS, MAX_PER_REPO, MAX_TOTAL = 20, 20, 100   # a fleet-wide branch clean-up
MAX_STEPS = 10                                     # a plan
MAX_HUNKS = 500                                    # stage_hunks
STEP_OPS = ("stage", "unstage", "stage_hunks", "commit", "branch", "checkout", "stash", "merge", "rebase",
            "discard", "reset", "patch")


@dataclass(frozen=True)
class Arg:
    """An argument's bounds and wording (the metadata of an `Annotated` type): what the MCP tool publishes and
    refuses before the op sees it (description, min_length, max_length, pattern, ge, le), and how the
    preview refuses the same (the rest, never published: an agent meets these words through a plan step's
    arguments, which no schema checks, and so does every other caller of fleet.ops.service.propose).
    `omit_false`: the op receives the flag only when it is true (as it has always been stored);
    `default_factory`: a record key's default, made afresh.

    A refusal's words are a format string: {name} the argument, {lo} and {hi} its bounds (a list's lengths, a
    number's ge and le), {label} the record it is in, {value} what was given, {values} a Literal's."""

    description: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    ge: int | None = None
    le: int | None = None
    omit_false: bool = False
    default_factory: Callable[[], Any] | None = None
    wrong: tuple[str, str] | None = None  # (code, words): not of the declared kind (a list: not a list, too
    #      short, a member of another type or an empty string member that `each` does not check)
    over: tuple[str, str] | None = None   # (code, words): a list longer than max_length, or with a repeated
    #      member when `distinct`; `wrong` unless said
    missing: str | None = None            # BAD_ARGUMENT's words for a required one absent; `wrong` unless said
    each: Callable[[str, Any], Any] | None = None  # the read side's check of each member: (repo, member) ->
    #      member as the op takes it (duplicates then dropped, order kept)
    distinct: bool = False


def _branch_name(repo: str, name: str) -> str:
    """A branch name safe to hand to git (fleet.git.revs; that it names a local branch is the op's to see)."""
    return check_rev(name, "branches")


def _literal_path(repo: str, path: str) -> str:
    """A path a snapshot holds: lexically clean (a trailing / names a folder); snapshots keep what is gone."""
    return check_rel_path(path.rstrip("/"), "paths")


RepoName = Annotated[str, Arg("fleet name (see fleet.repos) or absolute path inside a fleet root", 1, 4096)]
RelPath = Annotated[str, Arg("a literal path relative to the repository root", 1, 4096)]
TOO_MANY_PATHS = ("LIMIT", "{name} lists more than {hi} paths")
# Paths in the work tree, each checked by the read side's rules (fleet.repo.scope: no `..`, not absolute, no
# control characters, not into .git, no symlink out of the repository).
Paths = Annotated[list[RelPath], Arg(min_length=1, max_length=MAX_PATHS, over=TOO_MANY_PATHS,
                                     wrong=("BAD_PATH", "{name} must be a non-empty list of repo-relative paths"),
                                     missing="{name} is required (a list of repo-relative paths)",
                                     each=resolve_file_in_repo)]
# Paths a snapshot holds: checked lexically only (the file may be gone from the work tree).
SnapshotPaths = Annotated[list[RelPath], Arg(min_length=1, max_length=MAX_PATHS, over=TOO_MANY_PATHS,
                                             wrong=("BAD_PATH", "{name} must be a list of repo-relative paths"),
                                             each=_literal_path)]
Rev = Annotated[str, Arg("a branch, tag, sha, HEAD~2, ...", 1, 4096)]
Message = Annotated[str, Arg(min_length=1, max_length=MAX_MESSAGE)]
ProposalId = Annotated[str, Arg(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")]
PatchText = Annotated[str, Arg("unified diff text (at most 1 MiB)", 1, MAX_PATCH_BYTES)]
SetFlag = Annotated[bool, Arg(omit_false=True)]  # a flag the op receives only when true


class Target(TypedDict):
    repo: RepoName  # resolved by the op (fleet.index.target)
    branches: Annotated[list[Rev], Arg(
        min_length=1, max_length=MAX_PER_REPO, distinct=True, each=_branch_name,
        wrong=("BAD_ARGUMENT", "each target needs branches: a non-empty list of branch names"),
        over=("LIMIT", "at most {hi} distinct branches per repository"))]


class Step(TypedDict):
    op: Annotated[Literal[STEP_OPS], Arg(  # type: ignore[valid-type]
        wrong=("BAD_ARGUMENT", "{label}: {value!r} cannot be a plan step (allowed: {values})"))]
    args: NotRequired[Annotated[dict, Arg("the op's own arguments (as its preview tool takes them)",
                                          default_factory=dict, wrong=("BAD_ARGUMENT", "{label}: {name} must be an object"))]]


class OpSpec:
    """Base of every op's class: its arguments are the class's annotated attributes (a default is the class
    attribute's value), in the order the tool lists them; what follows here is the op's catalog entry."""

    op: ClassVar[str]
    title: ClassVar[str]           # the MCP tool's title
    risk: ClassVar[str]            # the op's usual risk; risk_of() raises it for destructive arguments
    destructive: ClassVar[bool]    # may throw work away or rewrite history (the MCP destructiveHint)
    undoable: ClassVar[bool] = True     # a restore point brings the repository back
    leaves_machine: ClassVar[bool] = False  # reaches another machine (the MCP openWorldHint)
    per_repo: ClassVar[bool] = True     # takes a `repo`; else its repositories are its targets' (`repos`)
    summary: ClassVar[str]
    preview: ClassVar[Callable[[Ctx, dict], Plan]]
    run: ClassVar[Callable[[Ctx, dict], dict]]  # returns the result recorded on the proposal

    @classmethod
    def args(cls) -> dict[str, tuple[Any, Any]]:
        """name -> (type, default) of each argument (`...`: required), in declaration order."""
        hints = get_type_hints(cls, include_extras=True)
        return {name: (hints[name], cls.__dict__.get(name, ...)) for name in cls.__dict__.get("__annotations__", {})}

    @classmethod
    def known(cls, args: dict, label: str | None = None) -> None:
        """BAD_ARGUMENT for an argument the op does not declare."""
        known_args(label or cls.op, args, set(cls.args()))

    @classmethod
    def flag(cls, args: dict, name: str) -> bool:
        """A declared bool argument: its value, else the declared default; BAD_ARGUMENT when not a bool."""
        return flag(args, name, cls.args()[name][1])

    @classmethod
    def text(cls, args: dict, name: str) -> str | None:
        """A declared string argument: required unless it has a default (the default when absent or null),
        at most its declared max_length (4096 unless said); BAD_ARGUMENT otherwise (fleet.ops.model.string)."""
        hint, default = cls.args()[name]
        bound = next((m.max_length for m in _metadata(hint) if m.max_length is not None), 4096)
        value = string(args, name, required=default is ..., max_len=bound)
        return default if value is None and default is not ... else value

    @classmethod
    def choice(cls, args: dict, name: str) -> str:
        """A declared Literal argument: its value, else the declared default; BAD_ARGUMENT naming the choices
        (`mode must be merge, squash or ff_only`) for anything else, a missing required one included."""
        hint, default = cls.args()[name]
        values = next(get_args(h) for h in _members(hint) if get_origin(h) is Literal)
        value = args.get(name, None if default is ... else default)
        if value not in values:
            raise FleetError("BAD_ARGUMENT", f"{name} must be {', '.join(values[:-1])} or {values[-1]}")
        return value

    @classmethod
    def items(cls, args: dict, name: str, repo: str | None = None) -> list | None:
        """A declared list argument: None when absent or null and not required (its `missing` words, else its
        `wrong` ones, when required); refused in its declared words when it is not a list of at least
        min_length members of the member type (a string member not empty unless `each` checks it) or has
        more than max_length (or a repeated member, `distinct`). Each member comes back as its `each` makes it
        in `repo` (duplicates dropped); record members as given, for the op to read each with `.record` where
        its checks belong in the op's order (a plan's steps before any preview; a clean-up's targets one by
        one, each before its repository is resolved)."""
        hint, default = cls.args()[name]
        value = args.get(name)
        if value is None:
            if default is not ...:
                return default
            arg = _arg(hint)
            if arg.missing:
                raise FleetError("BAD_ARGUMENT", arg.missing.format(name=name))
            raise _refusal(arg.wrong, arg, name)
        return _items(hint, value, name, repo)

    @classmethod
    def record(cls, name: str, value: Any, label: str) -> dict:
        """One member of the declared list of records `name` (a plan's step, a clean-up's target), checked as
        its record type declares (`_record`); `label` names it in a refusal (`step 2`)."""
        member = next(get_args(m)[0] for m in _members(cls.args()[name][0]) if get_origin(m) is list)
        return _record(member, value, label)

    @classmethod
    def number(cls, args: dict, name: str) -> int:
        """A declared int argument: its value, else the declared default; refused in its declared words when
        not an integer (a bool is not one) between its ge and le."""
        hint, default = cls.args()[name]
        arg, value = _arg(hint), args.get(name, None if default is ... else default)
        if isinstance(value, bool) or not isinstance(value, int) or not arg.ge <= value <= arg.le:
            raise _refusal(arg.wrong, arg, name)
        return value

    @classmethod
    def repos(cls, args: dict) -> list[str]:
        """The repositories a fleet-wide op's arguments name (a per-repo op: none beyond its `repo`)."""
        return []

    @classmethod
    def bind(cls, preview: Callable[[Ctx, dict], Plan], run: Callable[[Ctx, dict], dict]) -> None:
        """The op's module gives it its preview and run (once: two modules binding one op is a defect)."""
        if "preview" in cls.__dict__:
            raise RuntimeError(f"op {cls.op} is bound twice")
        cls.preview, cls.run = staticmethod(preview), staticmethod(run)


def _members(hint: Any) -> list[Any]:
    """The types an argument's hint is made of: `Annotated` unwrapped, a union's members each."""
    if get_origin(hint) is Annotated:
        return _members(get_args(hint)[0])
    if get_origin(hint) in (Union, types.UnionType):
        return [m for a in get_args(hint) for m in _members(a)]
    return [hint]


def _metadata(hint: Any) -> list[Arg]:
    """Every `Arg` on an argument's hint (on it, or on a union member such as `Message | None`)."""
    found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Arg)]
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) in (Union, types.UnionType):
        found += [m for a in get_args(hint) for m in _metadata(a)]
    return found


def _arg(hint: Any) -> Arg:
    """The hint's own `Arg` (or its union member's), or an empty one."""
    return next(iter(_metadata(hint)), Arg())


def _refusal(words: tuple[str, str] | None, arg: Arg, name: str, **fill: Any) -> FleetError:
    """The FleetError a declared refusal makes; {lo} and {hi} are the argument's bounds."""
    if words is None:
        raise RuntimeError(f"argument {name} declares no refusal")  # a declaration's defect, not the caller's
    code, text = words
    lo = arg.min_length if arg.min_length is not None else arg.ge
    hi = arg.max_length if arg.max_length is not None else arg.le
    return FleetError(code, text.format(name=name, lo=lo, hi=hi, **fill))


def _fits(member: Any, value: Any, checked: bool) -> bool:
    """Whether a list member is of its declared type: a record an object, a string a string (not empty when
    declared so and `checked` by no `each`). A member that declares its own refusal is `_record`'s to check."""
    arg = _arg(member)
    if arg.wrong:
        return True
    base = _members(member)[0]
    if is_typeddict(base) or base is dict:
        return isinstance(value, dict)
    if base is str:
        return isinstance(value, str) and (checked or not arg.min_length or bool(value))
    raise RuntimeError(f"no check for a list of {base!r}")  # a declaration this reader does not know


def _items(hint: Any, value: Any, name: str, repo: str | None) -> list:
    """A given list checked against its declaration (OpSpec.items)."""
    arg = _arg(hint)
    member = next(get_args(m)[0] for m in _members(hint) if get_origin(m) is list)
    if (not isinstance(value, list) or len(value) < (arg.min_length or 0)
            or not all(_fits(member, v, arg.each is not None) for v in value)):
        raise _refusal(arg.wrong, arg, name)
    if (arg.max_length is not None and len(value) > arg.max_length) or (arg.distinct and len(set(value)) != len(value)):
        raise _refusal(arg.over or arg.wrong, arg, name)
    if arg.each is not None:
        return list(dict.fromkeys(arg.each(repo, v) for v in value))
    return value


def _record(hint: Any, value: Any, label: str) -> dict:
    """One member of a declared list of records (a TypedDict, `Annotated` or not), read as its declaration
    says: an object (else the member's own `wrong` words), no key it does not declare (`<label> takes no
    argument ...`), and each field that declares its refusal checked (a list as `OpSpec.items` does, a Literal
    by its values, an object as one; an absent one with a default_factory gets it). Fields that declare no
    refusal are the op's to check (a target's `repo`: fleet.index.target). Returns the declared fields given
    or defaulted."""
    arg, kind = _arg(hint), _members(hint)[0]
    if not isinstance(value, dict):
        raise _refusal(arg.wrong, arg, label, label=label)
    fields = get_type_hints(kind, include_extras=True)
    known_args(label, value, set(fields))
    out = {}
    for name, field in fields.items():
        if get_origin(field) is NotRequired:
            field = get_args(field)[0]
        farg = _arg(field)
        if name not in value and farg.default_factory is not None:
            out[name] = farg.default_factory()
            continue
        given = value.get(name)
        if farg.wrong is not None:
            base = _members(field)[0]
            if get_origin(base) is Literal:
                choices = get_args(base)
                if given not in choices:
                    raise _refusal(farg.wrong, farg, name, label=label, value=given, values=", ".join(choices))
            elif get_origin(base) is list:
                if given is None:
                    raise _refusal(farg.wrong, farg, name, label=label)
                given = _items(field, given, name, None)
            elif not isinstance(given, base):
                raise _refusal(farg.wrong, farg, name, label=label, value=given)
        if name in value:
            out[name] = given
    return out


class Stage(OpSpec):
    """Propose `git add` of literal `paths` (or `all: true`: every change, untracked files included).
    A person approves it before it runs; poll operation.status."""
    op, title, risk, destructive = "stage", "Propose staging files", "low", False
    summary = "stage paths (or everything) into the index"
    paths: Paths | None = None
    all: SetFlag = False


class Unstage(OpSpec):
    """Propose taking `paths` out of the index (the working-tree files stay as they are)."""
    op, title, risk, destructive = "unstage", "Propose unstaging files", "low", False
    summary = "take paths out of the index, keeping the working-tree files"
    paths: Paths


class Commit(OpSpec):
    """Propose committing the staged changes (or only `paths`) as the person, with a
    `Proposed-by: <agent>` trailer. `amend: true` rewrites the last commit (high risk)."""
    op, title, risk, destructive = "commit", "Propose a commit", "medium", False
    summary = ("commit the staged changes (or only given paths) as the person, with a Proposed-by trailer; "
               "amend rewrites the last commit")
    message: Message
    paths: Paths | None = None
    amend: SetFlag = False


class Branch(OpSpec):
    """Propose creating branch `name` at `start_point` (default HEAD), optionally checking it out."""
    op, title, risk, destructive = "branch", "Propose a new branch", "low", False
    summary = "create a branch at a start point, optionally checking it out"
    name: Rev
    start_point: Rev = "HEAD"
    checkout: bool = False


class Checkout(OpSpec):
    """Propose switching to local branch `ref` (or, with `detach: true`, to any commit, detached)."""
    op, title, risk, destructive = "checkout", "Propose a checkout", "medium", False
    summary = "switch to a local branch, or detach HEAD at a commit"
    ref: Rev
    detach: bool = False


class Stash(OpSpec):
    """Propose `git stash push` of the working-tree changes (untracked files with include_untracked)."""
    op, title, risk, destructive = "stash", "Propose stashing changes", "low", False
    summary = "stash the working-tree changes (optionally untracked files too)"
    message: Message | None = None
    include_untracked: bool = False


class StashPop(OpSpec):
    """Propose applying stash@{index} and dropping it."""
    op, title, risk, destructive = "stash_pop", "Propose popping a stash", "medium", False
    summary = "apply a stash and drop it"
    index: Annotated[int, Arg(ge=0, le=10000,
                              wrong=("BAD_ARGUMENT", "{name} must be an integer {lo}..{hi} (stash@{{{name}}})"))] = 0


class Reset(OpSpec):
    """Propose moving the current branch to `target` (`git reset --<mode>`). The preview lists the commits
    it leaves behind and, for `hard` (high risk), the uncommitted changes it throws away (kept in the
    restore point); `keep` and `merge` update the files that differ between HEAD and `target`, and git
    refuses them where that would overwrite a local change (`merge` resets staged changes: high risk)."""
    op, title, risk, destructive = "reset", "Propose a reset", "medium", True
    summary = "move the current branch to a commit (soft, mixed, hard, keep or merge)"
    target: Rev
    mode: Literal["soft", "mixed", "hard", "keep", "merge"] = "mixed"


class Discard(OpSpec):
    """Propose throwing away the unstaged changes to `paths` (and deleting untracked files there with
    include_untracked). High risk; the restore point keeps every file's exact content."""
    op, title, risk, destructive = "discard", "Propose discarding changes", "high", True
    summary = "throw away working-tree changes to paths (the restore point keeps every file's exact content)"
    paths: Paths
    include_untracked: bool = False


class Merge(OpSpec):
    """Propose merging `source` into the checked-out branch (a merge commit, a squash commit, or a
    fast-forward only). The preview carries the merge-tree conflict preflight; a merge that conflicts
    is aborted and the proposal fails."""
    op, title, risk, destructive = "merge", "Propose a merge", "medium", False
    summary = ("merge a branch or commit into the checked-out branch (merge, squash or fast-forward only); "
               "conflicts abort it")
    source: Rev
    mode: Literal["merge", "squash", "ff_only"] = "merge"
    message: Message | None = None


class Rebase(OpSpec):
    """Propose replaying the checked-out branch onto `onto` (never interactive; high risk: rewrites
    history). The preflight replays commit by commit and names the first one that would conflict."""
    op, title, risk, destructive = "rebase", "Propose a rebase", "high", True
    summary = "replay the checked-out branch's commits onto another commit (never interactive); conflicts abort it"
    onto: Rev


class Patch(OpSpec):
    """Propose applying a unified diff (e.g. from patch.generate; at most 1 MiB) to the working tree or
    the index. It must be the diff alone, every byte of it one git reads (no mail headers, commit
    message or other text git would skip: refused); every path is checked and `git apply --check`
    must accept it before a proposal is made."""
    op, title, risk, destructive = "patch", "Propose applying a patch", "medium", True
    summary = "apply a unified diff to the working tree or the index"
    patch: PatchText
    target: Literal["worktree", "index"] = "worktree"


class PatchFileWrite(OpSpec):
    """Propose putting a patch file into the repository (where tools such as patch-package apply it):
    its content is `patch_file` (from fleetdeck's patch folder) or `patch` (text). patch.generate and
    patch.remove write only to that folder; this is the one way a patch file reaches a repository."""
    op, title, risk, destructive = "patch_file_write", "Propose writing a patch file into a repository", "medium", True
    summary = "write a patch file (.patch/.diff) into the repository, where tools such as patch-package apply it"
    path: Annotated[str, Arg("where in the repository, ending in .patch or .diff (e.g. patches/x.patch)", 1, 4096)]
    patch_file: Annotated[str | None, Arg("a patch file in fleetdeck's patch folder (patch.generate's)", 1,
                                          4096)] = None
    patch: PatchText | None = None


class StageHunks(OpSpec):
    """Propose staging some hunks of one file: `hunks` are the `id`s repo.changes gives unstaged hunks
    (stable while the file is unchanged, whatever `unified` was used to list them)."""
    op, title, risk, destructive = "stage_hunks", "Propose staging chosen hunks", "low", False
    summary = "stage chosen hunks of one file (ids from repo.changes)"
    path: RelPath
    hunks: Annotated[list[Annotated[str, Arg(min_length=1, max_length=64)]], Arg(
        min_length=1, max_length=MAX_HUNKS, over=("LIMIT", "more than {hi} hunks"),
        wrong=("BAD_ARGUMENT", "{name} must be a non-empty list of hunk ids from repo.changes"))]


class Push(OpSpec):
    """Propose pushing a local branch (default: the checked-out one) to `remote`. It cannot be undone by
    fleetdeck. A force exists only as `force_with_lease`, pinned to the remote sha the preview saw."""
    op, title, risk, destructive = "push", "Propose a push", "medium", True
    undoable, leaves_machine = False, True
    summary = ("push a branch to a remote (cannot be undone by fleetdeck); a force only as force-with-lease "
               "pinned to the sha the preview saw")
    remote: Rev = "origin"
    branch: Rev | None = None
    set_upstream: bool = False
    force_with_lease: bool = False


class BranchDelete(OpSpec):
    """Propose deleting local branches in one or more repositories (targets: [{repo, branches}], at most
    20 x 20, 100 in all) with one approval. Never a checked-out branch or one whose tip moved since the
    preview; with merged_only (default) only branches merged into their upstream or default branch. The
    preview and the result say, per branch, deleted / kept / failed and why. Undo recreates them."""
    op, title, risk, destructive = "branch_delete", "Propose a branch clean-up across the fleet", "high", True
    per_repo = False
    summary = ("delete local branches across the fleet (merged ones only by default; never a checked-out one); "
               "tips kept for undo")
    targets: Annotated[list[Target], Arg(  # each read with .record("targets", ..., "branch_delete target")
        min_length=1, max_length=MAX_REPOS, over=("LIMIT", "at most {hi} repositories in one clean-up"),
        wrong=("BAD_ARGUMENT", "{name} must be a non-empty list of {{repo, branches}}"))]
    merged_only: bool = True

    @classmethod
    def repos(cls, args: dict) -> list[str]:
        return [t["repo"] for t in args["targets"]]


class Worktree(OpSpec):
    """Propose `git worktree add` at `path` on `branch` (created at HEAD with new_branch: true)."""
    op, title, risk, destructive = "worktree", "Propose a new worktree", "low", False
    summary = "add a linked worktree (optionally on a new branch)"
    path: Annotated[str, Arg("absolute path, inside a fleet root", 1, 4096)]
    branch: Rev
    new_branch: bool = False


class SubmodulePointer(OpSpec):
    """`record`: commit the submodule's checked-out commit as the new pointer (needs `message`);
    `return`: check out the recorded commit in the submodule. Refused unless the submodule is
    initialized, clean and differs; both shas are pinned from the preview."""
    op, title, risk, destructive = "submodule_pointer", "Propose moving a submodule pointer", "medium", False
    summary = ("record a submodule's checked-out commit as the new pointer (a commit), or return it to the "
               "recorded one")
    path: RelPath
    action: Literal["record", "return"]
    message: Message | None = None


class PlanSteps(OpSpec):
    """Propose up to ten steps in one repository (stage, unstage, stage_hunks, commit, branch, checkout,
    stash, merge, rebase, discard, reset, patch), each previewed against what the steps before it leave,
    approved once, run in order, stopping at the first failure; one undo returns to the state before
    the plan."""
    op, title, risk, destructive = "plan", "Propose a plan of steps", "medium", False
    summary = ("up to ten steps (stage, unstage, stage_hunks, commit, branch, checkout, stash, merge, rebase, "
               "discard, reset, patch), each previewed after the ones before it, approved once, run in order, "
               "undone at once")
    steps: Annotated[list[Annotated[Step, Arg(wrong=("BAD_ARGUMENT", "{label} must be an object {{op, args}}"))]],
                     Arg(min_length=1, max_length=MAX_STEPS,
                         wrong=("BAD_ARGUMENT", "{name} must be a list of {lo}..{hi} {{op, args}}"))]


class Restore(OpSpec):
    """Propose going back to the state before a completed proposal (its id is its restore point).
    Refused (STALE) when the repository changed since that proposal ran."""
    op, title, risk, destructive = "restore", "Propose undoing a proposal", "medium", True
    summary = "bring a repository back to the state before a completed proposal"
    restore_point: ProposalId


class RestoreSnapshot(OpSpec):
    """Propose putting a safety-net snapshot's files back (all, or only `paths`; with `index` its staged
    state too), e.g. the work a `discarded` event (repo.lost) names. The preview lists every file it would
    overwrite, recreate or remove; the present is snapshotted first and the restore point keeps it."""
    op, title, risk, destructive = "restore_snapshot", "Propose restoring files from a snapshot", "medium", True
    summary = ("put a safety-net snapshot's files (all, or some paths; with index its staged state) back into "
               "the working tree")
    snapshot: Annotated[str, Arg("snapshot id (or a unique prefix), from snapshot.list", pattern=r"^[0-9a-f]{4,40}$")]
    paths: SnapshotPaths | None = None
    index: bool = False


OPS: dict[str, type[OpSpec]] = {spec.op: spec for spec in (
    Stage, Unstage, Commit, Branch, Checkout, Stash, StashPop, Reset, Discard, Merge, Rebase, Patch,
    PatchFileWrite, StageHunks, Push, BranchDelete, Worktree, SubmodulePointer, PlanSteps, Restore, RestoreSnapshot)}


def op_info(op: str) -> type[OpSpec]:
    info = OPS.get(op)
    if info is None:
        raise FleetError("BAD_ARGUMENT", f"unknown operation {op!r}; known: {', '.join(sorted(OPS))}")
    return info


def risk_of(op: str, args: dict, preview: dict | None = None) -> str:
    """The risk of one proposal: the op's level, raised to high for the arguments that destroy or rewrite,
    and for a change whose diff is longer than the display cut (the person cannot see all of it on the
    page: no policy may run it unseen, and approving it takes the high-risk confirmation)."""
    if preview and any(v.get("diff_truncated") for v in [preview] + [s.get("preview") or {} for s in
                                                                      preview.get("steps") or []]):
        return HIGH
    if op == "reset" and args.get("mode") in ("hard", "merge"):  # --merge resets staged changes
        return HIGH
    if op == "commit" and args.get("amend"):
        return HIGH
    if op == "push" and args.get("force_with_lease"):
        return HIGH
    if op == "plan":
        risks = [risk_of(s["op"], s.get("args", {})) for s in args.get("steps", []) if s.get("op") in OPS]
        return max(risks or ["low"], key=LEVELS.index)
    return op_info(op).risk


def always_high(op: str) -> bool:
    """Ops that are high-risk whatever their arguments (a policy `auto` rule naming one is invalid)."""
    return op_info(op).risk == HIGH
