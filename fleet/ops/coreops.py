"""The everyday operations: stage, unstage, commit, branch, checkout, stash, stash_pop, reset, discard.

Each has a preview (validate every argument with the read side's rules, then show exactly what would
change, computed with read-only git) and a run (the approved change, through the executor's runner with
literal pathspecs). Runs return what they did: new shas, and git's messages.
"""

from __future__ import annotations

from fleet.words import plural
import os

from fleet.errors import FleetError
from fleet.git.files import short_ref
from fleet.git.revs import index_base
from fleet.git.run import run, text
from fleet.ops import catalog, writeset
from fleet.ops.gitexec import exec_git
from fleet.ops.model import (Ctx, Plan, capped_diff, commit_of, commit_paths, commits_between, inside,
                             is_ancestor, local_branch, tree_paths)
from fleet.ops.pins import head_state, read_status, ref_sha

def _need_head(repo: str, op: str) -> tuple[str | None, str]:
    head_ref, head = head_state(repo)
    if head is None:
        raise FleetError("BAD_ARGUMENT", f"{op} needs a commit: this repository has none yet")
    return head_ref, head


def _moved(repo: str) -> list[str]:
    """The ref a commit or reset moves: the checked-out branch, or HEAD itself when detached."""
    head_ref, _ = head_state(repo)
    return [head_ref] if head_ref else ["HEAD"]


def _files(entries) -> list[dict]:
    out = []
    for e in entries:
        kind = {"?": "untracked", "u": "conflicted"}.get(e.kind) or ("renamed" if e.kind == "2" else "changed")
        item = {"path": e.path, "kind": kind, "index": e.xy[0] if e.kind in "12u" else "?",
                "worktree": e.xy[1] if e.kind in "12u" else "?"}
        if e.orig_path:
            item["from"] = e.orig_path
        out.append(item)
    return out


def _spec(paths: list[str] | None) -> list[str]:
    return ["--", *paths] if paths else []


def head_after(ctx: Ctx) -> dict:
    head_ref, head = head_state(ctx.repo)
    return {"head": head, "branch": short_ref(head_ref) if head_ref else None}


# --- stage / unstage ---------------------------------------------------------------------------------------

def preview_stage(ctx: Ctx, args: dict) -> Plan:
    catalog.Stage.known(args)
    everything = catalog.Stage.flag(args, "all")
    if everything == ("paths" in args and args["paths"] is not None):
        raise FleetError("BAD_ARGUMENT", "stage takes either paths or all: true")
    paths = None if everything else catalog.Stage.items(args, "paths", ctx.repo)
    status, _ = read_status(ctx.repo, paths)
    todo = [e for e in status.entries if e.kind == "?" or (e.kind in "12u" and e.xy[1] != ".")]
    if not todo:
        raise FleetError("BAD_ARGUMENT", "nothing to stage: no unstaged or untracked changes there")
    preview = {"summary": f"stage {plural(len(todo), 'file')}", "files": _files(todo),
               **capped_diff(ctx.repo, ["diff-files", *(_spec(paths) or ["--"])]),
               "untracked": [e.path for e in todo if e.kind == "?"]}
    return Plan({"paths": paths, "all": everything}, preview, paths=paths,
                policy_paths=[e.path for e in todo])


def run_stage(ctx: Ctx, args: dict) -> dict:
    exec_git(ctx.repo, ["add", "-A", *(_spec(args["paths"]) or ["--", "."])])
    return {"staged": True}


def preview_unstage(ctx: Ctx, args: dict) -> Plan:
    catalog.Unstage.known(args)
    paths = catalog.Unstage.items(args, "paths", ctx.repo)
    status, _ = read_status(ctx.repo, paths)
    todo = [e for e in status.entries if e.kind in "12" and e.xy[0] != "."]
    if not todo:
        raise FleetError("BAD_ARGUMENT", "nothing to unstage: none of these paths has staged changes")
    preview = {"summary": f"unstage {plural(len(todo), 'file')} (working-tree files stay as they are)",
               "files": _files(todo), **capped_diff(ctx.repo, ["diff-index", "--cached", index_base(ctx.repo), *_spec(paths)])}
    return Plan({"paths": paths}, preview, paths=paths, policy_paths=[e.path for e in todo])


