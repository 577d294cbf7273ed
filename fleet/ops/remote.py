"""push: the one operation that leaves the machine, so the one fleetdeck cannot undo (the preview says so).

No fetch at preview time: the remote's state is the remote-tracking ref as of the last fetch, and the
preview says which commits the push would send and whether it fast-forwards. What approval needs is checked
(fleet/ops/reach.py: the destination folder exists, or its host answers a TCP connect; nothing is sent) and a
destination that could not be reached is a warning in the preview. A force exists only as
`force_with_lease`, pinned to the remote-tracking sha the preview saw: if the remote moved since, git
refuses. The push runs as the person would (pre-push hook, credential helpers, ssh-agent).

The destination is what git itself will use: `git remote get-url --push --all` (pushurl, insteadOf and
pushInsteadOf applied), shown in the preview (credentials redacted), pinned as a digest and read again right
before the push: a destination that moved is STALE and nothing is sent. A repository whose own config
(local or worktree scope, with its includes) sets `protocol.*.allow`, `remote.*.receivepack` or
`remote.*.uploadpack`, or whose push URL is an `ext::` (runs a command) or `fd::` transport, is refused
(POLICY_DENIED): such a push would run what the repository says, not move commits. The push itself runs
with `protocol.ext.allow` and `protocol.fd.allow` forced to never.
"""

from __future__ import annotations

import hashlib
import re

from fleet.errors import FleetError
from fleet.git.files import redact_url
from fleet.git.run import run, text
from fleet.ops import catalog
from fleet.ops.gitexec import exec_git
from fleet.ops.model import Ctx, Plan, commit_paths, commits_between, is_ancestor, local_branch
from fleet.git.files import short_ref
from fleet.ops.pins import head_state, ref_sha
from fleet.ops.reach import preflight
from fleet.git.revs import check_rev


def _remotes(repo: str) -> list[str]:
    return [r for r in text(run(repo, ["remote"]).stdout).split() if r]


# Settings that make a push run a program the repository names, or allow the transports that do.
_REPO_SET = re.compile(r"protocol\.(?:.+\.)?allow|remote\..+\.(?:receivepack|uploadpack)", re.IGNORECASE)
_COMMAND_TRANSPORTS = ("ext", "fd")
NO_COMMAND_TRANSPORTS = ["-c", "protocol.ext.allow=never", "-c", "protocol.fd.allow=never"]


def destination(repo: str, remote: str) -> list[str]:
    """The URLs `git push <remote>` will push to, exactly as git resolves them; POLICY_DENIED for a
    repository-set transport setting or a command transport."""
    listing = run(repo, ["config", "--show-scope", "--includes", "-z", "--list"]).stdout.split(b"\0")
    for scope, entry in zip(listing[::2], listing[1::2]):
        key = text(entry.split(b"\n", 1)[0])
        if scope in (b"local", b"worktree") and _REPO_SET.fullmatch(key):
            raise FleetError("POLICY_DENIED", f"this repository's own config sets {key}: a push from it could run a "
                                              "program the repository names, so fleetdeck refuses it (remove it "
                                              f"with `git config --local --unset-all {key}`, or push yourself)")
    urls = [u for u in text(run(repo, ["remote", "get-url", "--push", "--all", remote]).stdout).split("\n") if u]
    for url in urls:
        helper = url.split("::", 1)[0].lower() if "::" in url else None
        if helper in _COMMAND_TRANSPORTS:
            raise FleetError("POLICY_DENIED", f"{remote}'s push URL uses the {helper}:: transport, which runs a "
                                              "command or talks to a file descriptor instead of a remote: refused")
    if not urls:
        raise FleetError("BAD_REF", f"remote {remote!r} has no URL to push to")
    return urls


def _digest(urls: list[str]) -> str:
    return hashlib.sha256("\0".join(urls).encode("utf-8", "surrogateescape")).hexdigest()


