"""push: the one operation that leaves the machine, so the one fleetdeck cannot undo (the preview says so).

No network at preview time: the remote's state is the remote-tracking ref as of the last fetch, and the
preview says which commits the push would send and whether it fast-forwards. A force exists only as
`force_with_lease`, pinned to the remote-tracking sha the preview saw: if the remote moved since, git
refuses. The push runs as the person would (pre-push hook, credential helpers, ssh-agent).
"""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.git.run import run, text
from fleet.ops.gitexec import exec_git
from fleet.ops.model import Ctx, Op, Plan, commit_paths, commits_between, flag, is_ancestor, known_args, local_branch, short_ref, string
from fleet.ops.state import head_state, ref_sha
from fleet.repo.scope import check_rev


def _remotes(repo: str) -> list[str]:
    return [r for r in text(run(repo, ["remote"]).stdout).split() if r]


def preview_push(ctx: Ctx, args: dict) -> Plan:
    known_args("push", args, {"remote", "branch", "set_upstream", "force_with_lease"})
    remote = string(args, "remote", required=False) or "origin"
    check_rev(remote, "remote")
    if remote not in _remotes(ctx.repo):
        raise FleetError("BAD_REF", f"no remote named {remote!r} in this repository")
    name = string(args, "branch", required=False)
    if name is None:
        head_ref, _ = head_state(ctx.repo)
        if head_ref is None or not head_ref.startswith("refs/heads/"):
            raise FleetError("BAD_ARGUMENT", "HEAD is detached: name the branch to push")
        name = short_ref(head_ref)
    ref = local_branch(ctx.repo, name, "branch")
    local = ref_sha(ctx.repo, ref)
    if local is None:
        raise FleetError("BAD_REF", f"no local branch {name!r}")
    branch = short_ref(ref)
    tracking = f"refs/remotes/{remote}/{branch}"
    remote_sha = ref_sha(ctx.repo, tracking)
    force = flag(args, "force_with_lease")
    upstream = flag(args, "set_upstream")
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
               "remote": remote, "url": _url(ctx.repo, remote), "branch": branch, "local": local,
               "remote_known": remote_sha, "remote_state_as_of": "the last fetch (no network at preview)",
               "fast_forward": fast_forward, "commits_sent": sending["commits"], "set_upstream": upstream,
               "force_with_lease": force, "can_undo": False,
               "note": "a push cannot be undone by fleetdeck: once the remote has it, others may fetch it"}
    if not fast_forward:
        dropped = commits_between(ctx.repo, local, remote_sha)
        preview["commits_dropped_on_remote"] = dropped["commits"]
        preview["rewrites_history"] = True
        if not force:
            preview["warning"] = "not a fast-forward: the remote will refuse it (force_with_lease would overwrite)"
    sent = commit_paths(ctx.repo, [local, f"^{remote_sha}"] if remote_sha else [local, "--not", f"--remotes={remote}"])
    return Plan({"remote": remote, "branch": branch, "local": local, "expected": remote_sha or "",
                 "set_upstream": upstream, "force_with_lease": force}, preview, refs=[ref, tracking], moves=[],
                paths=[], policy_refs=[branch], policy_paths=sent or [], paths_listed=sent is not None)


def _url(repo: str, remote: str) -> str | None:
    from fleet.git.files import redact_url

    value = text(run(repo, ["config", "--get", f"remote.{remote}.url"], check=False).stdout).strip()
    return redact_url(value) if value else None


def run_push(ctx: Ctx, args: dict) -> dict:
    cmd = ["push", "--porcelain"]
    if args["set_upstream"]:
        cmd.append("--set-upstream")
    if args["force_with_lease"]:
        cmd.append(f"--force-with-lease=refs/heads/{args['branch']}:{args['expected']}")
    cmd += [args["remote"], f"refs/heads/{args['branch']}:refs/heads/{args['branch']}"]
    result = exec_git(ctx.repo, cmd, literal=False)
    return {"pushed": args["local"], "remote": args["remote"], "branch": args["branch"],
            "report": text(result.stdout)[-2000:], "stderr": result.stderr[-2000:]}


OPS = {"push": Op(preview_push, run_push)}