def run_unstage(ctx: Ctx, args: dict) -> dict:
    if head_state(ctx.repo)[1] is None:
        exec_git(ctx.repo, ["rm", "-r", "-q", "--cached", "--", *args["paths"]])
    else:
        exec_git(ctx.repo, ["reset", "-q", "--", *args["paths"]])
    return {"unstaged": True}


# --- commit -------------------------------------------------------------------------------------------------

def preview_commit(ctx: Ctx, args: dict) -> Plan:
    catalog.Commit.known(args)
    message = catalog.Commit.text(args, "message")
    amend = catalog.Commit.flag(args, "amend")
    paths = catalog.Commit.items(args, "paths", ctx.repo)
    head_ref, head = head_state(ctx.repo)
    if amend and head is None:
        raise FleetError("BAD_ARGUMENT", "amend needs a commit to amend: this repository has none yet")
    status, _ = read_status(ctx.repo, paths)
    if status.conflicted:
        raise FleetError("CONFLICT", "unresolved conflicts: a commit would record conflict markers")
    if paths:
        files = [e for e in status.entries if e.kind in "12"]
        untracked = [e.path for e in status.entries if e.kind == "?"]
        if untracked:
            raise FleetError("BAD_PATH", f"{untracked[0]!r} is untracked: stage it first (commit with paths "
                                         "only takes files git already tracks)")
        diff = capped_diff(ctx.repo, ["diff-index", index_base(ctx.repo), "--", *paths])
    else:
        files = [e for e in status.entries if e.kind in "12" and e.xy[0] != "."]
        diff = capped_diff(ctx.repo, ["diff-index", "--cached", index_base(ctx.repo)])
    if not files and not amend:
        raise FleetError("BAD_ARGUMENT", "nothing to commit: stage changes first (or name paths)")
    branch = short_ref(head_ref) if head_ref else None
    preview = {"summary": ("amend the last commit" if amend else "commit") + f" on {branch or 'detached HEAD'}"
                          f" ({plural(len(files), 'file')})",
               "message": message, "files": _files(files), **diff, "rewrites_history": amend,
               "branch": branch, "parent": head}
    unknown = _identity_missing(ctx.repo)
    if unknown:
        preview["warning"] = unknown
    if amend:
        upstream = run(ctx.repo, ["rev-parse", "--verify", "--quiet", "--symbolic-full-name", "@{upstream}"],
                       check=False)
        up = text(upstream.stdout).strip()
        preview["amends"] = head
        preview["amended_commit_pushed"] = bool(up) and is_ancestor(ctx.repo, head, up)
    moves = _moved(ctx.repo)
    rewritten = commit_paths(ctx.repo, [head], max_count=1) if amend else []  # the amended commit's files
    return Plan({"message": message, "paths": paths, "amend": amend}, preview, refs=moves, moves=moves,
                paths=paths or [], pin_index=not paths, policy_refs=[branch] if branch else [],
                policy_paths=list(dict.fromkeys([e.path for e in files] + (rewritten or []))),
                paths_listed=rewritten is not None)


def _identity_missing(repo: str) -> str | None:
    """The preflight of what approving a commit needs: git's identity, asked as the commit will ask it
    (`git var`, strict like `git commit`). A warning to show in the preview, or None."""
    for who in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
        asked = exec_git(repo, ["var", who], check=False)
        if asked.returncode != 0:
            said = next((ln for ln in asked.stderr.splitlines() if ln.strip()), "identity unknown")
            return (f"git has no identity to commit with here ({said.strip()}): approving this commit would fail. "
                    "Set one first: git config --global user.name \"Your Name\" and git config --global "
                    "user.email you@example.com")
    return None


def run_commit(ctx: Ctx, args: dict) -> dict:
    cmd = ["commit", "-q", "-m", args["message"], "--trailer", f"Proposed-by: {ctx.agent}"]
    if args["amend"]:
        cmd.append("--amend")
    if args["paths"]:
        cmd += ["--only", "--", *args["paths"]]
    result = exec_git(ctx.repo, cmd)
    return {**head_after(ctx), "stderr": result.stderr[-2000:]}


# --- branch / checkout ------------------------------------------------------------------------------------

