"""merge and rebase: bringing another line of history into the checked-out branch.

Both previews predict conflicts without touching the repository: merge with the read side's merge-tree
preflight; rebase by replaying the branch's commits one by one onto the target in the read side's throwaway
repository (fleet.git.mergetree: nothing written or freshened in the repository, no merge driver of its run;
`git merge-tree` against a synthetic parent, so each step is exactly a cherry-pick), naming the first
commit that would conflict. Runs never leave a half-done operation behind: a merge or rebase that stops on
conflicts is aborted, and the proposal fails naming them (the restore point is there either way).
"""

from __future__ import annotations

from fleet.words import plural
import os

from fleet.errors import FleetError
from fleet.git.files import short_ref
from fleet.git.mergetree import scratch_repo
from fleet.git.revs import found_of, git_dirs
from fleet.git.run import GitError, run, run_git, text
from fleet.ops import catalog, writeset
from fleet.ops.coreops import head_after
from fleet.ops.gitexec import exec_git
from fleet.ops.model import Ctx, Plan, commit_of, commit_paths, commits_between, is_ancestor, tree_paths
from fleet.ops.repocode import driver_paths
from fleet.ops.pins import head_state, read_status
from fleet.repo.conflicts import conflict_preflight

MAX_REPLAY = 200
_IDENTITY = {"GIT_AUTHOR_NAME": "fleetdeck", "GIT_AUTHOR_EMAIL": "fleetdeck@localhost",
             "GIT_COMMITTER_NAME": "fleetdeck", "GIT_COMMITTER_EMAIL": "fleetdeck@localhost",
             "GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_DATE": "@0 +0000"}


def _on_branch(repo: str, op: str) -> tuple[str, str]:
    head_ref, head = head_state(repo)
    if head is None or head_ref is None:
        raise FleetError("BAD_ARGUMENT", f"{op} needs a checked-out branch with commits (HEAD is "
                                         f"{'detached' if head else 'unborn'})")
    status, _ = read_status(repo)
    if status.conflicted:
        raise FleetError("CONFLICT", "the repository has unresolved conflicts; finish or abort that first")
    return head_ref, head


def _with_trailer(message: str, agent: str) -> str:
    return message.rstrip("\n") + f"\n\nProposed-by: {agent}\n"


# --- merge -----------------------------------------------------------------------------------------------

def preview_merge(ctx: Ctx, args: dict) -> Plan:
    catalog.Merge.known(args)
    mode = catalog.Merge.choice(args, "mode")
    source = catalog.Merge.text(args, "source")
    message = catalog.Merge.text(args, "message")
    head_ref, head = _on_branch(ctx.repo, "merge")
    sha = commit_of(ctx.repo, source, "source")
    flight = conflict_preflight(found_of(ctx.repo), sha, "HEAD")
    if flight["result"] == "up_to_date":
        raise FleetError("BAD_ARGUMENT", f"{source} is already merged into {short_ref(head_ref)}")
    if mode == "ff_only" and flight["result"] != "fast_forward":
        raise FleetError("BAD_ARGUMENT", f"{short_ref(head_ref)} cannot fast-forward to {source}: they diverged")
    arriving = commits_between(ctx.repo, head, sha)
    changes = writeset.tree_changes(ctx.repo, head, sha)
    preview = {"summary": f"{'squash-' if mode == 'squash' else ''}merge {source} ({sha[:12]}) into "
                          f"{short_ref(head_ref)}" + (" (fast-forward)" if flight["result"] == "fast_forward" else ""),
               "mode": mode, "source": source, "source_sha": sha, "branch": short_ref(head_ref), "from": head,
               "commits_arriving": arriving["commits"], "commits_truncated": arriving["truncated"],
               "preflight": _with_drivers(ctx.repo, flight, head, sha),
               "rewrites_history": False,
               "files_changing": [p for _, p in changes][:200], **writeset.changes_files(ctx.repo, changes)}
    if flight["result"] == "conflicts":
        preview["warning"] = (f"the merge would conflict in {plural(flight['conflict_count'], 'file')}; it will be "
                              "aborted and the proposal fail unless resolved first")
    default = f"Merge {source} into {short_ref(head_ref)}"
    if mode == "squash" or (mode == "merge" and flight["result"] != "fast_forward"):  # a commit is made
        preview["message"] = message or default
    arriving_paths = commit_paths(ctx.repo, [sha, f"^{head}"])  # the files of every commit it brings in
    return Plan({"source": source, "sha": sha, "mode": mode, "message": message or default}, preview,
                refs=[head_ref], moves=[head_ref], policy_refs=[short_ref(head_ref), source],
                policy_paths=arriving_paths or [], paths_listed=arriving_paths is not None,
                writes=[p for _, p in changes])


