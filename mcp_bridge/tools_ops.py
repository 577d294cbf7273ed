"""Write tools: every change an agent wants becomes a proposal a person approves (fleet.ops.service).

`operation.preview.<op>` validates and previews at once and returns `{proposal_id, status, approve_url,
next_action, preview, expires_at}` (with `dry_run`: `{status: "dry_run", preview}` and nothing stored);
`operation.status` / `operation.cancel` follow it; `restore.list` / `restore.details` show what can be
undone. The agent is the caller's identity: its agent credential's name, or `unknown:<declared name>` for a
client without one (no `auto`, one shared quota; docs/security.md). Annotations say what the proposed operation
would do once approved (destructiveHint), and that a repeated call makes a new proposal unless it carries
the same idempotency_key (idempotentHint false).
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from fleet.agents.identity import unknown
from fleet.ops.catalog import OPS as CATALOG
from fleet.ops.model import MAX_PATCH_BYTES
from mcp_bridge.bridge import Who, identity
from mcp_bridge.envelope import Out
from mcp_bridge.toolkit import READ_ONLY, Toolkit
from mcp_bridge.tools_repo import Repo

Reason = Annotated[str, Field(min_length=1, max_length=500, description="why: shown to the person who decides")]
Key = Annotated[str | None, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$",
                                  description="a retry with the same key (same agent, same op) returns the same proposal")]
DryRun = Annotated[bool, Field(description="validate and preview only; nothing is stored")]
RelPath = Annotated[str, Field(min_length=1, max_length=4096, description="a literal path relative to the repository root")]
Paths = Annotated[list[RelPath], Field(min_length=1, max_length=1000)]
Rev = Annotated[str, Field(min_length=1, max_length=4096, description="a branch, tag, sha, HEAD~2, ...")]
Message = Annotated[str, Field(min_length=1, max_length=65536)]
ProposalId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")]
PatchText = Annotated[str, Field(min_length=1, max_length=MAX_PATCH_BYTES, description="unified diff text (at most 1 MiB)")]


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repo: Repo
    branches: Annotated[list[Rev], Field(min_length=1, max_length=20)]


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Literal["stage", "unstage", "stage_hunks", "commit", "branch", "checkout", "stash", "merge", "rebase",
                "discard", "reset", "patch"]
    args: dict = Field(default_factory=dict, description="the op's own arguments (as its preview tool takes them)")


class Proposal(Out):
    proposal_id: str | None
    status: str
    op: str
    repo: str
    risk: str
    approve_url: str | None
    next_action: dict | None
    preview: dict | None
    expires_at: str | None


class ProposalRow(Out):
    id: str
    op: str
    repo: str
    agent: str
    agent_declared: str | None
    agent_authenticated: bool
    reason: str
    status: str
    risk: str | None
    preview: dict | None
    result: dict | None
    error: str | None
    restore_point: str | None
    interrupted: bool
    created_at: str | None
    expires_at: str | None
    decided_at: str | None
    decided_by: str | None
    finished_at: str | None
    undone_by: str | None = None
    undone_at: str | None = None


class RestoreList(Out):
    repo: str
    restore_points: list[dict]
    truncated: bool
    omitted_count: int


class RestoreDetails(Out):
    restore_point: str
    repo: str
    op: str | None
    head_ref: str | None
    head: str | None
    refs: dict
    files: list[dict]
    git_refs: list[str]
    undoable: bool


def _who() -> Who:
    """The caller (set by the server for every call; a bare call outside one is an unnamed unknown client)."""
    return identity.get() or Who(unknown(None), None, None)


def _writes(op: str) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=False, destructive_hint=CATALOG[op].destructive, idempotent_hint=False,
                           open_world_hint=op == "push")


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    # The write side (fleet.ops.service, restore and the op families) loads with the first call that needs
    # it, not with the tools list: most agents' sessions never propose anything.
    def propose(op: str, repo: str, reason: str, dry_run: bool, key: str | None, **args: object) -> dict:
        from fleet.ops import service

        path = bridge.resolve(repo).path
        clean = {k: v for k, v in args.items() if v is not None}
        who = _who()
        return service.propose(bridge.index(), who.agent, op, path, clean, reason, dry_run=dry_run,
                               idempotency_key=key, declared=who.declared, session=who.session)

    def preview_tool(op: str, title: str):
        return kit.tool(f"operation.preview.{op}", Proposal, title, _writes(op))

    @preview_tool("stage", "Propose staging files")
    def stage(repo: Repo, reason: Reason, paths: Paths | None = None, all: bool = False,
              dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose `git add` of literal `paths` (or `all: true`: every change, untracked files included).
        A person approves it before it runs; poll operation.status."""
        return propose("stage", repo, reason, dry_run, idempotency_key, paths=paths, all=all or None)

    @preview_tool("unstage", "Propose unstaging files")
    def unstage(repo: Repo, reason: Reason, paths: Paths, dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose taking `paths` out of the index (the working-tree files stay as they are)."""
        return propose("unstage", repo, reason, dry_run, idempotency_key, paths=paths)

    @preview_tool("commit", "Propose a commit")
    def commit(repo: Repo, reason: Reason, message: Message, paths: Paths | None = None, amend: bool = False,
               dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose committing the staged changes (or only `paths`) as the person, with a
        `Proposed-by: <agent>` trailer. `amend: true` rewrites the last commit (high risk)."""
        return propose("commit", repo, reason, dry_run, idempotency_key, message=message, paths=paths,
                       amend=amend or None)

    @preview_tool("branch", "Propose a new branch")
    def branch(repo: Repo, reason: Reason, name: Rev, start_point: Rev = "HEAD", checkout: bool = False,
               dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose creating branch `name` at `start_point` (default HEAD), optionally checking it out."""
        return propose("branch", repo, reason, dry_run, idempotency_key, name=name, start_point=start_point,
                       checkout=checkout)

    @preview_tool("checkout", "Propose a checkout")
    def checkout(repo: Repo, reason: Reason, ref: Rev, detach: bool = False, dry_run: DryRun = False,
                 idempotency_key: Key = None) -> dict:
        """Propose switching to local branch `ref` (or, with `detach: true`, to any commit, detached)."""
        return propose("checkout", repo, reason, dry_run, idempotency_key, ref=ref, detach=detach)

    @preview_tool("stash", "Propose stashing changes")
    def stash(repo: Repo, reason: Reason, message: Message | None = None, include_untracked: bool = False,
              dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose `git stash push` of the working-tree changes (untracked files with include_untracked)."""
        return propose("stash", repo, reason, dry_run, idempotency_key, message=message,
                       include_untracked=include_untracked)

    @preview_tool("stash_pop", "Propose popping a stash")
    def stash_pop(repo: Repo, reason: Reason, index: Annotated[int, Field(ge=0, le=10000)] = 0,
                  dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose applying stash@{index} and dropping it."""
        return propose("stash_pop", repo, reason, dry_run, idempotency_key, index=index)

    @preview_tool("reset", "Propose a reset")
    def reset(repo: Repo, reason: Reason, target: Rev, mode: Literal["soft", "mixed", "hard"] = "mixed",
              dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose moving the current branch to `target`. The preview lists the commits it leaves behind
        and, for `hard` (high risk), the uncommitted changes it throws away (kept in the restore point)."""
        return propose("reset", repo, reason, dry_run, idempotency_key, target=target, mode=mode)

    @preview_tool("discard", "Propose discarding changes")
    def discard(repo: Repo, reason: Reason, paths: Paths, include_untracked: bool = False,
                dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose throwing away the unstaged changes to `paths` (and deleting untracked files there with
        include_untracked). High risk; the restore point keeps every file's exact content."""
        return propose("discard", repo, reason, dry_run, idempotency_key, paths=paths,
                       include_untracked=include_untracked)

    @preview_tool("merge", "Propose a merge")
    def merge(repo: Repo, reason: Reason, source: Rev, mode: Literal["merge", "squash", "ff_only"] = "merge",
              message: Message | None = None, dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose merging `source` into the checked-out branch (a merge commit, a squash commit, or a
        fast-forward only). The preview carries the merge-tree conflict preflight; a merge that conflicts
        is aborted and the proposal fails."""
        return propose("merge", repo, reason, dry_run, idempotency_key, source=source, mode=mode, message=message)

    @preview_tool("rebase", "Propose a rebase")
    def rebase(repo: Repo, reason: Reason, onto: Rev, dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose replaying the checked-out branch onto `onto` (never interactive; high risk: rewrites
        history). The preflight replays commit by commit and names the first one that would conflict."""
        return propose("rebase", repo, reason, dry_run, idempotency_key, onto=onto)

    @preview_tool("patch", "Propose applying a patch")
    def patch(repo: Repo, reason: Reason,
              patch: PatchText, target: Literal["worktree", "index"] = "worktree", dry_run: DryRun = False,
              idempotency_key: Key = None) -> dict:
        """Propose applying a unified diff (e.g. from patch.generate; at most 1 MiB) to the working tree or
        the index. It must be the diff alone, every byte of it one git reads (no mail headers, commit
        message or other text git would skip: refused); every path is checked and `git apply --check`
        must accept it before a proposal is made."""
        return propose("patch", repo, reason, dry_run, idempotency_key, patch=patch, target=target)

    @preview_tool("patch_file_write", "Propose writing a patch file into a repository")
    def patch_file_write(repo: Repo, reason: Reason,
                         path: Annotated[str, Field(min_length=1, max_length=4096, description="where in the "
                                                    "repository, ending in .patch or .diff (e.g. patches/x.patch)")],
                         patch_file: Annotated[str | None, Field(min_length=1, max_length=4096, description="a patch "
                                                                 "file in fleetdeck's patch folder (patch.generate's)")] = None,
                         patch: PatchText | None = None, dry_run: DryRun = False,
                         idempotency_key: Key = None) -> dict:
        """Propose putting a patch file into the repository (where tools such as patch-package apply it):
        its content is `patch_file` (from fleetdeck's patch folder) or `patch` (text). patch.generate and
        patch.remove write only to that folder; this is the one way a patch file reaches a repository."""
        return propose("patch_file_write", repo, reason, dry_run, idempotency_key, path=path,
                       patch_file=patch_file, patch=patch)

    @preview_tool("stage_hunks", "Propose staging chosen hunks")
    def stage_hunks(repo: Repo, reason: Reason, path: RelPath,
                    hunks: Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(min_length=1, max_length=500)],
                    dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose staging some hunks of one file: `hunks` are the `id`s repo.changes gives unstaged hunks
        (stable while the file is unchanged, whatever `unified` was used to list them)."""
        return propose("stage_hunks", repo, reason, dry_run, idempotency_key, path=path, hunks=hunks)

    @preview_tool("push", "Propose a push")
    def push(repo: Repo, reason: Reason, remote: Rev = "origin", branch: Rev | None = None,
             set_upstream: bool = False, force_with_lease: bool = False, dry_run: DryRun = False,
             idempotency_key: Key = None) -> dict:
        """Propose pushing a local branch (default: the checked-out one) to `remote`. It cannot be undone by
        fleetdeck. A force exists only as `force_with_lease`, pinned to the remote sha the preview saw."""
        return propose("push", repo, reason, dry_run, idempotency_key, remote=remote, branch=branch,
                       set_upstream=set_upstream, force_with_lease=force_with_lease)

    @preview_tool("branch_delete", "Propose a branch clean-up across the fleet")
    def branch_delete(reason: Reason, targets: Annotated[list[Target], Field(min_length=1, max_length=20)],
                      merged_only: bool = True, dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose deleting local branches in one or more repositories (targets: [{repo, branches}], at most
        20 x 20, 100 in all) with one approval. Never a checked-out branch or one whose tip moved since the
        preview; with merged_only (default) only branches merged into their upstream or default branch. The
        preview and the result say, per branch, deleted / kept / failed and why. Undo recreates them."""
        plain = [{"repo": t.repo, "branches": list(t.branches)} for t in targets]
        for t in plain:
            bridge.resolve(t["repo"])
        return propose("branch_delete", plain[0]["repo"], reason, dry_run, idempotency_key, targets=plain,
                       merged_only=merged_only)

    @preview_tool("worktree", "Propose a new worktree")
    def worktree(repo: Repo, reason: Reason,
                 path: Annotated[str, Field(min_length=1, max_length=4096, description="absolute path, inside a fleet root")],
                 branch: Rev, new_branch: bool = False, dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose `git worktree add` at `path` on `branch` (created at HEAD with new_branch: true)."""
        return propose("worktree", repo, reason, dry_run, idempotency_key, path=path, branch=branch,
                       new_branch=new_branch)

    @preview_tool("submodule_pointer", "Propose moving a submodule pointer")
    def submodule_pointer(repo: Repo, reason: Reason, path: RelPath, action: Literal["record", "return"],
                          message: Message | None = None, dry_run: DryRun = False,
                          idempotency_key: Key = None) -> dict:
        """`record`: commit the submodule's checked-out commit as the new pointer (needs `message`);
        `return`: check out the recorded commit in the submodule. Refused unless the submodule is
        initialized, clean and differs; both shas are pinned from the preview."""
        return propose("submodule_pointer", repo, reason, dry_run, idempotency_key, path=path, action=action,
                       message=message)

    @preview_tool("plan", "Propose a plan of steps")
    def plan(repo: Repo, reason: Reason, steps: Annotated[list[Step], Field(min_length=1, max_length=10)],
             dry_run: DryRun = False, idempotency_key: Key = None) -> dict:
        """Propose up to ten steps in one repository (stage, unstage, stage_hunks, commit, branch, checkout,
        stash, merge, rebase, discard, reset, patch), each previewed against what the steps before it leave,
        approved once, run in order, stopping at the first failure; one undo returns to the state before
        the plan."""
        return propose("plan", repo, reason, dry_run, idempotency_key,
                       steps=[{"op": s.op, "args": s.args} for s in steps])

    @preview_tool("restore", "Propose undoing a proposal")
    def restore_op(repo: Repo, reason: Reason, restore_point: ProposalId, dry_run: DryRun = False,
                   idempotency_key: Key = None) -> dict:
        """Propose going back to the state before a completed proposal (its id is its restore point).
        Refused (STALE) when the repository changed since that proposal ran."""
        return propose("restore", repo, reason, dry_run, idempotency_key, restore_point=restore_point)

    @preview_tool("restore_snapshot", "Propose restoring files from a snapshot")
    def restore_snapshot(repo: Repo, reason: Reason,
                         snapshot: Annotated[str, Field(pattern=r"^[0-9a-f]{4,40}$", description=
                                                        "snapshot id (or a unique prefix), from snapshot.list")],
                         paths: Paths | None = None, index: bool = False, dry_run: DryRun = False,
                         idempotency_key: Key = None) -> dict:
        """Propose putting a safety-net snapshot's files back (all, or only `paths`; with `index` its staged
        state too), e.g. the work a `discarded` event (repo.lost) names. The preview lists every file it would
        overwrite, recreate or remove; the present is snapshotted first and the restore point keeps it."""
        return propose("restore_snapshot", repo, reason, dry_run, idempotency_key, snapshot=snapshot,
                       paths=paths, index=index)

    @kit.tool("operation.status", ProposalRow, "A proposal's state")
    def status(proposal_id: ProposalId) -> dict:
        """A proposal: status (pending, approved, executing, completed, failed, rejected, cancelled,
        expired, undone; `interrupted` when its executor died), preview, result, error and restore point.
        An `undone` proposal names the restore that undid it (`undone_by`, `undone_at`); its `result` is what
        is there now (`head`), the result it had under `before_undo`."""
        from fleet.ops import service

        return service.show(bridge.index(), proposal_id)

    @kit.tool("operation.cancel", Proposal, "Withdraw a pending proposal",
              ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                              open_world_hint=False))
    def cancel(proposal_id: ProposalId) -> dict:
        """Cancel one of this agent's own pending proposals (NOT_PENDING once a person decided it). An agent
        with a credential cancels its own from any session; a client without one only what this session made."""
        from fleet.ops import service

        who = _who()
        return service.cancel(bridge.index(), proposal_id, who.agent, who.session)

    @kit.tool("restore.list", RestoreList, "Restore points of a repository", READ_ONLY)
    def restore_list(repo: Repo, limit: Annotated[int, Field(ge=1, le=1000)] = 200) -> dict:
        """Restore points taken before proposals ran in this repository, newest first."""
        from fleet.ops import restore

        return restore.list_points(bridge.index(), bridge.resolve(repo).path, limit)

    @kit.tool("restore.details", RestoreDetails, "One restore point", READ_ONLY)
    def restore_details(restore_point: ProposalId) -> dict:
        """What a restore point holds: HEAD and the refs before the proposal ran, the saved files, the git
        refs keeping them, and whether an undo is still possible."""
        from fleet.ops import restore

        return restore.public(restore.details(bridge.index(), restore_point))