def preview_branch(ctx: Ctx, args: dict) -> Plan:
    catalog.Branch.known(args)
    ref = local_branch(ctx.repo, catalog.Branch.text(args, "name"), "name")
    start = catalog.Branch.text(args, "start_point")
    sha = commit_of(ctx.repo, start, "start_point")
    checkout = catalog.Branch.flag(args, "checkout")
    if ref_sha(ctx.repo, ref) is not None:
        raise FleetError("BAD_REF", f"branch {short_ref(ref)!r} already exists")
    preview = {"summary": f"create branch {short_ref(ref)} at {sha[:12]}" + (" and check it out" if checkout else ""),
               "branch": short_ref(ref), "start_point": start, "start_sha": sha, "checkout": checkout}
    moves = [ref]
    writes: list[str] = []
    if checkout:
        preview["note"] = "uncommitted changes are carried over to the new branch"
        changes = writeset.tree_changes(ctx.repo, head_state(ctx.repo)[1], sha)
        preview.update(writeset.changes_files(ctx.repo, changes))
        writes = [p for _, p in changes]
    return Plan({"name": short_ref(ref), "start_sha": sha, "checkout": checkout}, preview, refs=[ref], moves=moves,
                paths=None if checkout else [], policy_refs=[short_ref(ref)], writes=writes)


def run_branch(ctx: Ctx, args: dict) -> dict:
    if args["checkout"]:
        exec_git(ctx.repo, ["switch", "-q", "--no-track", "-c", args["name"], args["start_sha"]])
    else:
        exec_git(ctx.repo, ["branch", "--no-track", args["name"], args["start_sha"]])
    return {"branch": args["name"], "head": ref_sha(ctx.repo, "refs/heads/" + args["name"]), **(
        {"checked_out": True} if args["checkout"] else {})}


def preview_checkout(ctx: Ctx, args: dict) -> Plan:
    catalog.Checkout.known(args)
    name = catalog.Checkout.text(args, "ref")
    detach = catalog.Checkout.flag(args, "detach")
    head_ref, head = _need_head(ctx.repo, "checkout")
    if detach:
        sha = commit_of(ctx.repo, name, "ref")
        target_ref = None
    else:
        target_ref = local_branch(ctx.repo, name, "ref")
        sha = ref_sha(ctx.repo, target_ref)
        if sha is None:
            raise FleetError("BAD_REF", f"{name!r} is not a local branch; pass detach: true to check out a "
                                        "commit, or propose a branch first")
        if target_ref == head_ref:
            raise FleetError("BAD_ARGUMENT", f"{short_ref(target_ref)} is already checked out")
    changes = writeset.tree_changes(ctx.repo, head, sha)
    changed = [p for _, p in changes]
    status, _ = read_status(ctx.repo)
    dirty = {e.path for e in status.entries if e.kind in "12u"}
    blocking = sorted(dirty & set(changed))
    preview = {"summary": f"check out {short_ref(target_ref) if target_ref else sha[:12] + ' (detached)'}",
               "from": {"branch": short_ref(head_ref) if head_ref else None, "head": head},
               "to": {"branch": short_ref(target_ref) if target_ref else None, "head": sha},
               "files_changing": changed[:200], "files_changing_count": len(changed),
               "local_changes_carried": sorted(dirty - set(changed))[:200],
               **writeset.changes_files(ctx.repo, changes)}
    if blocking:
        preview["warning"] = (f"{len(blocking)} locally changed file(s) differ on the target; git will refuse "
                              "the checkout: " + ", ".join(blocking[:10]))
    refs = [target_ref] if target_ref else []
    return Plan({"ref": short_ref(target_ref) if target_ref else sha, "detach": detach}, preview, refs=refs,
                moves=[], policy_refs=[short_ref(target_ref)] if target_ref else [sha], policy_paths=changed,
                writes=changed)


def run_checkout(ctx: Ctx, args: dict) -> dict:
    if args["detach"]:
        exec_git(ctx.repo, ["switch", "-q", "--detach", args["ref"]])
    else:
        exec_git(ctx.repo, ["switch", "-q", args["ref"]])
    return head_after(ctx)


# --- stash ---------------------------------------------------------------------------------------------