def _with_drivers(repo: str, flight: dict, head: str, sha: str) -> dict:
    """The preflight as the preview shows it. git's built-in merge (what the preflight runs, in a throwaway
    repository) is not what runs for a path whose merge a custom driver decides: then it says so
    (`unknown`, naming the paths and drivers) instead of predicting a result the execution may not have."""
    shown = {k: flight[k] for k in ("result", "conflicted_paths", "conflict_count", "merge_base")}
    if flight["result"] == "fast_forward":
        return shown
    drivers = driver_paths(repo, flight["merge_base"], head, sha)
    if drivers:
        names = ", ".join(f"`{n}`" for n in sorted(set(drivers.values())))
        shown.update(result="unknown", builtin_result=flight["result"], driver_paths=sorted(drivers)[:200],
                     note=f"merge driver {names} decides {plural(len(drivers), 'file')} both sides changed "
                          f"({', '.join(sorted(drivers)[:5])}); the preflight runs git's own merge and "
                          "cannot predict what that driver will do")
    return shown


def run_merge(ctx: Ctx, args: dict) -> dict:
    mode, sha = args["mode"], args["sha"]
    message = _with_trailer(args["message"], ctx.agent)
    if mode == "ff_only":
        cmd = ["merge", "-q", "--ff-only", sha]
    elif mode == "squash":
        cmd = ["merge", "-q", "--squash", sha]
    else:
        cmd = ["merge", "-q", "--no-edit", "-m", message, sha]
    try:
        exec_git(ctx.repo, cmd)
        if mode == "squash":
            exec_git(ctx.repo, ["commit", "-q", "-m", message])
    except FleetError as exc:
        conflicts = _conflicted(ctx.repo)
        if conflicts or os.path.exists(os.path.join(git_dirs(ctx.repo)[0], "MERGE_HEAD")):
            exec_git(ctx.repo, ["merge", "--abort"], check=False)
        if mode == "squash":
            exec_git(ctx.repo, ["reset", "-q", "--merge"], check=False)
        if conflicts:
            exc.message += f" (conflicts in {', '.join(conflicts[:10])}; the merge was aborted)"
        raise
    return head_after(ctx)


def _conflicted(repo: str) -> list[str]:
    data = text(run(repo, ["ls-files", "--unmerged", "-z"]).stdout)
    return sorted({entry.split("\t", 1)[1] for entry in data.split("\0") if "\t" in entry})


# --- rebase ----------------------------------------------------------------------------------------------

def replay_preflight(repo: str, onto: str, head: str) -> dict:
    """Replay head's commits (onto..head, oldest first) onto `onto`, commit by commit, in a throwaway
    object store. Returns {result: clean|conflicts, first_conflict: {sha, subject, paths} | None, replayed}."""
    shas = [s for s in text(run(repo, ["rev-list", "--reverse", "--no-merges", f"--max-count={MAX_REPLAY + 1}",
                                       head, f"^{onto}", "--"]).stdout).split() if s]
    if len(shas) > MAX_REPLAY:
        raise FleetError("LIMIT", f"more than {MAX_REPLAY} commits to replay; rebase it in a terminal")
    base = onto
    with scratch_repo(repo, git_dirs(repo)[1]) as gitdir:  # nothing written, freshened or run in the repo

        def git(args: list[str], ok: tuple[int, ...] = (0,)):
            try:
                return run_git(gitdir, args, extra_env=_IDENTITY, ok_codes=ok, timeout=30)
            except GitError as exc:
                raise FleetError.from_git(exc) from exc

        for n, sha in enumerate(shas):
            parent = text(git(["rev-parse", "--verify", "--quiet", f"{sha}^"], ok=(0, 1)).stdout).strip()
            if not parent:
                return {"result": "unknown", "first_conflict": None, "replayed": n,
                        "note": "a root commit is in the range; no preflight"}
            base_tree = text(git(["rev-parse", f"{base}^{{tree}}"]).stdout).strip()
            synthetic = text(git(["commit-tree", base_tree, "-p", parent, "-m", "preflight"]).stdout).strip()
            res = git(["merge-tree", "--write-tree", "--name-only", "-z", synthetic, sha], ok=(0, 1))
            tree, _, rest = res.stdout.partition(b"\0")
            if res.returncode == 1:
                paths = [p for p in text(rest.partition(b"\0\0")[0]).split("\0") if p]
                subject = text(run(repo, ["log", "-1", "--format=%s", sha, "--"]).stdout).strip()
                return {"result": "conflicts", "replayed": n,
                        "first_conflict": {"sha": sha, "subject": subject, "paths": sorted(set(paths))[:50]}}
            base = text(git(["commit-tree", text(tree), "-p", base, "-m", "replayed"]).stdout).strip()
    return {"result": "clean", "first_conflict": None, "replayed": len(shas)}


