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

import inspect
from typing import Annotated, Callable

from mcp.types import ToolAnnotations
from pydantic import Field

from fleet.agents.identity import unknown
from fleet.ops.catalog import OPS as CATALOG
from fleet.ops import proposals, restorepoints
from fleet.ops.catalog import Arg, OpSpec, ProposalId as ProposalIdArg
from mcp_bridge.argtypes import plain, pydantic_type
from mcp_bridge.models import derive
from mcp_bridge.bridge import Who, identity
from mcp_bridge.toolkit import READ_ONLY, Toolkit
from mcp_bridge.tools_repo import Repo

Reason = Annotated[str, Field(min_length=1, max_length=500, description="why: shown to the person who decides")]
Key = Annotated[str | None, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$",
                                  description="a retry with the same key (same agent, same op) returns the same proposal")]
DryRun = Annotated[bool, Field(description="validate and preview only; nothing is stored")]
ProposalId = pydantic_type(ProposalIdArg)


# Derived from the answers' types where fleet/ builds them: a proposal and its row (fleet.ops.proposals),
# a restore point (fleet.ops.restorepoints); neither module loads the write side.
Proposal = derive(proposals.Proposal)
ProposalRow = derive(proposals.ProposalRow)
RestoreList = derive(restorepoints.RestoreList)
RestoreDetails = derive(restorepoints.RestoreDetails)


def _who() -> Who:
    """The caller (set by the server for every call; a bare call outside one is an unnamed unknown client)."""
    return identity.get() or Who(unknown(None), None, None)


def _writes(spec: type[OpSpec]) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=False, destructive_hint=spec.destructive, idempotent_hint=False,
                           open_world_hint=spec.leaves_machine)


def _param(name: str, hint: object, default: object = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=hint, default=default)


def preview_tool(spec: type[OpSpec], propose: Callable[..., dict]) -> Callable[..., dict]:
    """The `operation.preview.<op>` tool of one op, made from its class: the op's arguments between `repo`,
    `reason` and `dry_run`, `idempotency_key`; its docstring the tool's description."""
    declared = spec.args()
    params = [*([_param("repo", Repo)] if spec.per_repo else []), _param("reason", Reason),
              *(_param(name, pydantic_type(hint), default) for name, (hint, default) in declared.items()),
              _param("dry_run", DryRun, False), _param("idempotency_key", Key, None)]
    signature = inspect.Signature(params, return_annotation=dict)
    dropped_when_false = {name for name, (hint, _) in declared.items()
                          if any(isinstance(m, Arg) and m.omit_false for m in getattr(hint, "__metadata__", ()))}

    def tool(**kwargs: object) -> dict:
        bound = signature.bind(**kwargs)
        bound.apply_defaults()
        given = bound.arguments
        args = {name: plain(given[name]) for name in declared}
        args.update({name: args[name] or None for name in dropped_when_false})
        return propose(spec, given.get("repo"), given["reason"], given["dry_run"], given["idempotency_key"], args)

    # The function's name titles the published inputSchema (`<name>Arguments`): restore's tool was written
    # as `restore_op` (beside the restore module), and its schema keeps that title.
    tool.__name__ = "restore_op" if spec.op == "restore" else spec.op
    tool.__doc__ = spec.__doc__
    tool.__signature__ = signature  # type: ignore[attr-defined]
    return tool


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    # The write side (fleet.ops.service, restore and the op families) loads with the first call that needs
    # it, not with the tools list: most agents' sessions never propose anything.
    def propose(spec: type[OpSpec], repo: str | None, reason: str, dry_run: bool, key: str | None,
                args: dict) -> dict:
        from fleet.ops import service

        for named in spec.repos(args):  # a fleet-wide op: each repository it names, in the fleet's scope
            bridge.resolve(named)
        path = bridge.resolve(repo if spec.per_repo else spec.repos(args)[0]).path
        clean = {k: v for k, v in args.items() if v is not None}
        who = _who()
        return service.propose(bridge.index(), who.agent, spec.op, path, clean, reason, dry_run=dry_run,
                               idempotency_key=key, declared=who.declared, session=who.session)

    for spec in CATALOG.values():
        kit.tool(f"operation.preview.{spec.op}", Proposal, spec.title, _writes(spec))(preview_tool(spec, propose))

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
        return restorepoints.list_points(bridge.index(), bridge.resolve(repo).path, limit)

    @kit.tool("restore.details", RestoreDetails, "One restore point", READ_ONLY)
    def restore_details(restore_point: ProposalId) -> dict:
        """What a restore point holds: HEAD and the refs before the proposal ran, the saved files, the git
        refs keeping them, and whether an undo is still possible."""
        return restorepoints.public(restorepoints.details(bridge.index(), restore_point))