def preview_stash(ctx: Ctx, args: dict) -> Plan:
    catalog.Stash.known(args)
    message = catalog.Stash.text(args, "message")
    untracked = catalog.Stash.flag(args, "include_untracked")
    _need_head(ctx.repo, "stash")
    status, _ = read_status(ctx.repo)
    todo = [e for e in status.entries if e.kind in "12u" or (untracked and e.kind == "?")]
    if not todo:
        raise FleetError("BAD_ARGUMENT", "nothing to stash" + ("" if untracked else
                                                              " (untracked files need include_untracked)"))
    preview = {"summary": f"stash {plural(len(todo), 'file')}" + (" including untracked ones" if untracked else ""),
               "files": _files(todo), **capped_diff(ctx.repo, ["diff-index", "HEAD"]), "message": message}
    return Plan({"message": message, "include_untracked": untracked}, preview, refs=["refs/stash"], moves=[],
                policy_paths=[e.path for e in todo],
                untracked_content=[e.path for e in todo if e.kind == "?"])


def run_stash(ctx: Ctx, args: dict) -> dict:
    cmd = ["stash", "push", "-q"]
    if args["include_untracked"]:
        cmd.append("--include-untracked")
    if args["message"]:
        cmd += ["-m", args["message"]]
    exec_git(ctx.repo, cmd, literal=False)
    sha = ref_sha(ctx.repo, "refs/stash")
    return {"stash": sha, "undo": {"stash_drop": sha}}


def preview_stash_pop(ctx: Ctx, args: dict) -> Plan:
    catalog.StashPop.known(args)
    n = catalog.StashPop.number(args, "index")
    _need_head(ctx.repo, "stash_pop")
    entries = text(run(ctx.repo, ["reflog", "show", "--format=%H %gs", "-z", "refs/stash", "--"],
                       check=False).stdout).split("\0")
    entries = [e for e in entries if e]
    if n >= len(entries):
        raise FleetError("NOT_FOUND", f"there is no stash@{{{n}}} ({len(entries)} stash entries)")
    sha, message = entries[n][:40], entries[n][41:]
    files = text(run(ctx.repo, ["diff-tree", "-r", "--no-renames", "--name-status", "-z", f"{sha}^1", sha, "--"]).stdout).split("\0")
    names = [p for kind, p in zip(files[::2], files[1::2])]
    untracked = []
    if ref_sha(ctx.repo, f"{sha}^3") is not None:
        untracked = [p for p in text(run(ctx.repo, ["ls-tree", "-r", "-z", "--name-only", f"{sha}^3"]).stdout)
                     .split("\0") if p]
    status, _ = read_status(ctx.repo)
    dirty = {e.path for e in status.entries}
    preview = {"summary": f"apply and drop stash@{{{n}}}: {message}", "stash": sha, "message": message,
               "files": names[:200], "untracked_files": untracked[:200],
               **capped_diff(ctx.repo, ["diff-tree", "-r", f"{sha}^1", sha])}
    clash = sorted(dirty & (set(names) | set(untracked)))
    if clash:
        preview["warning"] = "files changed locally are also in the stash; git may refuse: " + ", ".join(clash[:10])
    return Plan({"index": n, "stash": sha, "message": message}, preview, refs=["refs/stash"], moves=[],
                policy_paths=names + untracked, undo={"stash_store": sha, "stash_message": message},
                writes=names + untracked)


def run_stash_pop(ctx: Ctx, args: dict) -> dict:
    exec_git(ctx.repo, ["stash", "pop", "-q", f"stash@{{{args['index']}}}"], literal=False)
    return {"popped": args["stash"]}


# --- reset / discard -----------------------------------------------------------------------------------

UPDATES_FILES = ("hard", "keep", "merge")  # the modes that write working-tree files (ignored ones too)