def preview_rebase(ctx: Ctx, args: dict) -> Plan:
    catalog.Rebase.known(args)
    onto = catalog.Rebase.text(args, "onto")
    head_ref, head = _on_branch(ctx.repo, "rebase")
    sha = commit_of(ctx.repo, onto, "onto")
    if is_ancestor(ctx.repo, sha, head):
        raise FleetError("BAD_ARGUMENT", f"{short_ref(head_ref)} already contains {onto}: nothing to rebase")
    merges = text(run(ctx.repo, ["rev-list", "--merges", "--max-count=1", head, f"^{sha}", "--"]).stdout).strip()
    if merges:
        raise FleetError("BAD_ARGUMENT", f"the commits to replay include merge {merges[:12]}; a rebase would "
                                         "flatten it: rebase it in a terminal")
    replayed = commits_between(ctx.repo, sha, head, limit=MAX_REPLAY)
    flight = replay_preflight(ctx.repo, sha, head)
    onto_changes = writeset.tree_changes(ctx.repo, head, sha)
    base = text(run(ctx.repo, ["merge-base", head, sha], check=False).stdout).strip() or None
    drivers = driver_paths(ctx.repo, base, head, sha)
    if drivers:
        flight = {**flight, "result": "unknown", "builtin_result": flight["result"],
                  "driver_paths": sorted(drivers)[:200],
                  "note": f"merge driver(s) {', '.join(sorted(set(drivers.values())))} decide files both sides "
                          "changed; the replay uses git's own merge and cannot predict them"}
    preview = {"summary": f"rebase {short_ref(head_ref)} ({plural(len(replayed['commits']), 'commit')}) onto {onto} "
                          f"({sha[:12]})", "branch": short_ref(head_ref), "from": head, "onto": onto,
               "onto_sha": sha, "commits_replayed": replayed["commits"], "rewrites_history": True,
               "commits_arriving": commits_between(ctx.repo, head, sha)["commits"], "preflight": flight,
               **writeset.changes_files(ctx.repo, onto_changes)}
    if flight["result"] == "conflicts":
        first = flight["first_conflict"]
        preview["warning"] = (f"commit {first['sha'][:12]} ({first['subject']}) would conflict in "
                              f"{', '.join(first['paths'][:5])}; the rebase will be aborted and the proposal fail")
    status, _ = read_status(ctx.repo)
    if any(e.kind in "12" for e in status.entries):
        preview["warning"] = "uncommitted changes: git refuses to rebase until they are committed or stashed"
    upstream = text(run(ctx.repo, ["rev-parse", "--verify", "--quiet", "--symbolic-full-name", "@{upstream}"],
                        check=False).stdout).strip()
    if upstream and replayed["commits"] and is_ancestor(ctx.repo, replayed["commits"][-1]["sha"], upstream):
        preview["rewrites_pushed_commits"] = True
    replayed_paths = commit_paths(ctx.repo, [head, f"^{sha}"])  # rewritten, and the tree moves onto `onto`
    touched = (replayed_paths or []) + tree_paths(ctx.repo, head, sha)
    writes = list(dict.fromkeys([*(p for _, p in onto_changes), *writeset.commits_paths(ctx.repo, sha, head)]))
    return Plan({"onto": sha}, preview, refs=[head_ref], moves=[head_ref],
                policy_refs=[short_ref(head_ref), onto], policy_paths=list(dict.fromkeys(touched)),
                paths_listed=replayed_paths is not None, writes=writes)


def run_rebase(ctx: Ctx, args: dict) -> dict:
    try:
        exec_git(ctx.repo, ["rebase", "-q", "--no-autostash", args["onto"]], literal=False)
    except FleetError as exc:
        git_dir = git_dirs(ctx.repo)[0]
        if any(os.path.exists(os.path.join(git_dir, d)) for d in ("rebase-merge", "rebase-apply")):
            stopped = text(run(ctx.repo, ["rev-parse", "--verify", "--quiet", "REBASE_HEAD"], check=False).stdout).strip()
            conflicts = _conflicted(ctx.repo)
            exec_git(ctx.repo, ["rebase", "--abort"], literal=False, check=False)
            exc.message += (f" (stopped at {stopped[:12] or 'a commit'}, conflicts in "
                            f"{', '.join(conflicts[:10]) or 'unknown files'}; the rebase was aborted)")
        raise
    return head_after(ctx)


catalog.Merge.bind(preview_merge, run_merge)
catalog.Rebase.bind(preview_rebase, run_rebase)
