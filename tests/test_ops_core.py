"""Proposals' lifecycle, policy, idempotency, quota, expiry and hostile arguments (real repos, real SQLite)."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from fleet.git.revs import found_of
from fleet.errors import FleetError
from fleet.index.store import open_index
from fleet.ops import proposals, service
from fleet.ops.policy import Subject, evaluate, load_policy, parse_policy
from fleet.repo.changes import repo_status
from tests.fleets.gitbuild import git
from tests.fleets.ops_fleet import propose, state


def _code(fn, *args, **kwargs) -> str:
    with pytest.raises(FleetError) as err:
        fn(*args, **kwargs)
    return err.value.code


def _count(ops_fleet) -> int:
    return ops_fleet["index"].conn.execute("select count(*) from proposals").fetchone()[0]


def test_proposal_is_pending_with_preview_and_nothing_changes(ops_fleet):
    before = state(ops_fleet["work"])
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    assert made["status"] == "pending" and made["proposal_id"].startswith("p-")
    assert made["approve_url"] is None
    assert "fleetdeck proposals approve " + made["proposal_id"] in made["next_action"]["message"]
    assert made["next_action"]["tool"] == "operation.status"
    assert "+edited" in made["preview"]["diff"] and made["preview"]["risk"] == "low"
    assert made["expires_at"] and not any(k.startswith("_") for k in made["preview"])
    assert state(ops_fleet["work"]) == before


def test_dry_run_stores_nothing(ops_fleet):
    out = propose(ops_fleet, "discard", {"paths": ["README.md"]}, dry_run=True)
    assert out["status"] == "dry_run" and out["proposal_id"] is None
    assert out["preview"]["risk"] == "high" and out["preview"]["files"][0]["path"] == "README.md"
    assert _count(ops_fleet) == 0


def test_idempotency_key_returns_the_same_proposal(ops_fleet):
    first = propose(ops_fleet, "stage", {"paths": ["README.md"]}, idempotency_key="k-1")
    again = propose(ops_fleet, "stage", {"paths": ["README.md"]}, idempotency_key="k-1")
    assert again["proposal_id"] == first["proposal_id"] and again["replayed"] is True
    assert _count(ops_fleet) == 1
    other_agent = propose(ops_fleet, "stage", {"paths": ["README.md"]}, agent="codex", idempotency_key="k-1")
    assert other_agent["proposal_id"] != first["proposal_id"]
    assert _code(propose, ops_fleet, "stage", {"paths": ["notes.txt"]}, idempotency_key="k-1") == "BAD_ARGUMENT"
    assert _code(propose, ops_fleet, "stage", {"all": True}, idempotency_key="bad key!") == "BAD_ARGUMENT"
    assert _code(propose, ops_fleet, "stage", {"all": True}, idempotency_key="k-1\n") == "BAD_ARGUMENT"


def test_quota_per_agent(ops_fleet, tmp_path, monkeypatch):
    policy = tmp_path / "policy.toml"
    policy.write_text("[settings]\nmax_pending_per_agent = 2\n")
    monkeypatch.setenv("FLEETDECK_POLICY", str(policy))
    for _ in range(2):
        propose(ops_fleet, "stage", {"paths": ["README.md"]})
    assert _code(propose, ops_fleet, "stage", {"paths": ["README.md"]}) == "LIMIT"
    assert propose(ops_fleet, "stage", {"paths": ["README.md"]}, agent="codex")["status"] == "pending"


def test_expired_and_cancelled_cannot_be_approved(ops_fleet):
    index = ops_fleet["index"]
    old = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    with index.write() as conn:
        conn.execute("update proposals set expires_at = ? where id = ?", (time.time() - 1, old["proposal_id"]))
    assert proposals.get(index, old["proposal_id"])["status"] == "expired"
    assert _code(service.approve, index, old["proposal_id"], "cli") == "NOT_PENDING"
    mine = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    assert _code(service.cancel, index, mine["proposal_id"], "codex") == "NOT_FOUND"  # not its own
    assert service.cancel(index, mine["proposal_id"], "claude-code")["status"] == "cancelled"
    assert _code(service.approve, index, mine["proposal_id"], "cli") == "NOT_PENDING"
    assert _code(service.cancel, index, mine["proposal_id"], "claude-code") == "NOT_PENDING"
    assert _code(service.approve, index, "p-nosuchthing", "cli") == "NOT_FOUND"


def test_reject_records_the_reason(ops_fleet):
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    row = service.reject(ops_fleet["index"], made["proposal_id"], "dashboard", "not now")
    assert (row["status"], row["decision_reason"], row["decided_by"]) == ("rejected", "not now", "dashboard")
    assert git(ops_fleet["work"], "diff", "--cached", "--name-only") == ""


def _approve_in_process(db: str, proposal_id: str, queue) -> None:
    index = open_index(db)
    try:
        queue.put(service.approve(index, proposal_id, "cli")["status"])
    except FleetError as exc:
        queue.put(exc.code)


@pytest.mark.slow
def test_racing_approvals_execute_once(ops_fleet):
    made = propose(ops_fleet, "commit", {"message": "once", "paths": ["README.md"]})
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_approve_in_process, args=(str(ops_fleet["db"]), made["proposal_id"], queue))
             for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    outcomes = sorted(queue.get(timeout=5) for _ in procs)
    assert outcomes == ["NOT_PENDING"] * 3 + ["completed"]
    assert git(ops_fleet["work"], "log", "--format=%s", "-2").splitlines() == ["once", "add app"]


def test_policy_deny_approve_auto(ops_fleet, tmp_path, monkeypatch):
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rules]]\nagent = "rogue"\naction = "deny"\nnote = "never"\n'
        '[[rules]]\nop = ["stage", "reset", "commit"]\npath = "notes.txt"\naction = "auto"\n'
        '[[rules]]\nop = "reset"\nref = "main"\naction = "deny"\n')
    monkeypatch.setenv("FLEETDECK_POLICY", str(policy))
    assert _code(propose, ops_fleet, "stage", {"all": True}, agent="rogue") == "POLICY_DENIED"
    auto = propose(ops_fleet, "stage", {"paths": ["notes.txt"]})
    assert auto["status"] == "completed" and auto["policy"]["rule"] == 2
    assert proposals.get(ops_fleet["index"], auto["proposal_id"])["decided_by"] == "policy"
    assert git(ops_fleet["work"], "diff", "--cached", "--name-only") == "notes.txt\n"
    assert propose(ops_fleet, "stage", {"paths": ["README.md"]})["status"] == "pending"  # not all paths match
    assert _code(propose, ops_fleet, "reset", {"mode": "soft", "target": "HEAD~1"}) == "POLICY_DENIED"
    high = propose(ops_fleet, "commit", {"message": "x", "amend": True, "paths": ["notes.txt"]})
    assert high["status"] == "pending" and high["policy"]["rule"] is None  # the amended commit has src/app.py
    git(ops_fleet["work"], "commit", "-q", "-m", "notes")
    (ops_fleet["work"] / "notes.txt").write_text("more notes\n")
    high = propose(ops_fleet, "commit", {"message": "x", "amend": True, "paths": ["notes.txt"]})
    assert high["status"] == "pending" and "high-risk" in high["policy"]["why"]


@pytest.mark.parametrize("text,message", [
    ("[[rules]]\naction = 'auto'\n", "auto cannot apply"),
    ("[[rules]]\nop = 'discard'\naction = 'auto'\n", "auto cannot apply"),
    ("[[rules]]\naction = 'allow'\n", "action"),
    ("[[rules]]\naction = 'deny'\ncolour = 'red'\n", "unknown key"),
    ("[settings]\nexpiry_minutes = 0\n", "expiry_minutes"),
    ("[[rules]\n", "not valid TOML"),
    ("[[rules]]\nop = 'fly'\naction = 'deny'\n", "unknown op"),
])
def test_broken_policy_fails_closed_but_reads_work(ops_fleet, tmp_path, monkeypatch, text, message):
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    monkeypatch.setenv("FLEETDECK_POLICY", str(policy))
    with pytest.raises(FleetError) as err:
        propose(ops_fleet, "stage", {"all": True})
    assert err.value.code == "POLICY_INVALID" and message in err.value.message
    assert proposals.list_proposals(ops_fleet["index"])["total"] == 0
    assert repo_status(found_of(str(ops_fleet["work"])), 10)["staged"] == []  # reads keep working


def test_configured_policy_missing_fails_closed(ops_fleet, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETDECK_POLICY", str(tmp_path / "nope.toml"))
    assert _code(propose, ops_fleet, "stage", {"all": True}) == "POLICY_INVALID"
    monkeypatch.delenv("FLEETDECK_POLICY")
    assert load_policy().source is None  # no file at the default place: every proposal needs a person


def test_default_policy_file_is_read(ops_fleet, tmp_path):
    path = tmp_path / "config" / "fleetdeck" / "policy.toml"
    path.parent.mkdir(parents=True)
    path.write_text("[[rules]]\naction = 'deny'\n")
    assert _code(propose, ops_fleet, "stage", {"all": True}) == "POLICY_DENIED"


def test_policy_first_match_and_explanations():
    policy = parse_policy({"rules": [{"agent": "codex", "op": "stage", "action": "auto"},
                                     {"op": "*", "action": "deny", "repo": "*/secret*"}]}, "test")
    secret, open_repo = Subject("stage", "/r/secret", paths=("a",)), Subject("stage", "/r/open", paths=("a",))
    assert evaluate(policy, "codex", [secret]).action == "auto"
    denied = evaluate(policy, "claude", [secret])
    assert (denied.action, denied.rule) == ("deny", 2) and "rule #2" in denied.why
    default = evaluate(policy, "claude", [open_repo])
    assert (default.action, default.rule) == ("approve", None)


@pytest.mark.parametrize("op,args,code", [
    ("stage", {"paths": ["../outside.txt"]}, "BAD_PATH"),
    ("stage", {"paths": ["/etc/passwd"]}, "BAD_PATH"),
    ("stage", {"paths": ["a\0b"]}, "BAD_PATH"),
    ("stage", {"paths": [".git/config"]}, "BAD_PATH"),
    ("stage", {"paths": ["README.md"], "all": True}, "BAD_ARGUMENT"),
    ("stage", {"paths": ["README.md"], "extra": 1}, "BAD_ARGUMENT"),
    ("discard", {"paths": ["../../x"]}, "BAD_PATH"),
    ("checkout", {"ref": "--orphan=evil"}, "BAD_REF"),
    ("checkout", {"ref": "-b", "detach": True}, "BAD_REF"),
    ("branch", {"name": "--force"}, "BAD_REF"),
    ("branch", {"name": "ok", "start_point": "--output=/tmp/x"}, "BAD_REF"),
    ("branch", {"name": "bad..name"}, "BAD_REF"),
    ("branch", {"name": "main"}, "BAD_REF"),
    ("reset", {"mode": "hard", "target": "-p"}, "BAD_REF"),
    ("reset", {"mode": "sideways", "target": "HEAD"}, "BAD_ARGUMENT"),
    ("reset", {"mode": "hard", "target": "HEAD\nx"}, "BAD_REF"),
    ("commit", {"message": "a\0b"}, "BAD_ARGUMENT"),
    ("commit", {"message": "nothing staged"}, "BAD_ARGUMENT"),
    ("stash_pop", {"index": 5}, "NOT_FOUND"),
    ("restore", {"restore_point": "p-none"}, "NOT_FOUND"),
    ("fly", {}, "BAD_ARGUMENT"),
])
def test_hostile_and_bad_arguments(ops_fleet, op, args, code):
    before = state(ops_fleet["work"])
    assert _code(propose, ops_fleet, op, args) == code
    assert state(ops_fleet["work"]) == before and _count(ops_fleet) == 0


def test_repo_outside_the_fleet_and_bad_reason(ops_fleet, tmp_path):
    index = ops_fleet["index"]
    assert _code(service.propose, index, "a", "stage", "/", {"all": True}, "r") == "REPO_NOT_IN_FLEET"
    assert _code(service.propose, index, "a", "stage", str(ops_fleet["work"]), {"all": True}, "") == "BAD_ARGUMENT"
    assert _code(service.propose, index, "a", "stage", str(ops_fleet["work"]), {"all": True}, "x" * 501) == "BAD_ARGUMENT"


def test_flag_like_ref_on_disk_is_not_checked_out(ops_fleet):
    work = ops_fleet["work"]
    sha = git(work, "rev-parse", "HEAD").strip()
    (work / ".git" / "refs" / "heads" / "--output=evil.txt").write_text(sha + "\n")
    assert _code(propose, ops_fleet, "checkout", {"ref": "--output=evil.txt"}) == "BAD_REF"
    assert not (work / "evil.txt").exists()


def test_interrupted_executing_is_never_rerun_and_reconciles(ops_fleet):
    index = ops_fleet["index"]
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    service.approve(index, made["proposal_id"], "cli", run=False)
    proposals.transition(index, made["proposal_id"], ("approved",), "executing", worker_start="1:0")
    row = service.show(index, made["proposal_id"])
    assert row["status"] == "executing" and row["interrupted"] is True
    assert service.resume_orphans(index) == []
    assert _code(service.execute, index, made["proposal_id"]) == "NOT_PENDING"
    assert service.reconcile(index, made["proposal_id"], "failed", "cli")["status"] == "failed"


def test_orphaned_approved_is_claimed_after_revalidation(ops_fleet):
    index = ops_fleet["index"]
    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    service.approve(index, made["proposal_id"], "cli", run=False)
    with index.write() as conn:
        conn.execute("update proposals set worker_start = '1:0' where id = ?", (made["proposal_id"],))
    done = service.resume_orphans(index)
    assert [d["status"] for d in done] == ["completed"]


def test_pending_proposal_tops_the_radar_until_decided(ops_fleet):
    from fleet.views.queue import radar_view

    made = propose(ops_fleet, "stage", {"paths": ["README.md"]})
    top = radar_view(ops_fleet["index"], limit=1)["entries"][0]
    assert (top["path"], top["status"]) == (str(ops_fleet["work"]), "pending_proposal")
    assert made["proposal_id"] in top["next_step"]
    service.reject(ops_fleet["index"], made["proposal_id"], "cli", "no")
    assert radar_view(ops_fleet["index"], limit=1)["entries"][0]["status"] != "pending_proposal"