def preview_push(ctx: Ctx, args: dict) -> Plan:
    catalog.Push.known(args)
    remote = catalog.Push.text(args, "remote")
    check_rev(remote, "remote")
    if remote not in _remotes(ctx.repo):
        raise FleetError("BAD_REF", f"no remote named {remote!r} in this repository")
    name = catalog.Push.text(args, "branch")
    if name is None:
        head_ref, _ = head_state(ctx.repo)
        if head_ref is None or not head_ref.startswith("refs/heads/"):
            raise FleetError("BAD_ARGUMENT", "HEAD is detached: name the branch to push")
        name = short_ref(head_ref)
    urls = destination(ctx.repo, remote)
    ref = local_branch(ctx.repo, name, "branch")
    local = ref_sha(ctx.repo, ref)
    if local is None:
        raise FleetError("BAD_REF", f"no local branch {name!r}")
    branch = short_ref(ref)
    tracking = f"refs/remotes/{remote}/{branch}"
    remote_sha = ref_sha(ctx.repo, tracking)
    force = catalog.Push.flag(args, "force_with_lease")
    upstream = catalog.Push.flag(args, "set_upstream")
    if remote_sha == local:
        raise FleetError("BAD_ARGUMENT", f"{remote}/{branch} already has {local[:12]} (as of the last fetch)")
    fast_forward = remote_sha is None or is_ancestor(ctx.repo, remote_sha, local)
    if remote_sha:
        sending = commits_between(ctx.repo, remote_sha, local)
    else:  # a new branch on the remote: what none of its known branches has
        raw = text(run(ctx.repo, ["log", "--format=%H %s", "-z", "--max-count=51", local, "--not",
                                  f"--remotes={remote}", "--"]).stdout)
        items = [{"sha": r[:40], "subject": r[41:]} for r in raw.split("\0") if r]
        sending = {"commits": items[:50], "truncated": len(items) > 50}
    preview = {"summary": f"push {branch} ({local[:12]}) to {remote}" + (" with force-with-lease" if force else ""),
               "remote": remote, "url": redact_url(urls[0]), "push_urls": [redact_url(u) for u in urls],
               "branch": branch, "local": local,
               "remote_known": remote_sha, "remote_state_as_of": "the last fetch (nothing is fetched at preview)",
               "fast_forward": fast_forward, "commits_sent": sending["commits"],
               "commits_sent_truncated": sending["truncated"], "set_upstream": upstream,
               "force_with_lease": force, "can_undo": False,
               "note": "a push cannot be undone by fleetdeck: once the remote has it, others may fetch it"}
    warnings = []
    if not fast_forward:
        dropped = commits_between(ctx.repo, local, remote_sha)
        preview["commits_dropped_on_remote"] = dropped["commits"]
        preview["rewrites_history"] = True
        if not force:
            warnings.append("not a fast-forward: the remote will refuse it (force_with_lease would overwrite)")
    preview["reachable"], unreached = preflight(ctx.repo, urls)
    if unreached:
        warnings.append(unreached)
    if warnings:
        preview["warning"] = ". ".join(warnings)
    sent = commit_paths(ctx.repo, [local, f"^{remote_sha}"] if remote_sha else [local, "--not", f"--remotes={remote}"])
    return Plan({"remote": remote, "branch": branch, "local": local, "expected": remote_sha or "",
                 "set_upstream": upstream, "force_with_lease": force, "destination": _digest(urls)}, preview,
                refs=[ref, tracking], moves=[], paths=[], policy_refs=[branch], policy_paths=sent or [],
                paths_listed=sent is not None)


def run_push(ctx: Ctx, args: dict) -> dict:
    try:
        if _digest(destination(ctx.repo, args["remote"])) != args["destination"]:
            raise FleetError("STALE", f"{args['remote']}'s push URL changed since the preview: nothing was pushed")
    except FleetError as exc:  # checked before git runs: nothing left the machine
        exc.details["partial"] = {"touched": False}
        raise
    cmd = [*NO_COMMAND_TRANSPORTS, "push", "--porcelain"]
    if args["set_upstream"]:
        cmd.append("--set-upstream")
    if args["force_with_lease"]:
        cmd.append(f"--force-with-lease=refs/heads/{args['branch']}:{args['expected']}")
    cmd += [args["remote"], f"refs/heads/{args['branch']}:refs/heads/{args['branch']}"]
    result = exec_git(ctx.repo, cmd, literal=False)
    return {"pushed": args["local"], "remote": args["remote"], "branch": args["branch"],
            "report": text(result.stdout)[-2000:], "stderr": result.stderr[-2000:]}


catalog.Push.bind(preview_push, run_push)