def preview_reset(ctx: Ctx, args: dict) -> Plan:
    catalog.Reset.known(args)
    mode = catalog.Reset.choice(args, "mode")
    head_ref, head = _need_head(ctx.repo, "reset")
    target = commit_of(ctx.repo, catalog.Reset.text(args, "target"), "target")
    leaving = commits_between(ctx.repo, target, head)
    arriving = commits_between(ctx.repo, head, target)
    rewrites = bool(leaving["commits"])
    status, _ = read_status(ctx.repo)
    lost = [e for e in status.entries if e.kind in "12u"] if mode == "hard" else []
    branch = short_ref(head_ref) if head_ref else None
    preview = {"summary": f"{mode} reset of {branch or 'detached HEAD'} from {head[:12]} to {target[:12]}",
               "mode": mode, "from": head, "to": target, "commits_leaving": leaving["commits"],
               "commits_arriving": arriving["commits"], "rewrites_history": rewrites,
               "files_changing": _names(ctx.repo, head, target)}
    writes: list[str] = []
    if mode in UPDATES_FILES:
        changes = writeset.tree_changes(ctx.repo, head, target)
        preview.update(writeset.changes_files(ctx.repo, changes))
        writes = [p for _, p in changes]
    if lost:
        preview["uncommitted_changes_discarded"] = _files(lost)
        preview.update(capped_diff(ctx.repo, ["diff-index", "HEAD"]))
    moves = _moved(ctx.repo)
    dropped = commit_paths(ctx.repo, [head, f"^{target}"])  # the files of the commits it leaves behind
    touched = [e.path for e in lost] + tree_paths(ctx.repo, head, target) + (dropped or [])
    return Plan({"mode": mode, "target": target}, preview, refs=moves, moves=moves,
                paths=[] if mode == "soft" else None, pin_index=mode == "soft",
                policy_refs=[branch] if branch else [], policy_paths=list(dict.fromkeys(touched)),
                paths_listed=dropped is not None, writes=writes)


def _names(repo: str, a: str, b: str) -> list[str]:
    return [p for p in text(run(repo, ["diff-tree", "-r", "--no-renames", "--name-only", "-z", a, b, "--"]).stdout).split("\0") if p][:200]


def run_reset(ctx: Ctx, args: dict) -> dict:
    exec_git(ctx.repo, ["reset", "-q", f"--{args['mode']}", args["target"]])
    return head_after(ctx)


def preview_discard(ctx: Ctx, args: dict) -> Plan:
    catalog.Discard.known(args)
    paths = catalog.Discard.items(args, "paths", ctx.repo)
    untracked = catalog.Discard.flag(args, "include_untracked")
    status, _ = read_status(ctx.repo, paths)
    if status.conflicted:
        raise FleetError("CONFLICT", "some of these paths are conflicted; resolve or abort the operation first")
    tracked = [e for e in status.entries if e.kind in "12" and e.xy[1] != "."]
    loose = [e for e in status.entries if e.kind == "?"] if untracked else []
    if not tracked and not loose:
        raise FleetError("BAD_ARGUMENT", "nothing to discard: no unstaged changes there" +
                         ("" if untracked else " (untracked files need include_untracked)"))
    preview = {"summary": f"discard working-tree changes to {plural(len(tracked), 'tracked file')}" +
                          (f" and delete {plural(len(loose), 'untracked file')}" if loose else ""),
               "files": _files(tracked + loose), **capped_diff(ctx.repo, ["diff-files", "--", *paths]),
               "untracked_deleted": [e.path for e in loose],
               "note": "staged changes are kept; the restore point saves every file's exact content"}
    return Plan({"paths": paths, "include_untracked": untracked, "tracked": [e.path for e in tracked],
                 "untracked": [e.path for e in loose]}, preview, paths=paths,
                policy_paths=[e.path for e in tracked + loose], untracked_content=[e.path for e in loose])


def run_discard(ctx: Ctx, args: dict) -> dict:
    if args["tracked"]:
        exec_git(ctx.repo, ["restore", "--worktree", "--", *args["tracked"]])
    for rel in args["untracked"]:
        full = inside(ctx.repo, rel)
        if os.path.lexists(full) and not os.path.isdir(full):
            os.unlink(full)
    return {"discarded": len(args["tracked"]), "deleted": len(args["untracked"])}


catalog.Stage.bind(preview_stage, run_stage)
catalog.Unstage.bind(preview_unstage, run_unstage)
catalog.Commit.bind(preview_commit, run_commit)
catalog.Branch.bind(preview_branch, run_branch)
catalog.Checkout.bind(preview_checkout, run_checkout)
catalog.Stash.bind(preview_stash, run_stash)
catalog.StashPop.bind(preview_stash_pop, run_stash_pop)
catalog.Reset.bind(preview_reset, run_reset)
catalog.Discard.bind(preview_discard, run_discard)
