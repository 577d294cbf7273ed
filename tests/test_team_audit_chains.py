"""A machine's audit log recreated (its folder deleted: the seqs start again at 1 with a new hash chain), pushed to a
real PostgreSQL hub through the CLI: the new log is a new chain on the hub, beside the old one, which keeps every
row as it was; `audit verify --team` checks each chain on its own and the machine's log against its own chain;
the hub's audit page says the log was recreated. Before, the new entries stayed off the hub (the push's cursor
was past them) or, with the index rebuilt too, were dropped as already held (`ON CONFLICT` on the old seqs), and
verify reported the machine's log as differing from the hub's."""

from __future__ import annotations

import json
import shutil

import pytest
from starlette.testclient import TestClient

from fleet.audit.read import entries
from fleet.team.hubread import Hub
from fleet.team.listen import Listener
from tests.test_team import hub, hub_rows, machines, server  # noqa: F401  (fixtures)
from web.hub import create_hub_app

psycopg = pytest.importorskip("psycopg", reason="team mode's tests need psycopg: pip install 'fleetdeck[team]'")
pytestmark = pytest.mark.slow   # a real PostgreSQL and two machines driven through the CLI


def audit_folder(machine):
    return next(machine.home.rglob("current.jsonl")).parent


def held(dsn: str) -> list[tuple]:
    return hub_rows(dsn, "select chain, seq, hash, entry::text, line from fleetdeck.audit where machine_id = 'laptop' "
                         "order by chain, seq")


def verify(machine, dsn: str) -> tuple[int, dict]:
    proc = machine.run("audit", "verify", "--team", dsn, "--machine", "laptop", "--json", check=False)
    return proc.returncode, json.loads(proc.stdout)


def recreate(machine, agents: tuple[str, ...]) -> list[dict]:
    """The audit folder deleted, then a few entries written: the new log's entries."""
    shutil.rmtree(audit_folder(machine))
    for name in agents:
        machine.run("agents", "add", name)
    return list(entries(audit_folder(machine)))


def test_a_recreated_audit_log_is_a_new_chain_on_the_hub(machines, hub):  # noqa: F811
    laptop = machines[0]
    for name in ("claude-code", "codex", "gemini", "aider", "cursor"):
        laptop.run("agents", "add", name)
    laptop.run("team", "push", "--once")
    before = held(hub)
    assert len(before) >= 5 and verify(laptop, hub)[0] == 0
    fresh = recreate(laptop, ("cline",))
    assert fresh[0]["seq"] == 1 and len(fresh) < len(before)
    laptop.run("team", "push", "--once")
    now = held(hub)
    assert set(before) <= set(now)                                   # nothing of the old chain altered or lost
    new = [r for r in now if r not in before]
    assert [(r[1], r[2]) for r in new] == [(e["seq"], e["hash"]) for e in fresh]
    assert {r[0] for r in new} == {fresh[0]["hash"]} != {r[0] for r in before}
    code, report = verify(laptop, hub)
    assert code == 0 and report["ok"], report["problems"]
    assert len(report["chains"]) == 2 and report["local_chain"] == fresh[0]["hash"]
    assert report["compared_with_local"] and report["not_pushed_yet"] == 0
    laptop.run("agents", "add", "qwen")                              # the new chain goes on
    laptop.run("team", "push", "--once")
    assert len(held(hub)) == len(now) + 1 and verify(laptop, hub)[0] == 0
    with psycopg.connect(hub, autocommit=True) as admin:            # the hub's owner alters the new chain
        admin.execute("alter table fleetdeck.audit disable trigger audit_append_only")
        admin.execute("update fleetdeck.audit set hash = 'forged' where machine_id = 'laptop' and chain = %s "
                      "and seq = 1", (fresh[0]["hash"],))
        admin.execute("alter table fleetdeck.audit enable trigger audit_append_only")
    code, report = verify(laptop, hub)
    assert code == 3 and report["first_bad_seq"] == 1 and report["problems"][0].startswith(
        f"chain {fresh[0]['hash'][:12]}: seq 1: altered")
    app = create_hub_app(Hub(hub), Listener(hub), "t", redeem=lambda _code: False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get("/audit?machine=laptop", headers={"Authorization": "Bearer t", "Accept": "text/html"})
        assert page.status_code == 200 and "audit log was recreated: the hub holds 2 chains" in page.text


def test_a_log_recreated_with_its_index_rebuilt_lands_beside_the_old_chain(machines, hub):  # noqa: F811
    """The index deleted too (no cursor, no memory of the chain): the new log's seqs 1.. collide with the old
    chain's on the hub; they land as a chain of their own instead of being dropped as already held."""
    laptop = machines[0]
    for name in ("claude-code", "codex", "gemini"):
        laptop.run("agents", "add", name)
    laptop.run("team", "push", "--once")
    before = held(hub)
    for path in laptop.db.parent.glob("fleet.db*"):
        path.unlink()
    fresh = recreate(laptop, ("aider",))
    laptop.run("scan", str(laptop.fleet))
    laptop.run("team", "push", "--once")
    now = held(hub)
    assert set(before) <= set(now)
    mine = {(r[1], r[2]) for r in now if r[0] == fresh[0]["hash"]}
    assert mine == {(e["seq"], e["hash"]) for e in entries(audit_folder(laptop))} and (1, fresh[0]["hash"]) in mine
    code, report = verify(laptop, hub)
    assert code == 0 and report["local_chain"] == fresh[0]["hash"] and report["not_pushed_yet"] == 0
